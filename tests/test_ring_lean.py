"""The lean ring (fast/ring/lean.py: checkpoints, and times recomputed for the walk back)
against the ring that keeps every message's times, on the random small networks of
tests/test_network_fast_vs_des.py, with and without link outages and with hosts holding several
ranks: the same finishes, transform, wire, wait and bottleneck, bit for bit (run again 3 phases
at a time here). The lean form is what lets a ring of 65,536 workers be timed at all
(2 (N - 1) N messages: 34 GB a time array), so it must answer what the full one answers.
"""

import dataclasses
import math

import numpy as np
import pytest
from test_network_fast_vs_des import _case, _faults

from transitsim.base.errors import TransitsimError
from transitsim.network import simulate_exchange
from transitsim.network.fast.ring import lean as ring_lean
from transitsim.network.fast.ring import recurrence as fast_ring
from transitsim.network.spec import HostSpec
from transitsim.network.topology import worker_groups

CONFIGS = 200


def _lean_and_full(network, exchange, start, faults):
    full = simulate_exchange(network, exchange, start_s=start, faults=faults, method="fast")
    saved = fast_ring.LEAN_MESSAGES, ring_lean.SEGMENT
    fast_ring.LEAN_MESSAGES = -1  # every ring lean, run again 3 phases at a time
    ring_lean.SEGMENT = 3
    try:
        lean = simulate_exchange(network, exchange, start_s=start, faults=faults, method="fast")
    finally:
        fast_ring.LEAN_MESSAGES, ring_lean.SEGMENT = saved
    return lean, full


def _with_shared_hosts(rng, network):
    size = math.gcd(*{len(g) for g in worker_groups(network)})
    shared = [d for d in range(2, size + 1) if network.workers % d == 0 and size % d == 0]
    if not shared:
        return network
    host = HostSpec(per_message_s=1e-7, rate_bps=50e9, ranks_per_host=int(rng.choice(shared)))
    return dataclasses.replace(network, host=host)


@pytest.mark.parametrize("algo", ["ring_allreduce", "ring_allgather"])
@pytest.mark.parametrize("variant", ["plain", "faults", "hosts"])
def test_the_lean_ring_answers_what_the_full_one_does(algo, variant):
    compared = transformed = stalled = shared = 0
    for seed in range(CONFIGS):
        network, exchange, start = _case(algo, seed)
        rng = np.random.default_rng([seed, 7])
        if variant == "hosts":
            network = _with_shared_hosts(rng, network)
        faults = None
        if variant == "faults":
            clean = simulate_exchange(network, exchange, start_s=start)
            faults = _faults(rng, network, start, clean.time_s)
        try:
            lean, full = _lean_and_full(network, exchange, start, faults)
        except TransitsimError as error:  # the ring's own refusals (contention): the DES's case
            assert "would not be exact" in str(error), (seed, error)
            continue
        compared += 1
        transformed += full.transform_s > 0
        stalled += faults is not None and bool(np.any(full.finish_s != clean.finish_s))
        shared += network.host is not None and network.host.ranks_per_host > 1
        np.testing.assert_array_equal(lean.finish_s, full.finish_s, err_msg=str(seed))
        assert lean.time_s == full.time_s, seed
        for part in ("transform_s", "wire_s", "wait_s"):  # the same times, the same walk
            assert getattr(lean, part) == getattr(full, part), (seed, part)
        assert lean.bottleneck == full.bottleneck, seed
        assert np.array_equal(lean.bytes_sent, full.bytes_sent)
        for column in ("busy_s", "bytes"):
            np.testing.assert_array_equal(
                lean.link_stats[column].to_numpy(), full.link_stats[column].to_numpy()
            )
    least = 0.3 if variant == "hosts" else 0.5  # shared hosts: rings in step only (in_step.py)
    assert compared >= least * CONFIGS, f"only {compared} of {CONFIGS} rings timed"
    assert transformed >= 5, f"only {transformed} rings had a transform on the critical path"
    if variant == "faults":
        assert stalled >= 10, f"outages held up only {stalled} rings"
    if variant == "hosts":
        assert shared >= 5, f"only {shared} rings shared hosts"
