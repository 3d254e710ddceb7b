"""Background traffic on a link: closed-form cases, DES vs the fast paths, replay on the replay
clock, and bad CSVs refused in one line."""

import dataclasses
import math

import numpy as np
import pytest
from test_replay import make_trace

from transitsim.base.errors import TransitsimError
from transitsim.network import Exchange, LinkFault, LinkSpec, NetworkSpec, SwitchSpec
from transitsim.network import simulate_exchange as simulate
from transitsim.network.background import Background, read_background_csv
from transitsim.network.des.fluid import ExactEnvironment, FluidEngine
from transitsim.replay.compute import Stragglers
from transitsim.replay.replay import replay
from transitsim.replay.request import ReplayRequest

GBPS = 1e9
PAIR = NetworkSpec(name="pair", topology="switch", workers=2, host_link=LinkSpec(rate_bps=GBPS))


def _with_host_background(network: NetworkSpec, background: Background | None) -> NetworkSpec:
    return dataclasses.replace(
        network, host_link=dataclasses.replace(network.host_link, background=background)
    )


def _two_dcs(workers: int = 2, background: Background | None = None) -> NetworkSpec:
    return NetworkSpec(
        name="2dc",
        topology="datacentres",
        workers=workers,
        datacentres=2,
        host_link=LinkSpec(rate_bps=100 * GBPS),
        wan_link=LinkSpec(rate_bps=GBPS, background=background),
    )


# --- closed forms ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["des", "auto"])
def test_half_background_on_the_only_bottleneck_doubles_the_exchange(method):
    exchange = Exchange(algo="ring_allreduce", payload_bytes=1_000_000)
    alone = simulate(_two_dcs(), exchange, method=method)
    shared = simulate(_two_dcs(background=Background.constant(0.5)), exchange, method=method)
    # 2 workers, one in each DC: each sends half the payload twice across the 1 Gb/s WAN
    assert alone.time_s == pytest.approx(2 * 500_000 * 8 / GBPS, rel=1e-12)
    assert shared.time_s == pytest.approx(2 * alone.time_s, rel=1e-12)
    assert shared.wire_s == pytest.approx(2 * alone.wire_s, rel=1e-12)
    wan = shared.link_stats.set_index("link").loc["dc0->dc1"]
    assert wan["rate_bps"] == pytest.approx(0.5 * GBPS)  # what training could use


def test_constant_background_is_taken_by_the_fast_paths_and_matches_the_des():
    quarter = _with_host_background(PAIR, Background.constant(0.25))
    exchange = Exchange(algo="ring_allgather", payload_bytes=3_000_000)
    fast = simulate(quarter, exchange, method="fast")
    des = simulate(quarter, exchange, method="des")
    assert fast.method == "fast"
    assert fast.time_s == pytest.approx(3_000_000 * 8 / (0.75 * GBPS), rel=1e-12)
    np.testing.assert_allclose(fast.finish_s, des.finish_s, rtol=1e-12)


def _step_to_half(at_s: float) -> Background:
    return Background((0.0, at_s), (0.0, 0.5))


def test_a_step_from_full_to_half_capacity_mid_exchange():
    # one phase: each of 2 workers sends 8 Mbit to the other at 1 Gb/s (8 ms alone); at 4 ms the
    # links drop to half: 4 Mbit sent, the other 4 Mbit at 0.5 Gb/s take 8 ms: done at 12 ms
    network = _with_host_background(PAIR, _step_to_half(0.004))
    exchange = Exchange(algo="ring_allgather", payload_bytes=1_000_000)
    for method in ("auto", "des"):
        result = simulate(network, exchange, method=method)
        assert result.method == "des"
        assert result.time_s == pytest.approx(0.012, rel=1e-12)
    with pytest.raises(TransitsimError, match="background share changes during the exchange"):
        simulate(network, exchange, method="fast")
    # on the replay clock: the same exchange started at t = 10 s meets the change at 10.004 s
    late = _with_host_background(PAIR, _step_to_half(10.004))
    assert simulate(late, exchange, clock_s=10.0).time_s == pytest.approx(0.012, rel=1e-9)
    # before the change and after it: the constant networks, on the fast path
    early = simulate(late, exchange, clock_s=5.0)
    assert early.method == "fast" and early.time_s == pytest.approx(0.008, rel=1e-12)
    after = simulate(late, exchange, clock_s=11.0)
    assert after.method == "fast" and after.time_s == pytest.approx(0.016, rel=1e-12)


def test_a_fault_inside_a_background_period_restores_that_periods_rate():
    # half capacity from 0; the link is down 2..4 ms: 2 ms at 0.5 Gb/s (1 Mbit), stalled 2 ms,
    # then the 7 Mbit left at 0.5 Gb/s: 14 ms more, done at 18 ms (not 11 ms at full rate)
    network = _with_host_background(PAIR, Background((0.0, 1.0), (0.5, 0.0)))
    exchange = Exchange(algo="ring_allgather", payload_bytes=1_000_000)
    fault = LinkFault("h0->sw", 0.002, 0.004)
    result = simulate(network, exchange, faults=[fault], method="des")
    assert result.finish_s[1] == pytest.approx(0.018, rel=1e-12)
    assert result.finish_s[0] == pytest.approx(0.016, rel=1e-12)  # h1's link was never down


def test_csv_series_read_in_each_form(tmp_path):
    shares = tmp_path / "shares.csv"
    shares.write_text("time_s,background_share\n0,0\n0.004,0.5\n")
    available = tmp_path / "available.csv"
    available.write_text("time_s,available_share\n0,1\n0.004,0.5\n")
    rates = tmp_path / "rates.csv"
    rates.write_text('time_s,available_rate\n0,1 Gb/s\n0.004,"500 Mb/s"\n')
    for path in (shares, available, rates):
        assert read_background_csv(path, GBPS) == _step_to_half(0.004)


# --- DES and fast paths agree on random small cases --------------------------------------------


def _random_background(rng: np.random.Generator) -> Background:
    if rng.random() < 0.4:
        return Background.constant(float(rng.choice([0.1, 0.25, 0.5, 0.8])))
    count = int(rng.integers(2, 5))
    times = np.sort(rng.choice(np.arange(1, 40), size=count - 1, replace=False)) * 1e-4
    return Background((0.0, *times.tolist()), tuple(rng.uniform(0.0, 0.9, count).tolist()))


def test_des_and_fast_paths_agree_on_random_small_cases():
    rng = np.random.default_rng(12)
    checked = {"fast": 0, "des": 0}
    for case in range(24):
        background = _random_background(rng)
        kind = case % 3
        if kind == 0:
            network = _with_host_background(
                dataclasses.replace(PAIR, workers=int(rng.integers(2, 5))), background
            )
            algo = str(rng.choice(["ring_allreduce", "ring_allgather"]))
        elif kind == 1:
            network = _two_dcs(workers=4, background=background)
            algo = str(rng.choice(["hierarchical", "ring_allgather"]))
        else:
            network = dataclasses.replace(
                _with_host_background(PAIR, background),
                workers=3,
                switch=SwitchSpec(aggregator=True),
            )
            algo = "switch_sum"
        exchange = Exchange(algo=algo, payload_bytes=int(rng.integers(1, 40)) * 10_000)
        start = rng.uniform(0.0, 2e-3, network.workers)
        clock = float(rng.choice([0.0, 1e-3, 2.5e-3]))
        auto = simulate(network, exchange, start_s=start, clock_s=clock)
        des = simulate(network, exchange, start_s=start, clock_s=clock, method="des")
        np.testing.assert_allclose(auto.finish_s, des.finish_s, rtol=1e-9, atol=0)
        checked[auto.method] += 1
    assert checked["fast"] >= 5 and checked["des"] >= 3  # both routes were taken


# --- replay on the replay clock ---------------------------------------------------------------


def _trace(tmp_path, steps: int = 12):
    return make_trace(tmp_path, steps=list(range(1, steps + 1)), payload_bytes=2_000_000)


def _rack(background: Background | None) -> NetworkSpec:
    return _with_host_background(
        NetworkSpec(name="rack", topology="switch", workers=4, host_link=LinkSpec(rate_bps=GBPS)),
        background,
    )


def test_replay_follows_a_series_step_by_step(tmp_path):
    trace = _trace(tmp_path)
    plain = replay(trace, ReplayRequest(_rack(None))).timeline
    half = replay(trace, ReplayRequest(_rack(Background.constant(0.5)))).timeline
    change_s = float(plain["time_s"].iloc[3]) + 0.02  # inside step 5's compute
    mid_s = float(plain["time_s"].iloc[6]) + 0.06  # inside step 8's exchange (after the half)
    series = Background((0.0, change_s, mid_s), (0.0, 0.5, 0.0))
    result = replay(trace, ReplayRequest(_rack(series)))
    timeline = result.timeline
    # steps 1-4 as without background, 5 on half capacity (the change is before its exchange)
    np.testing.assert_allclose(timeline["step_s"].iloc[:4], plain["step_s"].iloc[:4], rtol=1e-12)
    assert timeline["step_s"].iloc[4] == pytest.approx(half["step_s"].iloc[4], rel=1e-12)
    # every step is one of: full, half, or in between where the series changes inside it
    between = (timeline["step_s"] > plain["step_s"] * (1 + 1e-9)) & (
        timeline["step_s"] < half["step_s"] * (1 - 1e-9)
    )
    assert between.sum() >= 1
    assert timeline["step_s"].iloc[-1] == pytest.approx(plain["step_s"].iloc[-1], rel=1e-12)
    every = replay(trace, ReplayRequest(_rack(series), reuse=False)).timeline
    np.testing.assert_allclose(every["time_s"], timeline["time_s"], rtol=1e-12)
    assert result.step_detail["reused"].any()  # the pieces are still reused
    # with overlap too: reuse and a step-by-step replay agree
    overlapped = replay(trace, ReplayRequest(_rack(series), overlap="buckets")).timeline
    stepwise = replay(trace, ReplayRequest(_rack(series), overlap="buckets", reuse=False)).timeline
    np.testing.assert_allclose(overlapped["time_s"], stepwise["time_s"], rtol=1e-12)
    # and random stragglers (simulated step by step) with a fault on top
    jitter = Stragglers(distribution="lognormal", sigma=0.1)
    fault = [LinkFault("h1->sw", change_s - 0.01, change_s + 0.05)]
    with_fault = replay(
        trace, ReplayRequest(_rack(series), stragglers=jitter, faults=fault)
    ).timeline
    assert np.isfinite(with_fault["time_s"]).all()
    assert with_fault["time_s"].iloc[-1] > replay(
        trace, ReplayRequest(_rack(series), stragglers=jitter)
    ).timeline["time_s"].iloc[-1] * (1 + 1e-6)


def test_rows_standing_for_many_steps_split_at_a_change(tmp_path):
    rows = make_trace(
        tmp_path, steps=[10, 20], rows="evaluated_steps", payload_bytes=2_000_000, name="A-rows"
    )
    plain = replay(rows, ReplayRequest(_rack(None))).timeline
    step_s = float(plain["step_s"].iloc[0])
    series = Background((0.0, 3.5 * step_s), (0.0, 0.5))
    result = replay(rows, ReplayRequest(_rack(series)))
    every = replay(rows, ReplayRequest(_rack(series), reuse=False)).timeline
    np.testing.assert_allclose(result.timeline["time_s"], every["time_s"], rtol=1e-12)
    assert result.step_detail["steps"].tolist()[:2] == [3, 1]  # 3 free steps, then the change
    assert len(result.step_detail) < 8  # not one simulation a step


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        ("time,share\n0,0.5\n", "header must have time_s and one of"),
        ("time_s,background_share\n", "has a header but no rows"),
        ("time_s,background_share\n0,x\n", ":2: background_share must be a number, got 'x'"),
        ("time_s,background_share\n0,0.5,7\n", ":2: expected 2 fields"),
        ("time_s,background_share\n0,-0.1\n", ":2: background_share must be >= 0, got -0.1"),
        ("time_s,background_share\n0,1\n", ":2: background_share must be < 1, got 1"),
        ("time_s,available_share\n0,0\n", ":2: available_share must be in (0, 1], got 0"),
        ("time_s,background_share\n0,0.1\n5,0.2\n3,0.1\n", ":4: time_s must increase"),
        ("time_s,background_share\n0,0.1\n0,0.2\n", ":3: time_s must increase"),
        ("time_s,background_share\n-1,0.1\n", ":2: time_s must be >= 0"),
        ("time_s,background_share\nnan,0.1\n", ":2: time_s must be finite"),
        ("time_s,available_rate\n0,fast\n", ':2: available_rate: expected a rate like "200 Gb/s"'),
        ("time_s,available_rate\n0,2 Gb/s\n", ":2: available_rate 2 Gb/s is more than"),
    ],
)
def test_bad_csvs_are_one_line_errors(tmp_path, text, message):
    path = tmp_path / "bg.csv"
    path.write_text(text)
    with pytest.raises(TransitsimError) as info:
        read_background_csv(path, GBPS)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_bad_background_objects_are_refused():
    with pytest.raises(TransitsimError, match="must be < 1"):
        Background.constant(1.0)
    with pytest.raises(TransitsimError, match=">= 0"):
        Background.constant(-0.5)
    with pytest.raises(TransitsimError, match="times must increase"):
        Background((0.0, 0.0), (0.1, 0.2))
    with pytest.raises(TransitsimError, match="finite"):
        Background((0.0, math.inf), (0.1, 0.2))
    with pytest.raises(TransitsimError, match="must be a Background"):
        simulate(
            _with_host_background(PAIR, 0.5),  # type: ignore[arg-type]
            Exchange(algo="ring_allgather", payload_bytes=10),
        )
    with pytest.raises(TransitsimError, match="clock_s must be a finite"):
        simulate(PAIR, Exchange(algo="ring_allgather", payload_bytes=10), clock_s=math.nan)


# --- greedy competing flows ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("flows", "greedy", "available", "finish_s"),
    [
        (1, 1, 1.0, 2.0),  # one training flow and one greedy: half the link, as 50 % reserved
        (1, 0, 0.5, 2.0),
        (2, 1, 1.0, 3.0),  # two training flows and one greedy: a third each (1/(N + 1))
        (2, 0, 0.5, 4.0),  # ... where a 50 % reserved share leaves each a quarter
        (2, 2, 0.5, 8.0),  # both: 2 greedy flows share the unreserved half: an eighth each
    ],
)
def test_greedy_flows_share_max_min_unlike_a_reserved_share(flows, greedy, available, finish_s):
    env = ExactEnvironment()
    engine = FluidEngine(env, np.array([1e6 * available]), greedy={0: greedy} if greedy else None)
    done: list[float] = []
    for _ in range(flows):
        engine.start((0,), (1.0,), 1e6, lambda t, *_: done.append(t))
    env.run()
    assert done == pytest.approx([finish_s] * flows, rel=1e-12)


def test_greedy_background_flows_run_on_the_des_and_in_replay(tmp_path):
    greedy = Background((0.0,), (0.0,), greedy_flows=1)
    network = _with_host_background(PAIR, greedy)
    exchange = Exchange(algo="ring_allgather", payload_bytes=1_000_000)
    result = simulate(network, exchange)
    assert result.method == "des" and result.time_s == pytest.approx(0.016, rel=1e-12)
    with pytest.raises(TransitsimError, match="greedy background flows"):
        simulate(network, exchange, method="fast")
    trace = _trace(tmp_path, steps=6)
    plain = replay(trace, ReplayRequest(_rack(None))).timeline
    shared = replay(trace, ReplayRequest(_rack(greedy)))
    assert (shared.timeline["step_s"] > plain["step_s"] * 1.1).all()
    every = replay(trace, ReplayRequest(_rack(greedy), reuse=False)).timeline
    np.testing.assert_allclose(every["time_s"], shared.timeline["time_s"], rtol=1e-12)
    assert shared.step_detail["reused"].sum() == 5  # one simulation, reused
    with pytest.raises(TransitsimError, match="greedy_flows must be an integer"):
        Background((0.0,), (0.0,), greedy_flows=-1)
