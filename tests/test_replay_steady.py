"""Replay of runs with nothing random, no fault and no background change, as arrays
(transitsim/replay/steady.py): the very numbers the step-by-step replay gives, bit for bit."""

import numpy as np
import pandas as pd
import pytest
from test_replay import SWITCH, WORKERS, make_trace

import transitsim.replay.steady as replay_steady
from transitsim.network import LinkFault
from transitsim.replay.compute import Stragglers
from transitsim.replay.keys import first_appearance_codes
from transitsim.replay.replay import replay
from transitsim.replay.request import ReplayRequest


def stepped(monkeypatch: pytest.MonkeyPatch, trace, request: ReplayRequest):
    """The same replay with the array path turned off (the stepping, reuse still on)."""
    with monkeypatch.context() as patch:
        patch.setattr(replay_steady, "steady_rows", lambda *a: None)
        return replay(trace, request)


def assert_same(a, b) -> None:
    pd.testing.assert_frame_equal(a.timeline, b.timeline, check_exact=True)
    pd.testing.assert_frame_equal(a.link_stats, b.link_stats, check_exact=True)
    pd.testing.assert_frame_equal(a.step_detail, b.step_detail, check_exact=True)


@pytest.mark.parametrize("seed", range(6))
def test_arrays_give_the_stepping_numbers_bit_for_bit(tmp_path, monkeypatch, seed):
    """Rows that repeat and rows that do not: varying compute, two payloads, updates, rows that
    stand for several steps, fixed per-worker factors, with and without overlap."""
    rng = np.random.default_rng(seed)
    steps = np.cumsum(rng.integers(1, 4, size=40)).tolist()
    compute = rng.choice([0.01, 0.02, 0.02 + 1e-9], size=40).tolist()
    trace = make_trace(
        tmp_path,
        steps=steps,
        rows="evaluated_steps",
        payload_bytes=rng.choice([200_000, 400_000], size=40).tolist(),
        update_s=rng.choice([0.0, 0.001], size=40).tolist(),
        name=f"A-steady-{seed}-s0",
    )
    trace.steps["compute_s"] = compute
    factors = Stragglers(worker_factors=[1.0, 1.0, 1.5, 1.0][:WORKERS])
    for kwargs in ({}, {"stragglers": factors}, {"overlap": "buckets"}):
        request = ReplayRequest(SWITCH, **kwargs)
        arrays = replay(trace, request)
        assert_same(arrays, stepped(monkeypatch, trace, request))
    assert arrays.step_detail["reused"].sum() > 0  # repeats were timed once


def test_the_array_path_is_the_one_taken_and_only_where_it_may_be(tmp_path, monkeypatch):
    trace = make_trace(tmp_path, steps=list(range(1, 31)))
    taken = []
    real = replay_steady.steady_rows

    def spy(*args):
        rows = real(*args)
        taken.append(rows is not None)
        return rows

    monkeypatch.setattr(replay_steady, "steady_rows", spy)
    plain = replay(trace, ReplayRequest(SWITCH))
    assert taken == [True]
    assert len(plain.step_detail) == 30 and (~plain.step_detail["reused"]).sum() == 1
    start = float(plain.timeline["time_s"].iloc[4])
    fault = LinkFault("h1->sw", down_from_s=start, down_until_s=start + 0.2)
    replay(trace, ReplayRequest(SWITCH, faults=[fault]))
    replay(trace, ReplayRequest(SWITCH, reuse=False))
    assert taken == [True, False, False]  # a fault, reuse off: the stepping
    jitter = Stragglers(distribution="exponential", scale=0.1)
    replay(trace, ReplayRequest(SWITCH, stragglers=jitter))
    assert taken == [True, False, False]  # random input never asks


def test_codes_follow_first_appearance_across_columns():
    codes, firsts = first_appearance_codes(
        ([3, 1, 3, 1, 2], [0.5, 0.5, 0.5, 0.25, 0.5], ["a", "a", "a", "a", "b"])
    )
    assert codes.tolist() == [0, 1, 0, 2, 3]
    assert firsts.tolist() == [0, 1, 3, 4]
    nan = first_appearance_codes(([np.nan, 1.0, np.nan],))[0]
    assert nan.tolist() == [0, 1, 0]  # NaN is one value, not a failure
