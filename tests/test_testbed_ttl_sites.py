"""`testbed ttl --sites 2`: the hosts split over two sites joined by one shaped WAN. The
calibration's WAN reaches every replayed exchange; bad flags are one line; a tiny real run
(one gloo rank per site) where namespaces can be made."""

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from netns_skip import measured_within, needs_netns
from test_testbed_ttl import simulated_calibration, ttl_miss

from transitsim.network import Exchange, simulate_exchange
from transitsim.testbed import gloo_algos
from transitsim.testbed import model as testbed_model
from transitsim.testbed.ttl_network import calibrate_rate, network_for
from transitsim.traces.format import read_trace

HOST_BPS, WAN_BPS = 400e6, 50e6


def _calibration(sites: int, truth: testbed_model.Endpoint) -> pd.DataFrame:
    """The 4 hosts' calibration at 400 Mb/s, with (sites=2) a 50 Mb/s WAN 100 us each way."""
    if sites == 1:
        return simulated_calibration(truth, HOST_BPS)
    return simulated_calibration(truth, HOST_BPS, 2, WAN_BPS, 260e-6)


def test_two_site_calibration_puts_the_wan_into_every_replayed_exchange():
    """The endpoint is fitted back through the WAN; the NetworkSpec of a replayed exchange is two
    datacentres with the calibration's WAN rate and latency ((rtt_wan - rtt) / 2), and a 4 MiB
    ring all-reduce takes the WAN's time for its bytes, far more than on one site."""
    truth = testbed_model.Endpoint(0.5e-3, math.inf)
    net = calibrate_rate(_calibration(2, truth))
    assert (net.sites, net.wan_rate_bps) == (2, WAN_BPS)
    assert net.wan_latency_s == pytest.approx(100e-6)
    assert net.host is not None and net.host.per_message_s == pytest.approx(0.5e-3, rel=0.05)
    assert net.host.rate_bps == math.inf
    assert net.columns()["net_sites"] == 2
    payload = 4 << 20
    spec = network_for(net, 4, HOST_BPS, "all_reduce", payload)
    assert spec.topology == "datacentres" and spec.datacentres == 2
    assert spec.wan_link.rate_bps == WAN_BPS and spec.wan_link.latency_s == pytest.approx(100e-6)
    algo = gloo_algos.transitsim_algo("all_reduce")
    across = simulate_exchange(spec, Exchange(algo, payload)).time_s
    one_site = simulate_exchange(
        network_for(calibrate_rate(_calibration(1, truth)), 4, HOST_BPS, "all_reduce", payload),
        Exchange(algo, payload),
    ).time_s
    wan_bytes_s = 2 * 3 / 4 * payload * 8 / (WAN_BPS * 0.95)  # each WAN direction, one ring
    assert across >= wan_bytes_s and across > 4 * one_site
    bare = network_for(net, 4, HOST_BPS, "all_reduce", payload, fixed_costs=False)
    assert bare.wan_link.latency_s == 0 and bare.wan_link.rate_bps == WAN_BPS


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--sites", "2"], "--sites 2 needs --wan-rate"),
        (["--wan-rate", "50 Mb/s"], "--wan-rate needs --sites 2"),
        (["--sites", "3"], "--sites: expected 1 or 2"),
        (["--sites", "2", "--wan-rate", "50 Mb/s", "--hosts", "3"], "--hosts must be even"),
        (["--sites", "2", "--wan-rate", "1 Gb/s", "--rates", "400 Mb/s"], "below every host"),
        (["--sites", "2", "--wan-rate", "fast"], "rate"),
    ],
)
def test_bad_two_site_flags_are_one_line_and_exit_2(tmp_path, capsys, flags, message):
    from transitsim.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["testbed", "ttl", *flags, "-o", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert os.listdir(tmp_path) == []


@needs_netns
def test_one_gloo_rank_a_site_across_a_shaped_wan_is_predicted(tmp_path):
    """2 hosts at 400 Mb/s in two sites, a 50 Mb/s WAN between them, A for 25 steps after a
    10-step compute run with both the hosts' and the WAN's tbf removed: the WAN sets the pace,
    the exchange is predicted within 35 % and the time to loss within 30 % (the exchange reached
    25.9 % once beside the rest of the suite on 2 cores, and 36.8 % once in a CI run: the hosts
    set the pace there too; a miss is measured again, up to 3 times, `measured_within`)."""
    pytest.importorskip("torch", reason="the trainer needs torch")
    from transitsim.testbed.netns import cleanup_leftovers, list_namespaces
    from transitsim.testbed.ttl_model import compare
    from transitsim.testbed.ttl_run import Plan
    from transitsim.testbed.ttl_run import measure as measure_ttl

    plan = Plan([HOST_BPS], ["A"], hosts=2, steps=25, compute_steps=10, calibration_repeats=4,
                run_limit_s=240, sites=2, wan_rate_bps=WAN_BPS)  # fmt: skip

    def measure(k: int) -> pd.DataFrame:  # a folder of its own each try
        cleanup_leftovers()
        folder = tmp_path / f"try{k}"
        runs, calibration = measure_ttl(plan, folder, log=lambda line: None)
        assert not [n for n in list_namespaces() if n.startswith(f"tsb-{os.getpid()}-")]
        assert runs["trace"].iloc[0].startswith("traces/A-400Mbps-wan50Mbps/")
        assert (calibration["sites"] == 2).all()
        assert (calibration["wan_rate_bps"] == WAN_BPS).all()
        assert (calibration["rtt_wan_s"] > 0).all()
        trace = read_trace(folder / runs["trace"].iloc[0])
        compute = read_trace(folder / runs["compute_trace"].iloc[0])
        # the WAN is unshaped in the compute run: far faster than through the 50 Mb/s WAN
        assert compute.steps["comm_s"].median() < trace.steps["comm_s"].median() / 3
        # A's ~0.8 MB all-reduce at 2 ranks: each rank sends two halves of it across the WAN
        payload = int(trace.steps["payload_bytes"].iloc[-1])
        assert trace.steps["comm_s"].median() > 0.8 * payload * 8 / WAN_BPS
        table = compare(folder, runs, calibration, [20.0])
        assert len(table) == 1 and bool(table["independent"].iloc[0])
        assert int(table["net_sites"].iloc[0]) == 2
        return table

    measured_within(measure, lambda table: ttl_miss(table, exchange=0.35, ttl=0.30))


@pytest.mark.parametrize(
    "folder",
    ["ttl-two-sites-s0", "ttl-two-sites-s1", "ttl-two-sites-2hosts-s0", "ttl-two-sites-2hosts-s1"],
)
def test_committed_two_site_sessions_are_reproduced(folder):
    """`transitsim testbed ttl-compare docs/testbed/ttl-two-sites-s{0,1}` (issue 25 item 6: 4
    hosts over two sites, 400 Mb/s hosts, a 50 Mb/s WAN; `-2hosts-`: one host a site, one rank
    a core) gives the committed predictions, every cell independent of the run it predicts, on
    a network with the WAN."""
    from transitsim.testbed.ttl_model import compare
    from transitsim.testbed.ttl_table import summary

    path = Path(__file__).resolve().parents[1] / "docs" / "testbed" / folder
    runs = pd.read_csv(path / "runs.csv")
    assert (runs["sites"] == 2).all() and (runs["wan_rate_bps"] == WAN_BPS).all()
    committed = pd.read_csv(path / "time_to_loss.csv")
    targets = sorted(set(committed["target"]), reverse=True)
    ours = compare(path, runs, pd.read_parquet(path / "calibration.parquet"), targets)
    assert len(ours) == len(committed) == 8 and ours["independent"].all()
    assert (ours["net_sites"] == 2).all() and (ours["net_wan_rate_bps"] == WAN_BPS).all()
    assert ours["predicted_s"].to_numpy() == pytest.approx(committed["predicted_s"], rel=1e-5)
    assert ours["exchange_predicted_s"].to_numpy() == pytest.approx(
        committed["exchange_predicted_s"], rel=1e-5
    )
    assert summary(ours)["independent"]


def test_parts_show_the_hosts_setting_the_pace():
    """`ttl-compare --parts`: each run's plain-step medians beside its compute run's, computed
    here again from the Parquet rows; on the committed 2-site session A's step outside its
    exchange and compute grows by the WAN's wait in the loss gather."""
    import pyarrow.parquet as pq
    import typer
    from typer.testing import CliRunner

    from transitsim.commands import testbed_cmd
    from transitsim.testbed.ttl_parts import parts_table

    path = Path(__file__).resolve().parents[1] / "docs" / "testbed" / "ttl-two-sites-s0"
    runs = pd.read_csv(path / "runs.csv")
    table = parts_table(path, runs)
    assert len(table) == 8 and (table["rate_bps"] == 0).sum() == 4
    a = runs[runs["variant"] == "A"].iloc[0]
    raw = pq.read_table(path / a["trace"]).to_pandas()
    plain = raw[(raw["step"] >= 2) & (raw["step"] <= 100) & raw["val_loss"].isna()]
    shaped = table[(table["variant"] == "A") & (table["rate_bps"] > 0)].iloc[0]
    assert shaped["comm_s"] == pytest.approx(plain["comm_s"].median(), rel=1e-12)
    rest = plain["wall_s"] - plain[["comm_s", "compute_s", "compress_s", "update_s"]].sum(axis=1)
    assert shaped["rest_s"] == pytest.approx(rest.median(), rel=1e-9)
    unshaped = table[(table["variant"] == "A") & (table["rate_bps"] == 0)].iloc[0]
    assert shaped["rest_s"] - unshaped["rest_s"] > 0.010
    app = typer.Typer()
    testbed_cmd.register(app)
    result = CliRunner().invoke(app, ["testbed", "ttl-compare", str(path), "--parts"])
    assert result.exit_code == 0, result.output
    assert "plain steps, median ms" in result.output and "400 Mb/s + WAN 50 Mb/s" in result.output


def test_the_calibration_repeats_until_its_spread_is_under_5_percent(monkeypatch):
    """`testbed ttl`'s calibration points ask for more calls until the spread (IQR over median)
    is under 5 %, at most 4 times the calls asked for and 30 s of them a point (issue 25's
    hygiene bar; 10 fixed calls left 2-30 % at 4 MiB)."""
    from transitsim.testbed import ttl_run
    from transitsim.testbed.netns import Shaping, Testbed

    seen = []

    def fake_run(testbed, workers, points, port):
        seen.extend(points)
        merged = [{"collective": p.collective, "bytes": p.bytes, "warmup": p.warmup,
                   "starts": np.zeros((workers, 3)), "ends": np.ones((workers, 3))}
                  for p in points]  # fmt: skip
        return merged, 0.94

    monkeypatch.setattr(ttl_run, "run_counted", fake_run)
    monkeypatch.setattr(ttl_run, "measure_rtt", lambda *args, **kw: 40e-6)
    testbed = Testbed(2, Shaping.for_rate(50e6))  # never brought up
    calibration = ttl_run.calibrate(testbed, 50e6, 10, 29700)
    assert len(seen) == 4 and len(calibration) == 4
    assert all(p.repeats == 10 and p.max_repeats == 40 for p in seen)
    assert all(p.target_spread == 0.05 and p.max_s == 30.0 for p in seen)
