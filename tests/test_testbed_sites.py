"""Issue 25 on the testbed: two sites joined by a shaped WAN (built, measured, torn down), the
hierarchical all-reduce, the load and repeats recorded per point, the endpoint fit, the grid.

The namespace test skips (with the reason) where namespaces cannot be made or torch is missing;
it checks that nothing of its own is left, namespaces or ledger.
"""

import json
import math
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from netns_skip import REASON, needs_netns, no_leftovers  # noqa: F401 (autouse fixture)

from transitsim.base.errors import TransitsimError
from transitsim.network.exchange import ExchangeResult
from transitsim.testbed import flags, gloo_algos, ledger, model, netns
from transitsim.testbed.netns import Shaping, Testbed
from transitsim.testbed.tables import check_measured

REPO = Path(__file__).resolve().parents[1]
MEASURED = REPO / "docs" / "testbed" / "previous" / "measured.parquet"


def _qdisc(ns: str, dev: str) -> str:
    return netns._run(["tc", "-n", ns, "qdisc", "show", "dev", dev]).stdout


@needs_netns
def test_the_wan_queue_is_tbfs_latency_in_whole_milliseconds():
    args = {"rates": "200 Mb/s", "workers_text": "2,4", "sizes": "64 KiB,1 MiB,4 MiB",
            "collectives": "all-reduce", "calibrate": "64 KiB,4 MiB", "call_limit": 2.0,
            "budget": 2.0, "repeats": (5, 20), "warmup": 1, "sites": 2,
            "wan_rate": "50 Mb/s"}  # fmt: skip
    assert flags.grid(**args).wan_queue_s == 0.05  # tbf's bound as before when not given
    assert flags.grid(**args, wan_queue="20 ms").wan_queue_s == 0.02
    assert Shaping(50e6, 3028, 0.02).tc_args()[-2:] == ["latency", "20ms"]


def test_two_sites_are_built_measured_and_torn_down():
    """2 sites x 2 hosts at 200 Mb/s, a 50 Mb/s WAN: the flat ring and the hierarchical
    all-reduce measured at 256 KiB, simulated on `datacentres`, and nothing left behind."""
    pytest.importorskip("torch", reason="the testbed's workers need torch")
    from transitsim.testbed.measure import Point, measure_rtt, point_rows, run_counted

    t0 = time.monotonic()
    testbed = Testbed(4, Shaping.for_rate(200e6), sites=2, wan_shaping=Shaping.for_rate(50e6))
    with testbed:
        run_id = testbed.run_id
        ours = sorted(n for n in netns.list_namespaces() if n.startswith(run_id))
        assert ours == sorted(f"{run_id}-{n}" for n in ("sw", "sw1", "h0", "h1", "h2", "h3"))
        for site in (0, 1):  # both ends of the WAN shaped at its rate, and on the site's bridge
            assert re.search(r"tbf .*rate 50Mbit", _qdisc(testbed.site_switch(site), "wan"))
        assert [testbed.site_of(i) for i in range(4)] == [0, 0, 1, 1]
        rtt = measure_rtt(testbed, 29581, count=100)
        rtt_wan = measure_rtt(testbed, 29582, count=100, far=2)
        points = [
            Point(c, 256 << 10, 1, 3, 8, 0.05, 2.0) for c in ("all_reduce", gloo_algos.HIERARCHICAL)
        ]
        merged, efficiency = run_counted(testbed, 4, points, 29583)
        rows = point_rows(testbed, merged, 4, efficiency, rtt, rtt_wan)
    assert not [n for n in netns.list_namespaces() if n.startswith(run_id)]
    assert not (ledger.STATE_DIR / f"{run_id}.json").exists()
    assert 0.85 < efficiency < 0.97 and 0 < rtt < 0.01 and 0 < rtt_wan < 0.01
    table = check_measured(pd.DataFrame(rows), "two sites")
    assert table["layout"].tolist() == ["2 sites flat", "2 sites hierarchical"]
    assert (table["repeats"] >= 3).all() and (table["repeats"] <= 8).all()
    assert table["repeat_stop"].isin(["spread", "max repeats", "time"]).all()
    assert table["load_start"].between(0, 1e3).all() and table["load_end"].between(0, 1e3).all()
    compared = model.compare(table, (256 << 10,))
    assert np.isfinite(compared["simulated_s"]).all() and (compared["simulated_s"] > 0).all()
    # the WAN (50 Mb/s) is the bottleneck: the links alone are within a third either way
    assert compared["rel_error"].abs().max() < 0.35, compared[["collective", "median_s",
                                                               "simulated_s"]]  # fmt: skip
    assert time.monotonic() - t0 < 60


def test_two_site_points_replay_on_two_datacentres():
    row = pd.Series({"collective": gloo_algos.HIERARCHICAL, "workers": 4, "bytes": 1 << 20,
                     "rate_bps": 200e6, "qdisc_efficiency": 0.95, "rtt_s": 40e-6,
                     "rtt_wan_s": 60e-6, "sites": 2, "wan_rate_bps": 50e6,
                     "start_offsets_s": "[0, 0, 0, 0]"})  # fmt: skip
    network = model.point_network(row, 0.0, model.Endpoint(1e-3, 3e8))
    assert network.topology == "datacentres" and network.datacentres == 2
    assert network.wan_link.rate_bps == 50e6 and network.wan_link.latency_s == pytest.approx(1e-5)
    assert network.host.ranks_per_host == 4 and network.host.rate_bps == 3e8
    segments = gloo_algos.segments_per_message(gloo_algos.HIERARCHICAL, 1 << 20, 4)
    assert network.host.per_message_s == pytest.approx(1e-3 * segments)
    # WAN-bound: hierarchical sends the payload once each way, the flat ring 2(P-1)/P of it
    flat = row.copy()
    flat["collective"] = "all_reduce"
    assert model.simulate_point(row) < model.simulate_point(flat)


def _fake_simulate(network, exchange, start_s=None, **_):
    """A stand-in simulator with an endpoint: bytes at min(link, host rate / ranks) plus the
    host's cost per message, 2(P-1) (all-reduce) or P-1 (all-gather) messages in series."""
    p = network.workers
    algo = exchange.algo
    sent = exchange.payload_bytes * (2 * (p - 1) / p if algo == "ring_allreduce" else p - 1)
    messages = 2 * (p - 1) if algo == "ring_allreduce" else p - 1
    host = network.host
    rate = network.host_link.payload_bps
    if host is not None:
        rate = min(rate, host.rate_bps / host.ranks_per_host)
    time_s = sent * 8 / rate + messages * (host.per_message_s if host else 0.0)
    return ExchangeResult(np.full(p, time_s), time_s, 0, time_s, 0, np.zeros(p), np.zeros(p), 0)


def test_the_endpoint_fit_recovers_o_and_the_rate_and_predicts_the_rest(monkeypatch):
    """Against a simulator that honours NetworkSpec.host: a table made by it with o = 2 ms per
    gloo transfer and a 400 Mb/s endpoint is fitted back from 64 KiB and 4 MiB, and every other
    point predicted."""
    monkeypatch.setattr(model, "simulate_exchange", _fake_simulate)
    table = check_measured(pd.read_parquet(MEASURED), MEASURED)
    table = table[table["rate_bps"] == 1e9].reset_index(drop=True)
    truth = model.Endpoint(2e-3, 400e6)
    table["median_s"] = [model.simulate_point(r, 0.0, truth) for _, r in table.iterrows()]
    compared = model.compare(table)
    assert compared["host_per_transfer_s"].iloc[0] == pytest.approx(2e-3, rel=0.02)
    assert compared["host_rate_bps"].iloc[0] == pytest.approx(400e6, rel=0.02)
    assert compared.loc[~compared["fitted"], "rel_error"].abs().max() < 0.01
    assert set(compared.loc[compared["fitted"], "bytes"]) == {64 << 10, 4 << 20}


def test_the_real_simulator_fits_an_endpoint_on_the_committed_table():
    """The simulator honours NetworkSpec.host, so compare fits one on the two sizes."""
    table = check_measured(pd.read_parquet(MEASURED), MEASURED)
    compared = model.compare(table[table["rate_bps"] == 50e6])
    assert compared["host_fitted"].all() and (compared["alpha_s"] == 0).all()
    assert (compared["host_per_transfer_s"] > 0).all()


def test_an_old_table_is_one_site_with_unknown_load():
    table = check_measured(pd.read_parquet(MEASURED), MEASURED)
    assert (table["sites"] == 1).all() and (table["layout"] == "1 site").all()
    assert table["load_start"].isna().all() and (table["repeat_stop"] == "not recorded").all()
    counts = model.load_counts(table)
    assert counts["points_loaded"] == 0 and counts["points_load_unknown"] == 85
    assert counts["points_foreign"] == 0 and counts["load_limit"] == 1.5
    # a point's own load average counts the run's ranks: reported, not judged; the run's start
    # above the limit and other processes' running threads are what make a point not quiet
    busy = table.assign(load_start=6.0, load_end=7.5, loadavg_1m_at_start=0.5, foreign_running=0)
    counts = model.load_counts(busy)
    assert counts["points_loaded"] == 0 and counts["points_foreign"] == 0
    assert counts["point_load_max"] == 7.5
    loaded = busy.assign(loadavg_1m_at_start=2.0, foreign_running=np.where(table.index < 3, 1, 0))
    counts = model.load_counts(loaded)
    assert counts["points_loaded"] == 85 and counts["points_foreign"] == 3


def _two_site_table() -> pd.DataFrame:
    frame = pd.read_parquet(MEASURED)
    frame = frame[(frame["rate_bps"] == 200e6) & (frame["workers"] == 4)].reset_index(drop=True)
    return frame.assign(sites=2, wan_rate_bps=50e6, rtt_wan_s=frame["rtt_s"] * 1.5,
                        layout="2 sites flat", load_start=0.4, load_end=0.6,
                        repeat_stop="spread")  # fmt: skip


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda f: f.assign(layout="1 site"), "expected '2 sites flat'"),
        (
            lambda f: f.assign(sites=1, layout="1 site", collective=gloo_algos.HIERARCHICAL),
            "needs two sites",
        ),  # fmt: skip
        (lambda f: f.assign(sites=3), "'sites'"),
        (lambda f: f.assign(wan_rate_bps=0.0), "WAN rate"),
        (lambda f: f.assign(workers=3, start_offsets_s="[0, 0, 0]"), "even worker count"),
        (lambda f: f.assign(load_start=-1.0), "'load_start'"),
        (lambda f: f.assign(load_end=math.inf), "'load_end'"),
        (lambda f: f.assign(repeat_stop="bored"), "'repeat_stop'"),
        (lambda f: f.assign(layout=3), "'layout'"),
    ],
)
def test_the_new_columns_are_held_to_their_rules(change, words):
    good = check_measured(_two_site_table(), "t")
    assert (good["layout"] == "2 sites flat").all()
    with pytest.raises(TransitsimError, match=re.escape(words)):
        check_measured(change(_two_site_table()), "t")


def test_an_unknown_load_is_allowed():
    table = check_measured(_two_site_table().assign(load_start=math.nan), "t")
    assert table["load_start"].isna().all()


def test_the_default_grid_is_estimated_under_35_minutes():
    """The CLI's defaults (testbed_cmd): 1 site at 50 Mb/s, 200 Mb/s, 1 Gb/s; 2 sites."""
    sizes = "64 KiB,256 KiB,1 MiB,4 MiB,16 MiB,64 MiB"
    args = ("all-reduce,all-gather", "64 KiB,4 MiB", 3.0, 6.0, (5, 60), 2)
    one = flags.grid("50 Mb/s,200 Mb/s,1 Gb/s", "2,4,8", sizes, *args)
    two = flags.grid("200 Mb/s,1 Gb/s", "2,4,8", sizes, *args, 0.05, 2, "50 Mb/s")
    assert one.estimate_s() < 35 * 60 and two.estimate_s() < 35 * 60
    assert sum(len(one.points(r, n)) for r in one.rates_bps for n in one.workers) >= 80
    planned = two.points(200e6, 4)
    assert gloo_algos.HIERARCHICAL in {p.collective for p in planned}
    assert all(p.max_repeats == 60 and p.target_spread == 0.05 for p in planned)


@pytest.mark.parametrize(
    "extra, words",
    [
        ({"sites": 2}, "needs --wan-rate"),
        ({"wan_rate": "50 Mb/s"}, "needs --sites 2"),
        ({"sites": 2, "wan_rate": "1 Gb/s"}, "below every host link rate"),
        ({"sites": 2, "wan_rate": "50 Mb/s", "workers_text": "2,3"}, "must be even"),
        ({"sites": 3, "wan_rate": "50 Mb/s"}, "--sites"),
        ({"target_spread": math.nan}, "--target-spread"),
        ({"calibrate": "64 KiB,1 MiB,4 MiB"}, "at most 2 sizes"),
        ({"wan_queue": "20 ms"}, "--wan-queue needs --sites 2"),
        ({"sites": 2, "wan_rate": "50 Mb/s", "wan_queue": "5 us"}, "expected 1 ms to 1 s"),
        ({"sites": 2, "wan_rate": "50 Mb/s", "wan_queue": "2 s"}, "expected 1 ms to 1 s"),
        ({"sites": 2, "wan_rate": "50 Mb/s", "wan_queue": "soon"}, "--wan-queue"),
    ],
)
def test_bad_site_and_fit_flags_are_one_line(extra, words):
    args = {"rates": "200 Mb/s", "workers_text": "2,4", "sizes": "64 KiB,1 MiB,4 MiB",
            "collectives": "all-reduce", "calibrate": "64 KiB,4 MiB", "call_limit": 2.0,
            "budget": 2.0, "repeats": (5, 20), "warmup": 1, **extra}  # fmt: skip
    with pytest.raises(TransitsimError, match=re.escape(words)):
        flags.grid(**args)


def test_the_ledger_takes_the_second_sites_switch_and_nothing_more(tmp_path):
    run_id = "tsb-12345-0123abcd"
    for name, ok in ((f"{run_id}-sw1", True), (f"{run_id}-sw2", False), (f"{run_id}-h3", True)):
        path = tmp_path / f"{run_id}.json"
        path.write_text(json.dumps({"run_id": run_id, "owner": [12345, 1], "processes": [],
                                    "namespaces": {name: None}}))  # fmt: skip
        assert (ledger.load(path) is not None) == ok, name


def test_the_ranks_agree_on_the_spread_as_numpy_computes_it():
    pytest.importorskip("torch", reason="worker.py imports torch")
    from transitsim.testbed.worker import _spread

    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 12, 40):
        times = rng.uniform(0.1, 0.2, n).tolist()
        q25, q50, q75 = np.percentile(times, [25, 50, 75])
        assert _spread(times) == pytest.approx((q75 - q25) / q50)


def _two_site_base() -> pd.DataFrame:
    """8 committed 50 Mb/s points at P = 2 as a 2-site table (a 25 Mb/s WAN), all-reduces also
    as hierarchical ones: every new column present."""
    frame = pd.read_parquet(MEASURED)
    frame = frame[(frame["rate_bps"] == 50e6) & (frame["workers"] == 2)].reset_index(drop=True)
    hier = frame[frame["collective"] == "all_reduce"].assign(
        collective=gloo_algos.HIERARCHICAL, layout="2 sites hierarchical"
    )
    frame = pd.concat([frame.assign(layout="2 sites flat"), hier], ignore_index=True)
    return frame.assign(sites=2, wan_rate_bps=25e6, rtt_wan_s=frame["rtt_s"] * 1.5,
                        load_start=0.3, load_end=0.5, repeat_stop="spread")  # fmt: skip


def test_generated_broken_two_site_tables_are_compared_whole_or_refused():
    """Issue 27's fuzz of measured tables, on a table with every column issue 25 added: a
    comparison of every row with finite outputs, or one line and nothing written."""
    import tempfile

    from cli_run import run_cli
    from hypothesis import given
    from test_hostile_fuzz import FUZZ_TESTBED, _write_frame, measured_mutation

    @FUZZ_TESTBED
    @given(frame=measured_mutation(_two_site_base()))
    def check(frame):
        with tempfile.TemporaryDirectory() as folder:
            path, out = Path(folder) / "measured.parquet", Path(folder) / "out"
            _write_frame(frame, path)
            argv = ["testbed", "compare", str(path), "--calibrate", "64 KiB,1 MiB", "-o", str(out)]
            code, _, stderr = run_cli(argv)
            if code != 0:
                lines = stderr.splitlines()
                assert code == 2 and len(lines) == 1, (argv, stderr)
                assert lines[0].startswith("transitsim: error: ") and "Traceback" not in stderr
                assert not out.exists(), "a refused comparison wrote"
                return
            table = pd.read_csv(out / "comparison.csv")
            assert len(table) == len(frame)
            assert table["simulated_s"].map(math.isfinite).all()
            assert (table["simulated_s"] > 0).all()
            assert set(table["layout"]) <= {"2 sites flat", "2 sites hierarchical"}

    check()


def test_a_busy_process_outside_the_run_is_counted_and_the_runs_own_are_not():
    pytest.importorskip("torch")
    import subprocess
    import sys
    import time

    from transitsim.testbed.worker import foreign_running_pids

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and busy.pid not in foreign_running_pids(0):
            time.sleep(0.05)  # until it is past its start-up reads and spinning
        assert busy.pid in foreign_running_pids(0)  # no run of ours: it is someone else's
        assert busy.pid not in foreign_running_pids(os.getpid())  # our child: the run's own
    finally:
        busy.kill()
        busy.wait(timeout=10)
