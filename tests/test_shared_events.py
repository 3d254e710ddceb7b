"""The compiled exchange across groups (fast/hierarchical/exchange_events.py) against hierarchical's
own event loop (`exchange_stage`, heapq in Python): the same times, float for float, on random rings
with ties, flows that cross nothing shared, several shared links and several steps at once."""

from types import SimpleNamespace

import numpy as np
import pytest

from transitsim.network.fast.hierarchical.exchange_events import exchange_events
from transitsim.network.fast.hierarchical.stages import exchange_stage
from transitsim.network.schedules.dag import RingStage


def _reference(ready, pre, dur, post, bits, group, cap, capacity):
    """exchange_stage on one step: free and arrive (phases, flows)."""
    phases, flows = pre.shape
    rings, members = ready.shape
    ids = np.arange(phases * flows).reshape(phases, rings, members)
    stage = RingStage(np.arange(flows).reshape(rings, members), ids, 0.0, True, True)
    table = SimpleNamespace(pre=pre.ravel(), dur=dur.ravel(), post=post.ravel(), bits=bits.ravel())
    per_flow_cap = np.array([cap[g] if g >= 0 else 1.0 for g in group])
    links = SimpleNamespace(group=group, cap=per_flow_cap, capacity=list(capacity))
    timing = tuple(np.full(ids.size, np.nan) for _ in range(3))
    exchange_stage(ready, stage, table, links, timing, np.zeros(len(capacity)))
    _, free_s, arrive_s = timing
    return free_s.reshape(phases, flows), arrive_s.reshape(phases, flows)


def _case(seed: int):
    rng = np.random.default_rng(seed)
    rings, members = int(rng.integers(1, 6)), int(rng.integers(1, 5))
    phases, flows = int(rng.integers(1, 2 * members + 1)), rings * members
    groups = int(rng.integers(1, 4))
    steps = int(rng.integers(1, 4))

    def times(shape, scale):  # coarse values: ties between events are common
        return rng.integers(0, 4, size=shape) * scale

    ready = times((steps, flows), 0.5)
    pre, post = times((phases, flows), 0.25), times((phases, flows), 0.125)
    dur = 0.5 + times((phases, flows), 0.5)
    bits = rng.choice([1.0, 2.0, 3.0], size=(1, flows)) * np.ones((phases, 1))
    if rng.random() < 0.5:
        bits = rng.choice([1.0, 2.0, 3.0], size=(phases, flows))
    group = rng.integers(-1, groups, size=flows)
    cap = rng.choice([0.5, 1.0, 2.0], size=groups)
    capacity = rng.choice([1.0, 2.0, 3.0], size=groups)
    return rings, members, ready, pre, dur, post, bits, group, cap, capacity


@pytest.mark.parametrize("seed", range(300))
def test_compiled_exchange_equals_the_event_loop(seed):
    rings, members, ready, pre, dur, post, bits, group, cap, capacity = _case(seed)
    free, arrive = exchange_events(ready, members, pre, dur, post, bits, group, cap, capacity)
    for step in range(ready.shape[0]):
        want_free, want_arrive = _reference(
            ready[step].reshape(rings, members), pre, dur, post, bits, group, cap, capacity
        )
        assert np.array_equal(free[step], want_free), (seed, step)
        assert np.array_equal(arrive[step], want_arrive), (seed, step)


def test_sharing_slows_flows_as_processor_sharing():
    """Two equal flows on one link of capacity 2 with caps 2: each at rate 1, both done at 4."""
    ready = np.zeros((1, 2))
    ones = np.ones((1, 2))
    free, _ = exchange_events(
        ready,
        2,
        0 * ones,
        ones,
        0 * ones,
        4 * ones,
        np.array([0, 0]),
        np.array([2.0]),
        np.array([2.0]),
    )
    assert free[0, 0].tolist() == [4.0, 4.0]


def test_many_steps_form_equals_the_fast_path_step_by_step_with_stragglers():
    """Replay's form of hierarchical (its exchange across groups by this kernel) on random small
    networks and straggling starts: each step's finish is the fast path's for that step alone."""
    from test_network_fast_vs_des import _case

    from transitsim.base.errors import TransitsimError
    from transitsim.network import forms, simulate_exchange

    formed = 0
    for seed in range(60):
        network, exchange, _ = _case("hierarchical", seed)
        forms._LINEAR.clear()
        form = forms.steps_form(network, exchange)
        if form is None:
            continue
        starts = np.random.default_rng(seed).exponential(2e-4, (4, network.workers))
        try:
            want = [
                simulate_exchange(network, exchange, start_s=row, method="fast").finish_s.max()
                for row in starts
            ]
        except TransitsimError:
            continue
        formed += 1
        np.testing.assert_allclose(form.finish_s(starts), want, rtol=1e-12, err_msg=str(seed))
    assert formed >= 15, f"only {formed} forms compared"
