"""Replaying a local-SGD trace (H, H-s, L): inner steps send nothing, sync steps exchange.

An exchange of no bytes sends no message (NCCL returns at once from a count-0 collective), so an
inner step is its compute, compression and update alone; a sync step pays its exchange. The
array, step-by-step and max-plus (random stragglers) replays must agree on it.
"""

import numpy as np
import pytest
from test_replay import SWITCH, WORKERS, make_trace

from transitsim.network import Exchange, simulate_exchange
from transitsim.network.closed_form import closed_form_time_s
from transitsim.network.forms import linear_exchange
from transitsim.replay.compute import Stragglers
from transitsim.replay.replay import replay
from transitsim.replay.request import ReplayRequest
from transitsim.traces.format import read_trace, write_trace

SYNC_BYTES = 2_000_000  # a dense BF16 pseudo-gradient of 1M parameters


def _local_sgd_trace(tmp_path, steps: int = 30, every: int = 10):
    payload = [SYNC_BYTES if step % every == 0 else 0 for step in range(1, steps + 1)]
    return make_trace(
        tmp_path, variant="H", steps=list(range(1, steps + 1)), payload_bytes=payload, name="H-s0"
    )


def test_an_exchange_of_no_bytes_sends_nothing_and_waits_for_no_one():
    start = np.array([0.0, 1e-3, 2e-3, 5e-4])
    result = simulate_exchange(SWITCH, Exchange("ring_allreduce", 0), start_s=start)
    np.testing.assert_array_equal(result.finish_s, start)  # each worker is done at its start
    assert result.bytes_sent.sum() == 0 and result.link_stats["bytes"].sum() == 0
    assert result.wire_s == 0 and result.transform_s == 0
    form = linear_exchange(SWITCH, Exchange("ring_allreduce", 0))
    assert form is not None and form.finish_s(start)[0] == start.max()
    # a 1-byte exchange still pays its latency: only zero means "no collective"
    assert simulate_exchange(SWITCH, Exchange("ring_allreduce", 1)).time_s > 0


def test_inner_steps_are_compute_alone_and_sync_steps_pay_the_exchange(tmp_path):
    timeline = replay(_local_sgd_trace(tmp_path), ReplayRequest(SWITCH)).timeline
    inner = timeline["step"] % 10 != 0
    compute = 0.05 + 0.002  # make_trace's compute_s + compress_s
    np.testing.assert_allclose(timeline.loc[inner, "step_s"], compute, rtol=1e-12)
    assert (timeline.loc[inner, "wire_s"] == 0).all()
    exchange = closed_form_time_s(SWITCH, Exchange("ring_allreduce", SYNC_BYTES))
    np.testing.assert_allclose(timeline.loc[~inner, "step_s"], compute + exchange, rtol=1e-12)
    ring_bytes = 2 * (WORKERS - 1) / WORKERS * SYNC_BYTES
    assert timeline["wire_bytes"].iloc[-1] == pytest.approx(3 * ring_bytes, rel=1e-12)


def test_stepping_and_max_plus_replays_agree_on_a_local_sgd_trace(tmp_path):
    trace = _local_sgd_trace(tmp_path, steps=40)
    jitter = Stragglers(distribution="exponential", scale=0.2)
    fast = replay(trace, ReplayRequest(SWITCH, stragglers=jitter, seed=5)).timeline
    stepped = replay(trace, ReplayRequest(SWITCH, stragglers=jitter, seed=5, reuse=False)).timeline
    np.testing.assert_allclose(fast["time_s"], stepped["time_s"], rtol=1e-12)
    np.testing.assert_allclose(fast["step_s"], stepped["step_s"], rtol=1e-12)
    plain = replay(trace, ReplayRequest(SWITCH)).timeline
    assert fast["time_s"].iloc[-1] > plain["time_s"].iloc[-1]  # the slowest replica sets the pace


def test_local_sgd_variants_have_labels_that_say_how_often_they_sync():
    from transitsim.base.tables import config_labels

    metas = {
        "h10": {"variant": "H", "variant_params": {"inner_steps": 10, "lr": 3e-3}},
        "h50": {"variant": "H", "variant_params": {"inner_steps": 50, "lr": 3e-3}},
        "hs": {
            "variant": "H-s",
            "variant_params": {"inner_steps": 50, "fragments": 5, "overlap": 5},
        },
        "l": {
            "variant": "L",
            "variant_params": {"inner_steps": 10, "chunk_mode": "2d", "chunk": 64, "keep": 1 / 64},
        },
    }
    assert config_labels(metas) == {
        "h10": "H DiLoCo h10",
        "h50": "H DiLoCo h50",
        "hs": "H-s Streaming DiLoCo h50 p5 t5",
        "l": "L SparseLoCo h10 2d64 k64",
    }


def _streaming_trace(tmp_path, sync_bytes: int, tau: int = 2):
    """H-s-like: fragments sync at steps 5 and 15 and land tau steps later."""
    trace = make_trace(tmp_path, variant="H-s", steps=list(range(1, 21)), payload_bytes=0)
    frame = trace.steps.copy()
    syncs = frame["step"].isin([5, 15])
    frame.loc[syncs, "payload_bytes"] = sync_bytes
    frame["outer_sync"] = syncs
    frame["sync_fragment"] = np.where(frame["step"] == 15, 1, 0)
    frame["lands_step"] = np.where(syncs, frame["step"] + tau, 0)
    meta = {**trace.meta, "local_sgd": {"overlap_steps": tau, "fragments": 2, "inner_steps": 20}}
    return read_trace(write_trace(tmp_path / "H-s-stream-s0.parquet", frame, meta))


@pytest.mark.parametrize("sync_bytes", [2_000_000, 8_000_000_000])
def test_streaming_exchanges_overlap_the_next_inner_steps(tmp_path, sync_bytes):
    """By hand: the sync step costs its compute only; the landing step (tau = 2 later) waits for
    max(0, X - the two steps between), X the exchange alone."""
    trace = _streaming_trace(tmp_path, sync_bytes)
    timeline = replay(trace, ReplayRequest(SWITCH)).timeline
    stepped = replay(
        trace, ReplayRequest(SWITCH, reuse=False)
    ).timeline  # the stepping, not the arrays
    np.testing.assert_allclose(stepped["time_s"], timeline["time_s"], rtol=1e-12)
    compute = 0.05 + 0.002
    exchange = closed_form_time_s(SWITCH, Exchange("ring_allreduce", sync_bytes))
    left = max(exchange - 2 * compute, 0.0)
    expected = np.full(20, compute)
    expected[[6, 16]] += left  # steps 7 and 17 (rows 6 and 16) are where the syncs land
    np.testing.assert_allclose(timeline["step_s"], expected, rtol=1e-9)
    np.testing.assert_allclose(timeline["time_s"], np.cumsum(expected), rtol=1e-9)
    np.testing.assert_allclose(timeline.loc[[4, 14], "hidden_s"], exchange - left, rtol=1e-9)
    parts = timeline[["compute_s", "compress_s", "transform_s", "wire_s", "wait_s", "update_s"]]
    np.testing.assert_allclose(parts.sum(axis=1), timeline["step_s"], rtol=1e-9)
    assert (left > 0) == (sync_bytes > 1e9)  # the small sync hides whole, the huge one not
    ring_bytes = 2 * (WORKERS - 1) / WORKERS * sync_bytes
    assert timeline["wire_bytes"].iloc[-1] == pytest.approx(2 * ring_bytes, rel=1e-12)
