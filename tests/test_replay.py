"""Replay: tiny traces written with write_trace, replayed on small networks of the real floor."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from transitsim.base.errors import TransitsimError
from transitsim.network import (
    Exchange,
    LinkFault,
    LinkSpec,
    NetworkSpec,
    PluggableSpec,
    SwitchSpec,
    TransformSpec,
    closed_form_time_s,
)
from transitsim.replay.compute import ComputeModel, Stragglers
from transitsim.replay.replay import TIMELINE_COLUMNS, replay
from transitsim.replay.request import ReplayRequest
from transitsim.traces.format import Trace, read_trace, write_trace

WORKERS = 4
N_PARAMS = 1_000_000
DENSE_BYTES = 2 * N_PARAMS
RACK = LinkSpec(rate_bps=100e9, latency_s=1e-6)
SWITCH = NetworkSpec(name="rack", topology="switch", workers=WORKERS, host_link=RACK)


def make_trace(
    tmp_path,
    *,
    variant: str = "A",
    steps: list[int] | None = None,
    payload_bytes: list[int] | int = 400_000,
    collective: str = "all_reduce",
    reducible: bool = True,
    compute_s: float = 0.05,
    compress_s: float = 0.002,
    update_s: list[float] | None = None,
    rows: str = "every_step",
    variant_params: dict | None = None,
    name: str | None = None,
) -> Trace:
    """A small valid trace on disk, read back through the contract."""
    steps = steps or list(range(1, 7))
    count = len(steps)
    payload = payload_bytes if isinstance(payload_bytes, list) else [payload_bytes] * count
    frame = pd.DataFrame(
        {
            "step": np.array(steps, dtype=np.int64),
            "train_loss": np.linspace(5.0, 3.0, count),
            "val_loss": np.linspace(5.1, 3.1, count),
            "lr": 1e-3,
            "payload_bytes": np.array(payload, dtype=np.int64),
            "collective": collective,
            "reducible": reducible,
            "compute_s": compute_s,
            "compress_s": compress_s,
        }
    )
    if update_s is not None:
        frame["update_s"] = update_s
    meta = {
        "name": name or f"{variant}-tiny-s0",
        "variant": variant,
        "seed": 0,
        "workers": WORKERS,
        "n_params": N_PARAMS,
        "dense_bytes_per_step": DENSE_BYTES,
        "rows": rows,
        "origin": "import" if rows == "evaluated_steps" else "trainer",
        "status": "complete",
        "batch": 4,
        "context": 128,
        "variant_params": variant_params or {},
    }
    safe = meta["name"].replace("'", "p")
    return read_trace(write_trace(tmp_path / f"{safe}.parquet", frame, meta))


def test_step_time_is_compute_compress_closed_form_and_update(tmp_path):
    payloads = [400_000, 400_000, 800_000, 800_000, 100_000, 400_000]
    updates = [0.0, 0.001, 0.001, 0.0, 0.003, 0.0]
    trace = make_trace(tmp_path, payload_bytes=payloads, update_s=updates)
    timeline = replay(trace, ReplayRequest(SWITCH)).timeline
    expected = [
        0.05 + 0.002 + closed_form_time_s(SWITCH, Exchange("ring_allreduce", payload)) + update
        for payload, update in zip(payloads, updates, strict=True)
    ]
    assert list(timeline.columns) == TIMELINE_COLUMNS
    np.testing.assert_allclose(timeline["step_s"], expected, rtol=1e-12)
    assert (timeline["algo"] == "ring_allreduce").all()
    assert (timeline["wait_s"] == 0).all()  # one switch, all ready together: nothing to wait for
    parts = timeline[["compute_s", "compress_s", "transform_s", "wire_s", "wait_s", "update_s"]]
    np.testing.assert_allclose(parts.sum(axis=1), timeline["step_s"], rtol=1e-12)
    np.testing.assert_allclose(timeline["time_s"], np.cumsum(expected), rtol=1e-12)
    assert timeline["payload_bytes"].tolist() == np.cumsum(payloads).tolist()
    ring_bytes = 2 * (WORKERS - 1) / WORKERS * np.array(payloads, dtype=float)
    np.testing.assert_allclose(timeline["wire_bytes"], np.cumsum(ring_bytes), rtol=1e-12)
    assert not timeline["extrapolated"].any()


def test_evaluated_steps_rows_stand_for_their_interval(tmp_path):
    trace = make_trace(tmp_path, steps=[10, 30, 60, 100], rows="evaluated_steps")
    one = make_trace(tmp_path, steps=[1], name="A-one-s0")
    step_s = replay(one, ReplayRequest(SWITCH)).timeline["step_s"].iloc[0]
    result = replay(trace, ReplayRequest(SWITCH))
    timeline = result.timeline
    assert timeline["interval_steps"].tolist() == [10, 20, 30, 40]
    assert (timeline["step_s"] == step_s).all()
    np.testing.assert_allclose(timeline["time_s"], np.array([10, 30, 60, 100]) * step_s)
    assert timeline["payload_bytes"].tolist() == [400_000 * s for s in (10, 30, 60, 100)]
    assert len(result.step_detail) == 4 and result.step_detail["steps"].sum() == 100
    assert result.step_detail["reused"].tolist() == [False, True, True, True]


def test_reuse_equals_simulating_every_step(tmp_path):
    payloads = [400_000, 400_000, 800_000, 800_000, 800_000, 400_000]
    trace = make_trace(
        tmp_path,
        steps=[5, 10, 12, 20, 21, 40],
        rows="evaluated_steps",
        payload_bytes=payloads,
        update_s=[0.001] * 6,
    )
    reused = replay(trace, ReplayRequest(SWITCH))
    every = replay(trace, ReplayRequest(SWITCH, reuse=False))
    pd.testing.assert_frame_equal(reused.timeline, every.timeline, check_exact=True)
    pd.testing.assert_frame_equal(reused.link_stats, every.link_stats, check_exact=False)
    assert (~reused.step_detail["reused"]).sum() == 2  # two distinct payloads: two simulations
    assert len(every.step_detail) == 40 and not every.step_detail["reused"].any()


def test_stragglers_are_seeded_and_slow_the_run(tmp_path):
    trace = make_trace(tmp_path, steps=list(range(1, 21)))
    jitter = Stragglers(distribution="exponential", scale=0.2)
    plain = replay(trace, ReplayRequest(SWITCH)).timeline
    first = replay(trace, ReplayRequest(SWITCH, stragglers=jitter, seed=3)).timeline
    again = replay(trace, ReplayRequest(SWITCH, stragglers=jitter, seed=3)).timeline
    other = replay(trace, ReplayRequest(SWITCH, stragglers=jitter, seed=4)).timeline
    pd.testing.assert_frame_equal(first, again, check_exact=True)
    assert not np.array_equal(first["step_s"], other["step_s"])
    assert (first["step_s"] > plain["step_s"]).all()
    assert first["step_s"].nunique() == len(first)  # every step draws its own jitter
    assert (first["wait_s"] > 0).all()  # the fastest worker waits for the slowest
    lognormal = Stragglers(distribution="lognormal", scale=0.01, mode="additive")
    assert (
        replay(trace, ReplayRequest(SWITCH, stragglers=lognormal)).timeline["time_s"].iloc[-1]
        > (plain["time_s"].iloc[-1])
    )


def test_fixed_slow_worker_is_reused_and_waited_for(tmp_path):
    trace = make_trace(tmp_path)
    slow = Stragglers(distribution="none", worker_factors=(1.0, 1.0, 1.0, 2.0))
    result = replay(trace, ReplayRequest(SWITCH, stragglers=slow))
    plain = replay(trace, ReplayRequest(SWITCH)).timeline
    np.testing.assert_allclose(result.timeline["step_s"] - plain["step_s"], 0.05, rtol=1e-9)
    np.testing.assert_allclose(result.timeline["wait_s"], 0.05, rtol=1e-9)
    assert (~result.step_detail["reused"]).sum() == 1  # nothing random: one simulation
    every = replay(trace, ReplayRequest(SWITCH, stragglers=slow, reuse=False)).timeline
    pd.testing.assert_frame_equal(result.timeline, every, check_exact=True)


def test_link_fault_slows_steps_but_the_run_finishes(tmp_path):
    trace = make_trace(tmp_path, steps=list(range(1, 11)))
    plain = replay(trace, ReplayRequest(SWITCH)).timeline
    start_of_4 = plain["time_s"].iloc[2]
    fault = LinkFault("h1->sw", down_from_s=start_of_4, down_until_s=start_of_4 + 0.2)
    faulted = replay(trace, ReplayRequest(SWITCH, faults=[fault]))
    timeline = faulted.timeline
    assert len(timeline) == 10 and np.isfinite(timeline["time_s"]).all()
    slower = timeline["step_s"] - plain["step_s"]
    assert slower.iloc[3] > 0.1 and (slower.drop(index=3).abs() < 1e-12).all()
    assert timeline["wait_s"].iloc[3] > 0.1
    assert faulted.step_detail["faulted"].sum() == 1
    every = replay(trace, ReplayRequest(SWITCH, faults=[fault], reuse=False)).timeline
    np.testing.assert_allclose(every["time_s"], timeline["time_s"], rtol=1e-12)
    # Inside a row standing for many steps, only the step it meets is simulated apart.
    long_rows = make_trace(tmp_path, steps=[10, 20], rows="evaluated_steps", name="A-rows-s0")
    split = replay(long_rows, ReplayRequest(SWITCH, faults=[fault]))
    detail = split.step_detail
    assert detail["steps"].tolist() == [3, 1, 6, 10] and detail["faulted"].tolist()[1]
    np.testing.assert_allclose(
        split.timeline["time_s"],
        replay(long_rows, ReplayRequest(SWITCH, faults=[fault], reuse=False)).timeline["time_s"],
        rtol=1e-12,
    )
    # A fault inside the compute phase touches no link: nothing changes.
    idle = LinkFault("h1->sw", down_from_s=start_of_4, down_until_s=start_of_4 + 0.01)
    same = replay(trace, ReplayRequest(SWITCH, faults=[idle])).timeline
    np.testing.assert_allclose(same["time_s"], plain["time_s"], rtol=1e-12)


def test_scale_params_marks_extrapolated_and_scales_bytes_and_compute(tmp_path):
    trace = make_trace(tmp_path)
    base = replay(trace, ReplayRequest(SWITCH)).timeline
    scaled = replay(trace, ReplayRequest(SWITCH, scale_params=10 * N_PARAMS)).timeline
    assert scaled["extrapolated"].all() and scaled.attrs["extrapolated"]
    assert any("extrapolated" in note for note in scaled.attrs["notes"])
    assert scaled["payload_bytes"].tolist() == (10 * base["payload_bytes"]).tolist()
    np.testing.assert_allclose(scaled["wire_bytes"], 10 * base["wire_bytes"], rtol=1e-12)
    np.testing.assert_allclose(scaled["compute_s"], 10 * base["compute_s"], rtol=1e-12)
    np.testing.assert_allclose(scaled["compress_s"], 10 * base["compress_s"], rtol=1e-12)
    assert scaled["val_loss"].tolist() == base["val_loss"].tolist()
    assert (scaled["step_s"] > base["step_s"]).all()


def test_compute_models(tmp_path):
    trace = make_trace(tmp_path)
    scaled = replay(
        trace, ReplayRequest(SWITCH, compute=ComputeModel(kind="scaled", factor=0.5))
    ).timeline
    np.testing.assert_allclose(scaled["compute_s"], 0.025, rtol=1e-12)
    flops = ComputeModel(kind="flops", peak_flops=1e12, mfu=0.5)
    timeline = replay(trace, ReplayRequest(SWITCH, compute=flops)).timeline
    np.testing.assert_allclose(timeline["compute_s"], 6 * N_PARAMS * 4 * 128 / 5e11, rtol=1e-12)
    bigger = replay(trace, ReplayRequest(SWITCH, compute=flops, scale_params=2 * N_PARAMS)).timeline
    np.testing.assert_allclose(bigger["compute_s"], 2 * timeline["compute_s"], rtol=1e-12)


def _varied_trace(tmp_path, compute_s: list[float], compress_s: list[float]) -> Trace:
    """A trace whose measured compute, compression and update differ from row to row."""
    trace = make_trace(tmp_path, variant="B", collective="all_gather", reducible=False)
    steps = trace.steps.copy()
    steps["compute_s"] = compute_s
    steps["compress_s"] = compress_s
    steps["update_s"] = [0.5 * value for value in compress_s]
    return read_trace(write_trace(tmp_path / "varied-s0.parquet", steps, trace.meta))


@pytest.mark.parametrize(
    "compute",
    [
        ComputeModel(kind="trace"),
        ComputeModel(kind="scaled", factor=0.25),
        ComputeModel(kind="flops", peak_flops=1e12, mfu=0.5),
    ],
    ids=lambda c: c.kind,
)
def test_compression_and_update_keep_their_measured_ratio_to_compute(tmp_path, compute):
    """Each row's compression and update scale by that row's modelled / measured compute, so a
    GPU FLOP model never pairs GPU forward+backward with CPU-measured compression."""
    measured = [0.05, 0.10, 0.02, 0.08, 0.04, 0.06]
    compress = [0.06, 0.05, 0.03, 0.10, 0.01, 0.07]
    trace = _varied_trace(tmp_path, measured, compress)
    for scale in (None, 3 * N_PARAMS):
        timeline = replay(
            trace, ReplayRequest(SWITCH, compute=compute, scale_params=scale)
        ).timeline
        np.testing.assert_allclose(
            timeline["compress_s"] / timeline["compute_s"],
            np.array(compress) / np.array(measured),
            rtol=1e-12,
        )
        np.testing.assert_allclose(
            timeline["update_s"] / timeline["compute_s"],
            0.5 * np.array(compress) / np.array(measured),
            rtol=1e-12,
        )
    if compute.kind == "flops":  # the modelled compute is the same every row; compression is not
        timeline = replay(trace, ReplayRequest(SWITCH, compute=compute)).timeline
        assert timeline["compute_s"].nunique() == 1
        assert timeline["compress_s"].nunique() == len(measured)
        np.testing.assert_allclose(timeline["compress_s"].iloc[0], 6 * N_PARAMS * 512 / 5e11 * 1.2)


def test_rows_without_measured_compute_take_the_median_ratio(tmp_path):
    trace = _varied_trace(tmp_path, [0.05, 0.0, 0.10, 0.02, 0.0, 0.04], [0.01] * 6)
    flops = ComputeModel(kind="flops", peak_flops=1e12, mfu=0.5)
    timeline = replay(trace, ReplayRequest(SWITCH, compute=flops)).timeline
    modelled = 6 * N_PARAMS * 512 / 5e11
    median_ratio = np.median([modelled / m for m in (0.05, 0.10, 0.02, 0.04)])
    assert np.isfinite(timeline["compress_s"]).all()
    np.testing.assert_allclose(timeline["compress_s"].iloc[[1, 4]], 0.01 * median_ratio)


def _pluggable_network(host_lane_bps: float) -> NetworkSpec:
    transform = TransformSpec(size=256, planes=8, passes_per_s=1e9, keep=1 / 16)
    return NetworkSpec(
        name=f"pluggable-{host_lane_bps:g}",
        topology="switch",
        workers=WORKERS,
        host_link=RACK,
        pluggable=PluggableSpec(host_lane_bps=host_lane_bps, line_bps=100e9, transform=transform),
    )


def test_transform_in_pluggable_with_slow_host_lanes_is_slower(tmp_path):
    trace = make_trace(
        tmp_path, variant="E", payload_bytes=DENSE_BYTES // 16, collective="all_gather"
    )
    slow, at_line = _pluggable_network(25e9), _pluggable_network(100e9)
    slow_e = replay(trace, ReplayRequest(slow, transform_at="pluggable")).timeline
    line_e = replay(trace, ReplayRequest(at_line, transform_at="pluggable")).timeline
    assert (slow_e["compress_s"] == 0).all()  # the module transforms, the GPU does not
    assert (slow_e["transform_s"] > 0).all()
    assert (slow_e["step_s"] > line_e["step_s"]).all()
    on_gpu = replay(
        trace, ReplayRequest(slow)
    ).timeline  # the band made on the GPU, only it on the lanes
    assert (on_gpu["compress_s"] == 0.002).all()
    assert (on_gpu["transform_s"] < slow_e["transform_s"]).all()  # lanes carry 1/16 of the bytes
    assert (slow_e["step_s"] - slow_e["compress_s"] > on_gpu["step_s"] - on_gpu["compress_s"]).all()


def test_loopback_feedback_costs_more(tmp_path):
    transform = TransformSpec(size=256, planes=8, passes_per_s=1e9, keep=1 / 16)
    network = NetworkSpec(
        name="sum",
        topology="switch",
        workers=WORKERS,
        host_link=RACK,
        switch=SwitchSpec(aggregator=True, transform=transform),
    )
    kwargs = {"variant": "E'", "payload_bytes": DENSE_BYTES // 16, "collective": "reduce_at_switch"}
    loop = make_trace(tmp_path, **kwargs, variant_params={"feedback": "loopback"}, name="L-s0")
    exact = make_trace(tmp_path, **kwargs, variant_params={"feedback": "exact"}, name="X-s0")
    looped = replay(loop, ReplayRequest(network, transform_at="switch"))
    plain = replay(exact, ReplayRequest(network, transform_at="switch"))
    assert (looped.timeline["algo"] == "switch_sum").all()
    assert (looped.timeline["step_s"] > plain.timeline["step_s"]).all()

    def down_bytes(result) -> float:
        stats = result.link_stats
        return float(stats.loc[stats["link"] == "sw->h0", "bytes"].iloc[0])

    assert down_bytes(looped) == 2 * down_bytes(plain)  # each worker's own band comes back too
    # feedback of the band sent (E's fix) needs the sender's own optical band just the same
    sent = make_trace(tmp_path, **kwargs, variant_params={"feedback": "sent"}, name="S-s0")
    assert down_bytes(replay(sent, ReplayRequest(network, transform_at="switch"))) == down_bytes(
        looped
    )


def test_loopback_is_free_when_the_pluggable_made_the_band(tmp_path):
    """The sender's own module made its band: it is copied back over the host lanes, and the
    switch sends each worker the sum only."""
    transform = TransformSpec(size=256, planes=8, passes_per_s=1e9, keep=1 / 16)
    network = NetworkSpec(
        name="sum",
        topology="switch",
        workers=WORKERS,
        host_link=RACK,
        pluggable=PluggableSpec(host_lane_bps=400e9, line_bps=100e9, transform=transform),
        switch=SwitchSpec(aggregator=True),
    )
    kwargs = {"variant": "E'", "payload_bytes": DENSE_BYTES // 16, "collective": "reduce_at_switch"}
    loop = make_trace(tmp_path, **kwargs, variant_params={"feedback": "loopback"}, name="L-s0")
    exact = make_trace(tmp_path, **kwargs, variant_params={"feedback": "exact"}, name="X-s0")
    looped = replay(loop, ReplayRequest(network, transform_at="pluggable")).link_stats.set_index(
        "link"
    )
    plain = replay(exact, ReplayRequest(network, transform_at="pluggable")).link_stats.set_index(
        "link"
    )
    assert looped.loc["sw->h0", "bytes"] == plain.loc["sw->h0", "bytes"]
    assert looped.loc["h0:lanes_in", "bytes"] > plain.loc["h0:lanes_in", "bytes"]


def test_all_reduce_across_two_datacentres_is_hierarchical(tmp_path):
    trace = make_trace(tmp_path)
    network = NetworkSpec(
        name="2dc",
        topology="datacentres",
        workers=WORKERS,
        datacentres=2,
        host_link=RACK,
        wan_link=LinkSpec(rate_bps=10e9, length_m=1e5),
    )
    result = replay(trace, ReplayRequest(network))
    assert (result.timeline["algo"] == "hierarchical").all()
    forced = replay(trace, ReplayRequest(network, collective="ring_allreduce"))
    assert (forced.timeline["algo"] == "ring_allreduce").all()

    def wan_bytes(stats: pd.DataFrame) -> float:
        return float(stats.loc[stats["link"] == "dc0->dc1", "bytes"].sum())

    assert 0 < wan_bytes(result.link_stats) < wan_bytes(forced.link_stats)
    gathered = make_trace(tmp_path, variant="C", collective="all_gather", name="C-tiny-s0")
    assert (replay(gathered, ReplayRequest(network)).timeline["algo"] == "ring_allgather").all()


def test_sum_at_switch_and_fallback_without_aggregator(tmp_path):
    aggregating = dataclasses.replace(SWITCH, name="agg", switch=SwitchSpec(aggregator=True))
    reducible = make_trace(tmp_path, variant="C", collective="all_gather", payload_bytes=50_000)
    timeline = replay(reducible, ReplayRequest(aggregating, sum_at="switch")).timeline
    assert (timeline["algo"] == "switch_sum").all()
    in_switch = make_trace(tmp_path, variant="E'", collective="reduce_at_switch", name="Ep-s0")
    fallback = replay(in_switch, ReplayRequest(SWITCH)).timeline
    assert (fallback["algo"] == "ring_allreduce").all()
    assert any("no summing switch" in note for note in fallback.attrs["notes"])


def test_other_worker_count_is_marked_extrapolated(tmp_path):
    trace = make_trace(tmp_path)
    bigger = dataclasses.replace(SWITCH, name="rack8", workers=8)
    timeline = replay(trace, ReplayRequest(bigger)).timeline
    assert timeline["extrapolated"].all()
    assert any("4 workers" in note for note in timeline.attrs["notes"])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sum_at": "everywhere"},
        {"sum_at": "switch"},  # the rack's switch does not sum
        {"collective": "butterfly"},
        {"transform_at": {"A": "pluggable"}},  # variant A sends no band
        {"transform_at": "optics"},
        {"scale_params": 0},
        {"scale_params": 1.5},
        {"seed": -1},
        {"compute": "trace"},
        {"stragglers": 0.1},
        {"stragglers": Stragglers(worker_factors=(1.0, 2.0))},  # 2 factors for 4 workers
        {"faults": [LinkFault("h9->nowhere", 0.0, 1.0)]},
        {"faults": [LinkFault("h1->sw", 1.0, 0.5)]},
        {"faults": ["h1->sw"]},
    ],
)
def test_bad_arguments_are_transitsim_errors(tmp_path, kwargs):
    trace = make_trace(tmp_path)
    with pytest.raises(TransitsimError):
        replay(trace, ReplayRequest(SWITCH, **kwargs))


def test_bad_models_and_inputs_are_transitsim_errors(tmp_path):
    trace = make_trace(tmp_path)
    e_trace = make_trace(tmp_path, variant="E", collective="all_gather", name="E-s0")
    for make in (
        lambda: ComputeModel(kind="magic"),
        lambda: ComputeModel(kind="flops"),
        lambda: ComputeModel(kind="flops", peak_flops=1e12, mfu=2.0),
        lambda: ComputeModel(kind="scaled", factor=0.0),
        lambda: Stragglers(distribution="pareto"),
        lambda: Stragglers(scale=-1.0),
        lambda: Stragglers(mode="sometimes"),
        lambda: replay("trace.parquet", ReplayRequest(SWITCH)),
        lambda: replay(trace, ReplayRequest("rack")),
        lambda: replay(
            e_trace, ReplayRequest(SWITCH, transform_at="pluggable")
        ),  # no pluggable transform
    ):
        with pytest.raises(TransitsimError):
            make()
    no_batch = dataclasses.replace(trace, meta={**trace.meta, "batch": None})
    with pytest.raises(TransitsimError, match="batch"):
        replay(no_batch, ReplayRequest(SWITCH, compute=ComputeModel(kind="flops", peak_flops=1e12)))
