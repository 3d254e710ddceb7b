"""Replay with `overlap: buckets`: hand-derived steps on the real floor, never slower, the notes."""

import numpy as np
import pandas as pd
import pytest

from transitsim.base.errors import TransitsimError
from transitsim.network import Exchange, LinkSpec, NetworkSpec, closed_form_time_s
from transitsim.replay.compute import Stragglers
from transitsim.replay.replay import replay
from transitsim.replay.request import ReplayRequest
from transitsim.traces.format import read_trace, write_trace

WORKERS = 4
N_PARAMS = 1_000_000
DENSE = 2 * N_PARAMS
SWITCH = NetworkSpec(
    name="rack", topology="switch", workers=WORKERS, host_link=LinkSpec(rate_bps=10e9)
)


def profile(numel, ready, share=0.6):
    return {
        "version": 1,
        "window": "test",
        "forward_s": 0.0,
        "backward_s": 0.0,
        "backward_share": share,
        "tensors": [
            {"name": f"t{i}", "numel": n, "ready": r}
            for i, (n, r) in enumerate(zip(numel, ready, strict=True))
        ],
    }


def make_trace(tmp_path, *, variant="A", payload=DENSE, compute_s=0.05, compress_s=0.0, prof=None):
    steps = 5
    frame = pd.DataFrame(
        {
            "step": np.arange(1, steps + 1, dtype=np.int64),
            "train_loss": np.linspace(5.0, 3.0, steps),
            "val_loss": np.linspace(5.1, 3.1, steps),
            "lr": 1e-3,
            "payload_bytes": np.full(steps, payload, dtype=np.int64),
            "collective": "all_reduce" if variant == "A" else "all_gather",
            "reducible": True,
            "compute_s": compute_s,
            "compress_s": compress_s,
        }
    )
    meta = {
        "name": f"{variant}-tiny-s0",
        "variant": variant,
        "seed": 0,
        "workers": WORKERS,
        "n_params": N_PARAMS,
        "dense_bytes_per_step": DENSE,
        "rows": "every_step",
        "origin": "trainer",
        "status": "complete",
        "batch": 4,
        "context": 128,
    }
    if prof is not None:
        meta["backward_profile"] = prof
    return read_trace(write_trace(tmp_path / f"{variant}.parquet", frame, meta))


def ring_s(nbytes):
    return closed_form_time_s(SWITCH, Exchange("ring_allreduce", nbytes))


def test_one_bucket_equals_no_overlap_bit_for_bit(tmp_path):
    trace = make_trace(tmp_path, prof=profile([N_PARAMS], [1.0]))
    plain = replay(trace, ReplayRequest(SWITCH)).timeline
    overlapped = replay(trace, ReplayRequest(SWITCH, overlap="buckets")).timeline
    assert overlapped["time_s"].tolist() == plain["time_s"].tolist()
    assert (overlapped["hidden_s"] == 0).all()
    assert overlapped["exposed_s"].iloc[0] == pytest.approx(ring_s(DENSE))


@pytest.mark.parametrize("compute_s", [0.002, 0.05])  # exchange longer / shorter than backward
def test_two_buckets_match_the_hand_derived_step(tmp_path, compute_s):
    # tensors of 0.4 M and 0.6 M parameters; reverse registration: t1 (ready at 0.3) goes first
    trace = make_trace(tmp_path, compute_s=compute_s, prof=profile([400_000, 600_000], [1.0, 0.3]))
    bucket = 700_000  # t1 (1.2 MB) fills DDP's 1 MiB first bucket, t0 (800 kB) the second
    timeline = replay(trace, ReplayRequest(SWITCH, overlap="buckets", bucket_bytes=bucket)).timeline
    forward, backward = 0.4 * compute_s, 0.6 * compute_s
    t1, t2 = ring_s(1_200_000), ring_s(800_000)
    expected = max(forward + 0.3 * backward + t1, compute_s) + t2
    assert timeline["step_s"].iloc[0] == pytest.approx(expected, rel=1e-9)
    plain = replay(trace, ReplayRequest(SWITCH)).timeline["step_s"].iloc[0]
    assert timeline["step_s"].iloc[0] < plain
    row = timeline.iloc[0]
    assert row["exchange_s"] == pytest.approx(t1 + t2, rel=1e-9)
    assert row["exposed_s"] == pytest.approx(expected - compute_s, rel=1e-9)
    assert row["exposed_s"] + row["hidden_s"] == pytest.approx(row["exchange_s"])
    parts = row[["compute_s", "compress_s", "transform_s", "wire_s", "wait_s", "update_s"]]
    assert parts.sum() == pytest.approx(row["step_s"])
    if compute_s > 0.01:  # backward longer than the first bucket: only the second shows
        assert row["exposed_s"] == pytest.approx(t2, rel=1e-9)
    else:  # the first bucket outlasts backward: the second waits for it
        assert expected == pytest.approx(forward + 0.3 * backward + t1 + t2)


def test_uniform_assumption_is_said_in_the_notes(tmp_path):
    trace = make_trace(tmp_path)
    result = replay(trace, ReplayRequest(SWITCH, overlap="buckets", bucket_bytes=500_000))
    assert any("uniform backward" in note for note in result.timeline.attrs["notes"])
    assert result.timeline["hidden_s"].iloc[0] > 0
    assert (result.timeline["overlap"] == "buckets").all()


def test_per_message_costs_fall_back_to_one_bucket_never_slower(tmp_path):
    slow = NetworkSpec(
        name="wan-ish",
        topology="switch",
        workers=WORKERS,
        host_link=LinkSpec(rate_bps=100e9, latency_s=2e-3),
    )
    # DeMo: 50 tensors, tiny payloads each, short backward: per-tensor all-gathers cost latency
    numel = [20_000] * 50
    ready = list(np.linspace(1.0, 0.02, 50))
    trace = make_trace(
        tmp_path,
        variant="C",
        payload=20_000,
        compute_s=1e-3,
        compress_s=1e-4,
        prof=profile(numel, ready),
    )
    plain = replay(trace, ReplayRequest(slow)).timeline
    overlapped = replay(trace, ReplayRequest(slow, overlap="buckets"))
    assert overlapped.timeline["time_s"].tolist() == plain["time_s"].tolist()
    assert any("one bucket" in note for note in overlapped.timeline.attrs["notes"])


@pytest.mark.parametrize("variant", ["A", "C"])
def test_overlap_never_makes_a_replay_slower_with_stragglers(tmp_path, variant):
    numel = [50_000] * 20
    ready = list(np.linspace(1.0, 0.05, 20))
    payload = DENSE if variant == "A" else DENSE // 16
    trace = make_trace(
        tmp_path, variant=variant, payload=payload, compress_s=0.004, prof=profile(numel, ready)
    )
    jitter = Stragglers(distribution="exponential", scale=0.2)
    for network in (SWITCH, NetworkSpec("fast", "switch", WORKERS, LinkSpec(rate_bps=400e9))):
        plain = replay(trace, ReplayRequest(network, stragglers=jitter, seed=3)).timeline
        over = replay(
            trace, ReplayRequest(network, stragglers=jitter, seed=3, overlap="buckets")
        ).timeline
        assert (over["step_s"] <= plain["step_s"] + 1e-15).all()
        assert over["time_s"].iloc[-1] <= plain["time_s"].iloc[-1]


def test_reuse_and_fresh_simulation_agree_with_overlap(tmp_path):
    trace = make_trace(tmp_path, prof=profile([300_000] * 3 + [100_000], [0.9, 0.6, 0.3, 0.1]))
    kwargs = dict(overlap="buckets", bucket_bytes=400_000)
    reused = replay(trace, ReplayRequest(SWITCH, **kwargs)).timeline
    fresh = replay(trace, ReplayRequest(SWITCH, reuse=False, **kwargs)).timeline
    assert reused["time_s"].tolist() == fresh["time_s"].tolist()


def test_bad_overlap_arguments_are_one_line_errors(tmp_path):
    trace = make_trace(tmp_path)
    with pytest.raises(TransitsimError, match="overlap 'yes'"):
        replay(trace, ReplayRequest(SWITCH, overlap="yes"))
    with pytest.raises(TransitsimError, match="bucket_bytes"):
        replay(trace, ReplayRequest(SWITCH, overlap="buckets", bucket_bytes=0))
