"""A background series of the documented maximum (100,000 rows) costs each exchange what its own
window holds, not the whole series (issue 27: one flipping every 10 ms made `run` take over
900 s: every exchange shifted, scheduled and stepped through all 100,000 rows).
"""

import dataclasses
import time

import numpy as np

from transitsim.network import Exchange, LinkFault, simulate_exchange
from transitsim.network.background import MAX_ROWS, Background
from transitsim.scenario import network_preset

STEP_S = 0.01


def flipping(rows: int, first: int = 0) -> Background:
    """Rows first..first+rows-1 of a series that flips between 10 % and 50 % every 10 ms."""
    index = range(first, first + rows)
    return Background(tuple(i * STEP_S for i in index), tuple(0.5 if i % 2 else 0.1 for i in index))


def network(background: Background):
    base = network_preset("2dc-wan")
    wan = dataclasses.replace(base.wan_link, rate_bps=10e9, background=background)
    return dataclasses.replace(base, workers=8, wan_link=wan)


def test_an_exchange_on_a_long_series_equals_the_same_on_its_window_alone() -> None:
    """Bit for bit the numbers of a series holding only the rows around the exchange (with a
    fault inside it too), at clocks spread over the series, and quickly."""
    full = network(flipping(MAX_ROWS))
    exchange = Exchange("hierarchical", 4_000_000)
    start = np.linspace(0.0, 0.002, 8)
    began = time.perf_counter()
    for clock_s in (0.0, 3.2, 517.004, 999.5):
        first = max(int(clock_s / STEP_S) - 2, 0)
        window = network(flipping(min(200, MAX_ROWS - first), first))
        faults = [LinkFault("dc0->dc1", 0.003, 0.004)]
        for kwargs in ({}, {"faults": faults}):
            long = simulate_exchange(full, exchange, start_s=start, clock_s=clock_s, **kwargs)
            short = simulate_exchange(window, exchange, start_s=start, clock_s=clock_s, **kwargs)
            assert long.method == "des" and long.time_s > 0.005  # several changes inside it
            assert long.finish_s.tobytes() == short.finish_s.tobytes(), clock_s
            assert (long.wire_s, long.wait_s) == (short.wire_s, short.wait_s)
            assert long.link_stats.equals(short.link_stats)
            assert long.events <= short.events  # no row past the exchange is an event
    # 16 exchanges on the long series: each took ~0.5 s when all 100,000 rows were scheduled
    assert time.perf_counter() - began < 4.0


def test_a_long_series_prints_short() -> None:
    """repr(network) keys the fabric and schedule caches: written out in full, 100,000 rows
    cost every step more than its simulation."""
    long = flipping(MAX_ROWS)
    assert len(repr(long)) < 200
    shares = list(long.shares)
    shares[50_000] = 0.9  # one row in the middle: same size and span, another series
    other = Background(long.times_s, tuple(shares))
    assert repr(long) != repr(other) and repr(long) == repr(flipping(MAX_ROWS))
    short = flipping(3)
    assert repr(short) == (
        "Background(times_s=(0.0, 0.01, 0.02), shares=(0.1, 0.5, 0.1), greedy_flows=0)"
    )
