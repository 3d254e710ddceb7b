"""Time-to-loss on the testbed against transitsim: the prediction's arithmetic, bad folders, and
a tiny real run (2 gloo trainer ranks in 2 namespaces) where namespaces can be made."""

import glob
import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from netns_skip import measured_within, needs_netns

from transitsim.base.errors import TransitsimError
from transitsim.network import Exchange, simulate_exchange
from transitsim.network.spec import HostSpec
from transitsim.testbed import gloo_algos, ttl_model
from transitsim.testbed import model as testbed_model
from transitsim.testbed.ttl_compute import gather_bytes_s, measure_compute, outside_exchange
from transitsim.testbed.ttl_model import cells
from transitsim.testbed.ttl_network import (
    GLOO_COLLECTIVE,
    Calibrated,
    calibrate_rate,
    network_for,
    rendezvous_s,
    simulate_bytes,
)
from transitsim.testbed.ttl_table import orders, summary
from transitsim.traces.format import read_trace, write_trace

REPO = Path(__file__).resolve().parents[1]
NET = Calibrated(efficiency=0.94, latency_s=12e-6, alpha_s=1.5e-3)
ADAMW, TOPK, OPTICS = "*adamw*s0.parquet", "*topk*s0.parquet", "*opticsum*fbexact*s0.parquet"


def _as_gloo_run(variant_glob: str, wall_s, comm_s, gap_s: float = 0.0, steps: int | None = None):
    """A committed simulated trace given the timing columns a gloo run records (one worker per
    rank, no checkpoint inside the run)."""
    trace = read_trace(sorted(glob.glob(str(REPO / "traces/shakespeare-mini" / variant_glob)))[0])
    frame = trace.steps.iloc[:steps].reset_index(drop=True) if steps else trace.steps
    n = len(frame)
    wall = np.broadcast_to(np.asarray(wall_s, dtype=float), n)
    frame = frame.assign(
        wall_s=wall,
        comm_s=comm_s,
        exchange_bytes=frame["payload_bytes"],
        end_unix_s=1.8e9 + np.cumsum(wall + gap_s) - gap_s,
    )
    meta = {
        **trace.meta,
        "backend": "gloo",
        "config": {**trace.meta["config"], "steps": n, "ckpt_every": n + 1},
        "distributed": {"world_size": trace.workers, "wire_dtype": "bfloat16",
                        "workers_per_process": 1},
    }  # fmt: skip
    return replace(trace, steps=frame, meta=meta)


def _exchange_s(trace, rate_bps: float, net: Calibrated = NET) -> float:
    """transitsim's time for one step's exchange of `trace` on the testbed at `rate_bps`."""
    payload = int(trace.steps["payload_bytes"].iloc[-1])
    collective = str(trace.steps["collective"].iloc[-1])
    segments = gloo_algos.segments_per_message(GLOO_COLLECTIVE[collective], payload, trace.workers)
    network = testbed_model.testbed_network(
        trace.workers, rate_bps, net.efficiency, net.latency_s, net.alpha_s * segments / 2
    )
    algo = gloo_algos.transitsim_algo(GLOO_COLLECTIVE[collective])
    return simulate_exchange(network, Exchange(algo, payload)).time_s


def _compute_run(variant_glob: str = ADAMW, steps: int = 30):
    """A compute run with known times outside the exchange: step 1 0.5 s, plain steps 0.08 s,
    evaluated steps (25 here) 0.2 s; its exchange takes 0.01 s a step (unshaped)."""
    frame = _as_gloo_run(variant_glob, 0.0, 0.0, steps=steps).steps
    outside = np.where(frame["val_loss"].notna(), 0.2, 0.08)
    outside[0] = 0.5
    return _as_gloo_run(variant_glob, outside + 0.01, 0.01, steps=steps)


# --- the old prediction: the run's own compute (folders without compute runs) ---------------


def test_without_a_compute_run_the_prediction_is_the_runs_own_time_plus_the_exchange():
    trace = _as_gloo_run(ADAMW, wall_s=0.1, comm_s=0.03, gap_s=0.01)
    target = float(trace.steps["val_loss"].dropna().iloc[3])
    (cell,) = cells(trace, 50e6, NET, [target])
    k = int(cell["step"])
    exchange_s = _exchange_s(trace, 50e6)
    outside = 0.1 - 0.03 + 0.01  # wall - comm, and the gap before every step but the first
    assert cell["independent"] is False
    assert cell["predicted_s"] == pytest.approx(k * outside - 0.01 + k * exchange_s, rel=1e-6)
    assert cell["measured_s"] == pytest.approx(k * 0.11 - 0.01, rel=1e-9)
    assert cell["exchange_predicted_s"] == pytest.approx(k * exchange_s, rel=1e-6)
    assert cell["exchange_measured_s"] == pytest.approx(k * 0.03, rel=1e-9)
    assert cell["exchange_error"] == pytest.approx(exchange_s / 0.03 - 1, rel=1e-6)
    # alpha is a cost: without it the same run is predicted faster.
    assert cell["predicted_no_alpha_s"] < cell["predicted_s"]


def test_gathered_payloads_are_replayed_as_the_ring_all_gather_gloo_runs():
    trace = _as_gloo_run(TOPK, wall_s=0.2, comm_s=0.05)
    timeline = cells(trace, 400e6, NET, [float(trace.steps["val_loss"].dropna().iloc[0])])
    assert timeline[0]["exchange_predicted_s"] > 0
    derived = outside_exchange(trace)
    assert derived.steps["compute_s"].to_numpy() == pytest.approx(0.15)
    assert (derived.steps["compress_s"] == 0).all() and (derived.steps["update_s"] == 0).all()


# --- compute measured apart: the compute run -------------------------------------------------


def test_the_compute_run_gives_three_figures():
    compute = measure_compute(_compute_run())
    assert (compute.first_s, compute.step_s, compute.eval_s) == pytest.approx((0.5, 0.08, 0.2))
    assert compute.steps == 30


def test_the_prediction_takes_its_compute_from_the_compute_run_not_from_the_run():
    run = _as_gloo_run(ADAMW, wall_s=0.3, comm_s=0.2)
    compute = measure_compute(_compute_run())
    target = float(run.steps["val_loss"].dropna().iloc[3])  # step 100: 4 evaluations
    (cell,) = cells(run, 50e6, NET, [target], compute)
    k = int(cell["step"])
    evaluated = int(run.steps["val_loss"].iloc[:k].notna().sum())
    charged = 0.5 + (k - 1 - evaluated) * 0.08 + evaluated * 0.2
    gathers = k * simulate_bytes(NET, run.workers, 50e6, "all_gather", 16)
    exchange_s = _exchange_s(run, 50e6)
    assert cell["independent"] is True and cell["compute_extrapolated"] is True  # 100 > 30
    # (end_unix_s near 1.8e9 s carries 0.2 us of rounding into the compute run's gaps)
    assert cell["compute_predicted_s"] == pytest.approx(charged, abs=1e-4)
    assert cell["gathers_predicted_s"] == pytest.approx(gathers, rel=1e-9)
    assert cell["predicted_s"] == pytest.approx(charged + gathers + k * exchange_s, abs=1e-4)
    assert cell["measured_s"] == pytest.approx(k * 0.3, rel=1e-9)
    assert cell["exchange_measured_s"] == pytest.approx(k * 0.2, rel=1e-9)
    # the run's own timing does not move the prediction, only the measured side
    slower = _as_gloo_run(ADAMW, wall_s=0.9, comm_s=0.1, gap_s=0.5)
    (other,) = cells(slower, 50e6, NET, [target], compute)
    assert other["predicted_s"] == pytest.approx(cell["predicted_s"], rel=1e-12)
    assert other["measured_s"] != pytest.approx(cell["measured_s"])


def test_the_gathers_bytes_are_replayed_and_checkpoints_are_left_out_of_both_sides():
    run = _as_gloo_run(OPTICS, wall_s=0.2, comm_s=0.05)
    net = NET
    per_step = gather_bytes_s(run, net, 50e6)
    loss = simulate_bytes(net, run.workers, 50e6, "all_gather", 16)
    clip = simulate_bytes(net, run.workers, 50e6, "all_reduce", 16)
    clipped = run.steps["clip_rate"].notna().to_numpy()
    assert clipped.any() and not clipped.all()
    assert per_step == pytest.approx(np.where(clipped, loss + clip, loss), rel=1e-12)
    # bytes only: the fixed costs are in the compute run's measured compute
    assert 0 < loss < 8 * 16 * run.workers / 50e6 / 0.94 + 1e-12
    saving = replace(run, meta={**run.meta, "config": {**run.meta["config"], "ckpt_every": 50}})
    compute = measure_compute(_compute_run(OPTICS))
    with pytest.raises(TransitsimError, match="checkpoint every 50 steps"):
        cells(saving, 50e6, net, [3.3], compute)


def test_a_compute_run_of_another_training_is_refused():
    from transitsim.testbed.ttl_compute import check_same_training

    with pytest.raises(TransitsimError, match="not a compute run of"):
        check_same_training(_as_gloo_run(ADAMW, 0.2, 0.05), _compute_run(TOPK))


def test_a_host_stage_reaches_the_replayed_network(monkeypatch):
    """The endpoint fit (issue 25 item 2) swaps in at `calibrate_rate`: a HostSpec there is in
    the NetworkSpec every exchange is replayed on; bytes-only transfers drop its fixed cost."""
    host = HostSpec(per_message_s=2e-4, rate_bps=3e9, ranks_per_host=1)
    net = Calibrated(efficiency=0.94, latency_s=12e-6, host=host)
    transfers = gloo_algos.segments_per_message("all_reduce", 1 << 20, 4)  # o is per transfer
    expected = replace(host, per_message_s=2e-4 * transfers)
    assert network_for(net, 4, 50e6, "all_reduce", 1 << 20).host == expected
    bare = network_for(net, 4, 50e6, "all_gather", 16, fixed_costs=False)
    assert bare.host.per_message_s == 0 and bare.host.rate_bps == 3e9
    assert bare.host_link.latency_s == 0 and bare.host_link.overhead_s == 0
    seen = []
    real = ttl_model.replay
    monkeypatch.setattr(ttl_model, "replay", lambda t, r: seen.append(r.network) or real(t, r))
    run = _as_gloo_run(ADAMW, wall_s=0.3, comm_s=0.2)
    cells(run, 50e6, net, [3.3], measure_compute(_compute_run()))
    assert seen and all(n.host.rate_bps == host.rate_bps and n.host.per_message_s > 0 for n in seen)
    assert calibrate_rate(pd.read_parquet(REPO / "docs/testbed/ttl/calibration.parquet").iloc[:2])


# --- the headline ---------------------------------------------------------------------------


def test_the_headline_has_both_errors_and_the_order_per_column():
    def cell(variant, target, measured, predicted, ex_meas, ex_pred):
        return {"variant": variant, "rate_bps": 50e6, "target": target, "step": 50,
                "independent": True, "measured_s": measured, "predicted_s": predicted,
                "error": predicted / measured - 1, "exchange_measured_s": ex_meas,
                "exchange_predicted_s": ex_pred, "exchange_error": ex_pred / ex_meas - 1,
                "compute_extrapolated": False}  # fmt: skip

    table = pd.DataFrame(
        [
            cell("A", 3.3, 10.0, 10.5, 5.0, 5.4),  # +5 %, exchange +8 %
            cell("B", 3.3, 8.0, 8.4, 2.0, 2.3),  # +5 %, exchange +15 %
            cell("A", 3.1, 20.0, 18.2, 10.0, 8.0),  # -9 %, exchange -20 %
            cell("B", 3.1, 19.0, 19.5, 4.0, 4.5),  # B predicted slower than A: order wrong
            {"variant": "C", "rate_bps": 50e6, "target": 3.1, "step": np.nan},
        ]
    )
    s = summary(table)
    assert (s["cells"], s["reached"], s["independent"]) == (5, 4, True)
    assert s["time_to_loss"]["within_10pct"] == 4 and s["exchange"]["within_10pct"] == 1
    assert s["time_to_loss"]["worst_error"] == pytest.approx(-0.09)
    assert s["exchange"]["worst_error"] == pytest.approx(-0.20)
    assert s["exchange"]["median_abs_error"] == pytest.approx(0.1375)
    assert s["within_10pct"] == s["time_to_loss"]["within_10pct"]
    by = {c["target"]: c for c in orders(table)}
    assert by[3.3]["predicted"] == by[3.3]["measured"] == ["B", "A"] and by[3.3]["right"]
    assert by[3.1]["predicted"] == ["A", "B"] and by[3.1]["measured"] == ["B", "A"]
    assert not by[3.1]["right"] and s["order"] == {"columns": 2, "right": 1,
                                                   "per_column": orders(table)}  # fmt: skip
    table.loc[3, "predicted_s"] = 18.0  # B now predicted first to 3.1, as measured
    assert summary(table)["order"]["right"] == 2
    assert "NOT INDEPENDENT" in summary(table.assign(independent=False))["notes"][0]


def _new_folder(folder: Path, compute_glob: str = ADAMW) -> None:
    """A new-format ttl folder: one A run at 50 Mb/s with its compute run."""
    run = _as_gloo_run(ADAMW, wall_s=0.3, comm_s=0.2, steps=60)
    compute = _compute_run(compute_glob)
    for name, trace in (("traces/A-50Mbps/run.parquet", run),
                        ("traces/A-unshaped/compute.parquet", compute)):  # fmt: skip
        write_trace(folder / name, trace.steps, trace.meta)
    calibration = pd.read_parquet(REPO / "docs/testbed/ttl/calibration.parquet")
    calibration.to_parquet(folder / "calibration.parquet")
    pd.DataFrame(
        [{"variant": "A", "rate_bps": 50e6, "hosts": 8, "trace": "traces/A-50Mbps/run.parquet",
          "compute_trace": "traces/A-unshaped/compute.parquet"}]
    ).to_csv(folder / "runs.csv", index=False)  # fmt: skip


def test_ttl_compare_of_a_new_folder_prints_both_errors(tmp_path, capsys):
    from transitsim.cli import main

    _new_folder(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["testbed", "ttl-compare", str(tmp_path), "--targets", "3.3", "--write"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "compute measured apart" in out and "exchange alone |error|" in out
    assert "order right in 1 of 1 columns" in out
    table = pd.read_csv(tmp_path / "time_to_loss.csv")
    assert table["independent"].all() and table["exchange_error"].notna().all()
    figures = json.loads((tmp_path / "time_to_loss.json").read_text())
    assert figures["independent"] is True and figures["exchange"]["cells"] == 1


def test_an_unreached_target_is_a_cell_without_times():
    trace = _as_gloo_run(ADAMW, wall_s=0.1, comm_s=0.03)
    (cell,) = cells(trace, 50e6, NET, [0.01], measure_compute(_compute_run()))
    assert np.isnan(cell["step"]) and "measured_s" not in cell


def test_a_simulated_trace_is_refused():
    path = sorted(glob.glob(str(REPO / "traces/shakespeare-mini" / ADAMW)))[0]
    trace = read_trace(path)
    with pytest.raises(TransitsimError, match="not a torch.distributed trace"):
        outside_exchange(trace)
    with pytest.raises(TransitsimError, match="not a torch.distributed trace"):
        measure_compute(replace(trace, meta={**trace.meta, "config": {"ckpt_every": 10**6}}))


def _compute_damage(folder: Path, how: str) -> None:
    runs = pd.read_csv(folder / "runs.csv")
    if how == "outside":
        runs["compute_trace"] = "../../compute.parquet"
    elif how == "missing column value":
        runs["compute_trace"] = ""
    runs.to_csv(folder / "runs.csv", index=False)


@pytest.mark.parametrize(
    "how, message",
    [
        ("another variant", "not a compute run of"),
        ("outside", "not a path inside"),
        ("missing column value", "column 'compute_trace' row 0"),
        ("too short", "a compute run needs"),
    ],
)
def test_a_bad_compute_run_is_one_line_and_exit_2(tmp_path, capsys, how, message):
    from transitsim.cli import main

    _new_folder(tmp_path, TOPK if how == "another variant" else ADAMW)
    if how == "too short":
        short = _compute_run(steps=1)
        write_trace(tmp_path / "traces/A-unshaped/compute.parquet", short.steps, short.meta)
    _compute_damage(tmp_path, how)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SystemExit) as exit_info:
        main(["testbed", "ttl-compare", str(tmp_path), "--targets", "3.3", "--write"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize(
    "argv, message",
    [
        (["testbed", "ttl-compare", "{tmp}"], "no runs.csv"),
        (["testbed", "ttl", "--variants", "A,Z", "-o", "{tmp}"], "--variants"),
        (["testbed", "ttl", "--targets", "-1", "-o", "{tmp}"], "bad loss target"),
        (["testbed", "ttl", "--compute-steps", "2", "-o", "{tmp}"], "--compute-steps"),
    ],
)
def test_bad_ttl_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    from transitsim.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main([a.format(tmp=tmp_path) for a in argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert sorted(os.listdir(tmp_path)) == []


@needs_netns
def test_two_gloo_ranks_on_the_testbed_are_predicted(tmp_path):
    """2 hosts at 50 Mb/s, A for 25 steps after a 10-step compute run on the unshaped testbed:
    a real gloo trace, its exchange predicted within 25 % and its time to loss (compute from
    the compute run, not from this run) within 30 %. Alone on the machine 3 runs on 3 Dec 2026
    gave -1.8 %, -4.4 %, -4.6 % (exchange) and -2.0 %, -6.3 %, -7.1 % (time to loss); beside a
    CI run's other work the time to loss once missed by -36 %: a miss is measured again, up to
    3 times (`measured_within`).

    At 50 Mb/s the exchange, not the shared CPU, sets the step time (as in the committed runs),
    so a loaded machine does not decide the exchange. The time to loss is looser: 25 steps do
    not dilute the shaped run's first slow steps, and rank 0 waits for its peer's last ring
    segment in the next loss gather, outside its comm_s (docs/testbed.md)."""
    pytest.importorskip("torch", reason="the trainer needs torch")
    from transitsim.testbed.netns import cleanup_leftovers, list_namespaces
    from transitsim.testbed.ttl_model import compare
    from transitsim.testbed.ttl_run import Plan
    from transitsim.testbed.ttl_run import measure as measure_ttl

    plan = Plan([50e6], ["A"], hosts=2, steps=25, compute_steps=10, calibration_repeats=4,
                run_limit_s=240)  # fmt: skip

    def measure(k: int) -> pd.DataFrame:  # a folder of its own each try
        cleanup_leftovers()
        folder = tmp_path / f"try{k}"
        runs, calibration = measure_ttl(plan, folder, log=lambda line: None)
        assert not [n for n in list_namespaces() if n.startswith(f"tsb-{os.getpid()}-")]
        trace = read_trace(folder / runs["trace"].iloc[0])
        compute = read_trace(folder / runs["compute_trace"].iloc[0])
        assert trace.meta["backend"] == "gloo" and trace.meta["world_size"] == 2
        assert trace.meta["distributed"]["wire_dtype"] == "bfloat16"
        assert (trace.steps["exchange_bytes"] == trace.steps["payload_bytes"]).all()
        assert len(compute.steps) == 10 and compute.meta["config"]["ckpt_every"] > 10
        # unshaped, the same exchange is faster than at 50 Mb/s
        assert compute.steps["comm_s"].median() < trace.steps["comm_s"].median()
        table = compare(folder, runs, calibration, [20.0])
        assert isinstance(table, pd.DataFrame) and len(table) == 1
        assert bool(table["independent"].iloc[0])
        return table

    measured_within(measure, lambda table: ttl_miss(table, exchange=0.25, ttl=0.30))


def ttl_miss(table: pd.DataFrame, exchange: float, ttl: float) -> str | None:
    """Why a one-cell ttl table misses its bounds on the exchange alone and the time to loss."""
    errors = float(table["exchange_error"].iloc[0]), float(table["error"].iloc[0])
    if abs(errors[0]) < exchange and abs(errors[1]) < ttl:
        return None
    return (
        f"exchange {errors[0]:+.1%} (bound {exchange:.0%}), "
        f"time to loss {errors[1]:+.1%} (bound {ttl:.0%})"
    )


def test_committed_time_to_loss_table_is_reproduced():
    """`transitsim testbed ttl-compare docs/testbed/ttl` gives the committed predictions."""
    from transitsim.testbed.ttl_model import compare

    folder = REPO / "docs" / "testbed" / "ttl"
    runs = pd.read_csv(folder / "runs.csv")
    committed = pd.read_csv(folder / "time_to_loss.csv")
    targets = sorted(set(committed["target"]), reverse=True)
    ours = compare(folder, runs, pd.read_parquet(folder / "calibration.parquet"), targets)
    assert len(ours) == len(committed) == 16
    assert ours["predicted_s"].to_numpy() == pytest.approx(committed["predicted_s"], rel=1e-5)
    assert ours["measured_s"].to_numpy() == pytest.approx(committed["measured_s"], rel=1e-5)
    # no compute runs there: the run's own compute, said in every cell and in the headline
    assert not ours["independent"].any() and not summary(ours)["independent"]


def simulated_calibration(
    truth: testbed_model.Endpoint,
    rate_bps: float,
    sites: int = 1,
    wan_rate_bps: float = 0.0,
    rtt_wan_s: float = 0.0,
) -> pd.DataFrame:
    """The 64 KiB and 4 MiB calibration of 4 hosts at `rate_bps` (what `testbed ttl` measures),
    made by the simulator with the endpoint `truth`."""
    rows = []
    for nbytes in testbed_model.CALIBRATION_SIZES:
        for collective in ("all_reduce", "all_gather"):
            row = pd.Series(
                {
                    "collective": collective,
                    "bytes": nbytes,
                    "workers": 4,
                    "rate_bps": rate_bps,
                    "rtt_s": 60e-6,
                    "qdisc_efficiency": 0.95,
                    "sites": sites,
                    "wan_rate_bps": wan_rate_bps,
                    "rtt_wan_s": rtt_wan_s,
                    "start_offsets_s": json.dumps([0.0] * 4),
                }
            )
            rows.append({**row.to_dict(), "median_s": testbed_model.simulate_point(row, 0, truth)})
    return pd.DataFrame(rows)


def test_the_calibration_fits_the_endpoint_on_two_sizes_and_scales_o_per_message():
    """A calibration with the 64 KiB and 4 MiB points (what `testbed ttl` now measures), made by
    the simulator with a known endpoint, is fitted back to it; each replayed exchange gets o x
    the gloo transfers its messages carry. A 1 MiB-only calibration (a folder from before) keeps
    the legacy alpha."""
    truth = testbed_model.Endpoint(1.5e-3, 300e6)
    calibration = simulated_calibration(truth, 200e6)
    net = calibrate_rate(calibration)
    assert net.alpha_s == 0 and net.host is not None and net.host.ranks_per_host == 4
    assert net.host.per_message_s == pytest.approx(1.5e-3, rel=0.02)
    assert net.host.rate_bps == pytest.approx(300e6, rel=0.02)
    spec = network_for(net, 4, 200e6, "all_reduce", 4 << 20)
    transfers = gloo_algos.segments_per_message("all_reduce", 4 << 20, 4)
    assert spec.host.per_message_s == pytest.approx(net.host.per_message_s * transfers)
    assert (
        network_for(net, 4, 200e6, "all_reduce", 4 << 20, fixed_costs=False).host.per_message_s == 0
    )
    legacy = calibration.assign(bytes=1 << 20)
    assert calibrate_rate(legacy).host is None  # the legacy alpha on the links


@pytest.mark.parametrize(
    "folder",
    [
        "ttl-independent-s0",
        "ttl-independent-s1",
        "ttl-2hosts-s0",
        "ttl-2hosts-s1",
        "ttl-2hosts-spread-s0",
        "ttl-2hosts-spread-s1",
    ],
)
def test_committed_independent_sessions_are_reproduced(folder):
    """`transitsim testbed ttl-compare docs/testbed/ttl-independent-s{0,1}` (issue 25: compute
    runs apart, the endpoint fitted on 64 KiB and 4 MiB) gives the committed predictions, every
    cell independent of the run it predicts."""
    from transitsim.testbed.ttl_model import compare

    path = REPO / "docs" / "testbed" / folder
    runs = pd.read_csv(path / "runs.csv")
    committed = pd.read_csv(path / "time_to_loss.csv")
    targets = sorted(set(committed["target"]), reverse=True)
    ours = compare(path, runs, pd.read_parquet(path / "calibration.parquet"), targets)
    assert len(ours) == len(committed) == 16 and ours["independent"].all()
    assert ours["predicted_s"].to_numpy() == pytest.approx(committed["predicted_s"], rel=1e-5)
    assert ours["exchange_predicted_s"].to_numpy() == pytest.approx(
        committed["exchange_predicted_s"], rel=1e-5
    )
    assert summary(ours)["independent"]


def test_the_all_gather_rendezvous_is_a_half_block_at_two_ranks():
    """gloo's all-gather at 2 ranks on one switch: rank 1 starts a half-block time late (its
    notice waits behind rank 0's first half), so it finishes half a block's wire time after the
    ranks would have together; the all-reduces have no rendezvous."""
    payload = 52_304
    net = Calibrated(efficiency=0.94, latency_s=12e-6, host=HostSpec(1e-4, float("inf"), 1))
    network = network_for(net, 2, 50e6, "all_gather", payload)
    half_block_s = payload / 2 * 8 / (50e6 * 0.94)
    assert rendezvous_s(network, "all_gather", payload) == pytest.approx(half_block_s, rel=1e-9)
    assert rendezvous_s(network, "all_reduce", payload) == 0.0
    assert rendezvous_s(network, "reduce_at_switch", payload) == 0.0
    assert rendezvous_s(network, "all_gather", 0) == 0.0


def test_every_replayed_all_gather_pays_the_rendezvous(monkeypatch):
    """With the endpoint model each step of an all-gathered run (B) pays the rendezvous in its
    exchange and delays every later step by it; a legacy folder's alpha model is replayed as it
    was made, without it."""
    trace = _as_gloo_run(TOPK, wall_s=0.2, comm_s=0.05)
    compute = np.full(len(trace.steps), 0.15)
    endpoint = replace(NET, alpha_s=0.0, host=HostSpec(1e-4, float("inf"), 1))
    payload = int(trace.steps["payload_bytes"].iloc[-1])
    network = network_for(endpoint, trace.workers, 50e6, "all_gather", payload)
    wait_s = rendezvous_s(network, "all_gather", payload)
    assert wait_s > 0
    paid = ttl_model.predict(trace, 50e6, endpoint, compute)
    legacy = ttl_model.predict(trace, 50e6, NET, compute)
    monkeypatch.setattr(ttl_model, "rendezvous_s", lambda *args: 0.0)
    bare = ttl_model.predict(trace, 50e6, endpoint, compute)
    steps = np.arange(1, len(trace.steps) + 1)
    assert paid["exchange_s"].to_numpy() == pytest.approx(bare["exchange_s"] + wait_s, rel=1e-9)
    assert paid["time_s"].to_numpy() == pytest.approx(bare["time_s"] + steps * wait_s, rel=1e-9)
    assert legacy["time_s"].to_numpy() == pytest.approx(
        ttl_model.predict(trace, 50e6, NET, compute)["time_s"].to_numpy(), rel=1e-12
    )
