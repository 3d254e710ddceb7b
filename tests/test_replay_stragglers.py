"""Straggler replay at scale: the O(N) max-plus path and the hierarchical fast path against the
per-transfer DES, step by step on the same random draws."""

import numpy as np
import pytest
from test_replay import make_trace

from transitsim.network import (
    Exchange,
    LinkFault,
    LinkSpec,
    NetworkSpec,
    SwitchSpec,
    simulate_exchange,
)
from transitsim.replay.compute import Stragglers
from transitsim.replay.replay import replay
from transitsim.replay.request import ReplayRequest

SWITCH = NetworkSpec(
    "rack",
    "switch",
    4,
    LinkSpec(100e9, latency_s=1e-6),
    switch=SwitchSpec(aggregator=True, agg_slot_bytes=65536),
)
TWO_DC = NetworkSpec(
    "2dc",
    "datacentres",
    4,
    LinkSpec(100e9, length_m=3),
    datacentres=2,
    wan_link=LinkSpec(40e9, length_m=1e5),
)
NEAR_DC = NetworkSpec(  # a short WAN: the exchange's phases meet on it, steps timed one by one
    "near",
    "datacentres",
    6,
    LinkSpec(100e9, length_m=3),
    datacentres=2,
    wan_link=LinkSpec(40e9, length_m=10),
)
CASES = {
    "ring all-reduce": (SWITCH, "all_reduce", True, None),
    "ring all-gather": (SWITCH, "all_gather", False, None),
    "switch sum": (SWITCH, "all_reduce", True, "switch"),
    "hierarchical": (TWO_DC, "all_reduce", True, None),
    "hierarchical, phases meet": (NEAR_DC, "all_reduce", True, None),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("jitter", ["exponential", "lognormal"])
def test_straggler_replay_equals_the_des_step_by_step(tmp_path, name, jitter):
    network, collective, reducible, sum_at = CASES[name]
    steps = [1, 2, 3, 5, 6, 7, 8, 10, 11, 12]  # an interval of 2 rows in between
    trace = make_trace(
        tmp_path,
        steps=steps,
        collective=collective,
        reducible=reducible,
        compute_s=[0.01 + 0.001 * (s % 3) for s in steps],
        rows="every_step",
    )
    stragglers = Stragglers(distribution=jitter, scale=0.05)
    kwargs = {"stragglers": stragglers, "seed": 5, "sum_at": sum_at or "receivers"}
    fast = replay(trace, ReplayRequest(network, **kwargs))
    des = replay(trace, ReplayRequest(network, method="des", reuse=False, **kwargs))
    assert fast.timeline["algo"].iloc[0] == des.timeline["algo"].iloc[0]
    for column in ("step_s", "time_s", "compute_s"):
        np.testing.assert_allclose(
            fast.timeline[column], des.timeline[column], rtol=1e-12, atol=1e-12
        )
    parts = fast.timeline[["compute_s", "compress_s", "transform_s", "wire_s", "wait_s"]]
    np.testing.assert_allclose(
        parts.sum(axis=1) + fast.timeline["update_s"], fast.timeline["step_s"], rtol=1e-9
    )
    assert (fast.step_detail["events"] < des.step_detail["events"]).all()
    assert len(fast.step_detail) == len(des.step_detail) == len(steps)


@pytest.mark.parametrize("name", list(CASES))
def test_straggler_replay_with_an_outage_equals_the_des_step_by_step(tmp_path, name):
    """Random stragglers and a link outage: the steps before and after it go at once (max-plus),
    the steps it meets are simulated with it (fast path), on the same draws as the DES's."""
    network, collective, reducible, sum_at = CASES[name]
    steps = list(range(1, 13))
    trace = make_trace(
        tmp_path, steps=steps, collective=collective, reducible=reducible, compute_s=0.01
    )
    kwargs = {
        "stragglers": Stragglers(distribution="exponential", scale=0.05),
        "seed": 3,
        "sum_at": sum_at or "receivers",
    }
    plain = replay(trace, ReplayRequest(network, **kwargs)).timeline
    begin = float(plain["time_s"].iloc[3])  # from the start of step 5, into step 6
    link = "dc0->dc1" if network.topology == "datacentres" else "h1->sw"
    faults = [LinkFault(link, begin + 0.008, begin + 0.008 + 1.5 * float(plain["step_s"].iloc[4]))]
    fast = replay(trace, ReplayRequest(network, faults=faults, **kwargs))
    des = replay(trace, ReplayRequest(network, faults=faults, method="des", reuse=False, **kwargs))
    for column in ("step_s", "time_s"):  # (the max-plus split into wire and wait is approximate)
        np.testing.assert_allclose(
            fast.timeline[column], des.timeline[column], rtol=1e-12, atol=1e-12
        )
    detail = fast.step_detail
    assert detail["faulted"].any() and detail["faulted"].sum() <= 3
    assert (detail["events"][~detail["faulted"]] == 0).sum() >= 8  # the max-plus blocks
    assert fast.timeline["time_s"].iloc[-1] > plain["time_s"].iloc[-1]


def test_straggler_replay_of_a_tree_across_datacentres_equals_the_des(tmp_path):
    """The double binary tree's WAN transfers share it: no max-plus form, so every straggler
    step is simulated; with both halves at once (issue 24) the hosts' links are shared too, and
    max-min across the WAN and them is the DES's, which the compiled pass (fast/tree_kernel.py)
    computes by progressive filling, step by step."""
    trace = make_trace(tmp_path, steps=list(range(1, 7)), compute_s=0.01)
    kwargs = {
        "collective": "double_binary_tree",
        "stragglers": Stragglers(distribution="exponential", scale=0.05),
        "seed": 2,
    }
    fast = replay(trace, ReplayRequest(TWO_DC, **kwargs))
    des = replay(trace, ReplayRequest(TWO_DC, method="des", reuse=False, **kwargs))
    assert (fast.timeline["algo"] == "double_binary_tree").all()
    for column in ("step_s", "time_s", "wait_s", "wire_s"):
        np.testing.assert_allclose(
            fast.timeline[column], des.timeline[column], rtol=1e-12, atol=1e-12
        )
    assert simulate_exchange(TWO_DC, Exchange("double_binary_tree", 1_000)).method == "fast"


def test_blocks_share_one_reference_step_and_count_every_step_s_link_use(tmp_path, monkeypatch):
    """Straggler blocks of a linear exchange simulate the all-ready reference step once for the
    run, not once per block (at 65,536 workers it takes minutes and a block holds 32 steps),
    and the link figures still count every step: two steps a block gives the same replay and
    link bytes as one block of them all."""
    from transitsim.replay import maxplus, step

    steps = list(range(1, 13))
    trace = make_trace(tmp_path, steps=steps, compute_s=[0.01] * 12, rows="every_step")
    kwargs = {"stragglers": Stragglers(distribution="exponential", scale=0.05), "seed": 3}
    whole = replay(trace, ReplayRequest(SWITCH, **kwargs))
    calls = []
    simulate = step.simulate_exchange
    monkeypatch.setattr(
        step, "simulate_exchange", lambda *a, **k: calls.append(1) or simulate(*a, **k)
    )
    monkeypatch.setattr(maxplus, "BLOCK_VALUES", 2 * SWITCH.workers)  # 6 blocks of 2 steps
    split = replay(trace, ReplayRequest(SWITCH, **kwargs))
    assert len(calls) == 1
    np.testing.assert_array_equal(split.timeline["step_s"], whole.timeline["step_s"])
    assert split.link_stats["bytes"].sum() == pytest.approx(whole.link_stats["bytes"].sum())
    assert split.link_stats["bytes"].sum() > 0
