"""The lean hierarchical (fast/hierarchical/lean.py: one phase of each ring stage kept, checkpoints,
times recomputed for the walk back) against the full fast path that keeps every message, on the
random small networks of tests/test_network_fast_vs_des.py: the same finishes, transform, wire, wait
and bottleneck bit for bit, the same bytes and link figures, and the same many-steps form. Past 2^25
messages (about 5,800 workers in 2 datacentres) hierarchical has only the lean form: at 65,536
workers its full schedule is 4.3e9 messages.
"""

import numpy as np
import pytest
from test_network_fast_vs_des import _case

from transitsim.base.errors import TransitsimError
from transitsim.network import forms, simulate_exchange
from transitsim.network.exchange import equal_groups
from transitsim.network.exchange_spec import Exchange
from transitsim.network.fast.hierarchical import lean as hier_lean
from transitsim.network.schedules.dag import hierarchical_layout
from transitsim.network.spec import LinkSpec, NetworkSpec, SwitchSpec

CONFIGS = 200


@pytest.fixture
def every_hierarchical_lean(monkeypatch):
    """Every hierarchical lean, its ring stages run again 3 phases at a time."""

    def lean():
        monkeypatch.setattr(hier_lean, "LEAN_MESSAGES", -1)
        monkeypatch.setattr(hier_lean, "SEGMENT", 3)
        forms._LINEAR.clear()

    return lean


def _steps_finish(network, exchange, starts):
    forms._LINEAR.clear()
    form = forms.steps_form(network, exchange)
    return None if form is None else form.finish_s(starts)


def test_the_lean_hierarchical_answers_what_the_full_one_does(every_hierarchical_lean):
    full_runs = []
    for seed in range(CONFIGS):
        network, exchange, start = _case("hierarchical", seed)
        try:
            full = simulate_exchange(network, exchange, start_s=start, method="fast")
        except TransitsimError as error:  # not exact on the fast path: the DES's case
            assert "would not be exact" in str(error), (seed, error)
            continue
        steps = np.random.default_rng(seed).exponential(1e-4, (5, network.workers))
        full_runs.append(
            (seed, network, exchange, start, full, _steps_finish(network, exchange, steps), steps)
        )
    every_hierarchical_lean()
    compared = pre_refused = formed = waited = 0
    for seed, network, exchange, start, full, full_steps, steps in full_runs:
        try:
            lean = simulate_exchange(network, exchange, start_s=start, method="fast")
        except TransitsimError as error:
            assert exchange.transform_at == "pluggable", (seed, error)  # a pre-stage: not lean
            assert "pre-stage transform" in str(error)
            pre_refused += 1
            continue
        compared += 1
        waited += full.wait_s > 0
        np.testing.assert_array_equal(lean.finish_s, full.finish_s, err_msg=str(seed))
        assert lean.time_s == full.time_s, seed
        for part in ("transform_s", "wire_s", "wait_s"):  # the same times, the same walk
            assert getattr(lean, part) == getattr(full, part), (seed, part)
        assert lean.bottleneck == full.bottleneck, seed
        assert lean.events == full.events, seed
        np.testing.assert_allclose(lean.bytes_sent, full.bytes_sent, rtol=1e-12)
        np.testing.assert_allclose(lean.bytes_received, full.bytes_received, rtol=1e-12)
        for column in ("busy_s", "bytes"):  # a kept phase counted `phases` times: rounding
            np.testing.assert_allclose(
                lean.link_stats[column].to_numpy(),
                full.link_stats[column].to_numpy(),
                rtol=1e-9,
                atol=1e-15,
                err_msg=f"{seed} {column}",
            )
        lean_steps = _steps_finish(network, exchange, steps)
        assert (lean_steps is None) == (full_steps is None), seed
        if lean_steps is not None:
            formed += 1
            np.testing.assert_array_equal(lean_steps, full_steps, err_msg=str(seed))
    assert compared >= 0.4 * CONFIGS, f"only {compared} of {CONFIGS} compared"
    assert formed >= 0.3 * CONFIGS, f"only {formed} many-steps forms compared"
    assert waited >= 10, f"only {waited} exchanges waited (stragglers or sharing)"
    assert pre_refused >= 1


@pytest.mark.parametrize("shape", [(2, 3), (3, 4), (4, 1), (1, 5), (5, 2)])
@pytest.mark.parametrize("pre", [False, True])
def test_full_messages_counts_the_full_schedule(shape, pre):
    groups = np.arange(shape[0] * shape[1]).reshape(shape)
    schedule, _ = hierarchical_layout(groups, 1000, pre)
    assert hier_lean.full_messages(shape, pre) == len(schedule)


def _two_sites(workers: int) -> NetworkSpec:
    return NetworkSpec(
        f"2dc-{workers}",
        "datacentres",
        workers,
        LinkSpec(200e9, length_m=3),
        switch=SwitchSpec(forwarding_latency_s=500e-9),
        datacentres=2,
        wan_link=LinkSpec(10e9, length_m=1e6),
    )


def test_past_its_full_size_hierarchical_is_timed_lean_and_its_two_forms_agree():
    """6,000 workers in 2 sites: 36 M messages, more than the full schedule is built for. The
    lean exchange (phase-by-phase recurrence) and the many-steps form (a sliding-window maximum
    over the reduce-scatter, the all-gather's tail in reverse) are computed differently and
    must give the same step time."""
    network = _two_sites(6000)
    exchange = Exchange("hierarchical", 8_000_000)
    groups = equal_groups(network)
    assert hier_lean.is_lean(groups.shape, False)
    result = simulate_exchange(network, exchange, method="fast")
    forms._LINEAR.clear()
    form = forms.steps_form(network, exchange)
    assert form is not None
    step = form.finish_s(np.zeros((1, network.workers)))[0]
    assert result.time_s == pytest.approx(step, rel=1e-12)
    assert result.wire_s + result.wait_s == pytest.approx(result.time_s, rel=1e-12)
    # every worker sends its 2 (n - 1) chunks of payload / n inside its site and its shard
    # across: 2 (n - 1) / n + 2 (D - 1) / (D n) of the payload on the line
    n, d = 3000, 2
    share = 2 * (n - 1) / n + 2 * (d - 1) / (d * n)
    np.testing.assert_allclose(result.bytes_sent, share * exchange.payload_bytes, rtol=1e-9)


def test_lean_hierarchical_with_link_faults_says_why(every_hierarchical_lean):
    every_hierarchical_lean()
    network = _two_sites(8)
    from transitsim.network.faults import LinkFault

    with pytest.raises(TransitsimError, match="lean form times fault-free"):
        simulate_exchange(
            network,
            Exchange("hierarchical", 1_000_000),
            faults=[LinkFault("dc0->dc1", 0.0, 1e-3)],
            method="fast",
        )
