"""The host stage (NetworkSpec.host) on every fast path against the per-transfer DES, with link
faults and background traffic: random small networks of tests/test_network_fast_vs_des.py with
a host endpoint (a per-message cost, a rate each way, one or several ranks a host), 1-3 outages
and constant or changing background shares on random links. Wherever "auto" takes the fast path
(or its linear form), every finish, the critical path's wait and bottleneck, and each resource's
busy time and bytes must equal the DES's, as must the max-plus (or hierarchical stage) form a
fault-free replay would time many steps by; and the host must cap flows often enough to prove it.
"""

import dataclasses
import math

import numpy as np
import pytest
from test_network_fast_vs_des import _case, _faults, assert_engines_agree

from transitsim.network import COLLECTIVE_ALGOS, simulate_exchange
from transitsim.network.background import Background
from transitsim.network.forms import steps_form
from transitsim.network.spec import HostSpec, NetworkSpec
from transitsim.network.topology import worker_groups

CONFIGS = 200


def _host(rng: np.random.Generator, network: NetworkSpec) -> HostSpec:
    """A host endpoint: mostly one rank a host (the fast paths' case), sometimes several (a
    host holding ranks of two racks or datacentres half the time it can)."""
    size = math.gcd(*{len(g) for g in worker_groups(network)})
    if rng.random() < 0.5:
        size = network.workers
    shared = [d for d in range(2, size + 1) if network.workers % d == 0 and size % d == 0]
    per = int(rng.choice(shared)) if shared and rng.random() < 0.3 else 1
    return HostSpec(
        per_message_s=float(rng.choice([0.0, 1e-7, 2e-6])),
        rate_bps=float(rng.choice([math.inf, 10e9, 50e9, 200e9, 1e12])),
        ranks_per_host=per,
    )


def _background(rng: np.random.Generator, network: NetworkSpec, span_s: float) -> NetworkSpec:
    """A constant or changing share of the host links, the WAN or the spine (or none)."""
    pick = rng.random()
    if pick < 0.3:
        return network
    if pick < 0.65:
        background = Background.constant(float(rng.choice([0.25, 0.5])))
    else:  # a change inside the exchange half the time: then the DES applies it
        at = float(rng.choice([0.5, 50.0])) * max(span_s, 1e-9)
        background = Background((0.0, at), (0.0, float(rng.choice([0.3, 0.6]))))
    where = rng.choice(["host_link", "wan_link", "spine_link"])
    link = getattr(network, str(where))
    if link is None:
        where, link = "host_link", network.host_link
    return dataclasses.replace(
        network, **{str(where): dataclasses.replace(link, background=background)}
    )


@pytest.mark.parametrize("algo", COLLECTIVE_ALGOS)
def test_the_host_stage_on_the_fast_paths_equals_the_des_with_faults_and_background(algo):
    fast_count = host_bound = shared_hosts = held_up = forms = failover = 0
    for seed in range(CONFIGS):
        network, exchange, start = _case(algo, seed)
        rng = np.random.default_rng([seed, 25])
        network = dataclasses.replace(network, host=_host(rng, network))
        clean = simulate_exchange(network, exchange, start_s=start)
        form = steps_form(network, exchange)  # what replay times many steps by, if anything
        if form is not None:
            forms += 1
            starts = np.zeros(network.workers) if start is None else start
            check = simulate_exchange(network, exchange, start_s=start, method="des")
            assert form.finish_s(starts[None, :])[0] == pytest.approx(
                check.finish_s.max(), abs=1e-9
            ), seed
        network = _background(rng, network, clean.time_s)
        faults = _faults(np.random.default_rng([seed, 99]), network, start, clean.time_s)
        auto = simulate_exchange(network, exchange, start_s=start, faults=faults)
        des = simulate_exchange(network, exchange, start_s=start, faults=faults, method="des")
        host_bound += network.host.rate_bps < network.host_link.available_bps  # caps flows
        shared_hosts += network.host.ranks_per_host > 1
        failover += any("#" in f.link for f in faults)  # tests/test_parallel_links.py
        if auto.method != "fast":
            continue
        fast_count += 1
        held_up += bool(np.max(auto.finish_s - clean.finish_s) > 1e-12)
        assert_engines_agree(auto, des, seed)
    eligible = CONFIGS - failover  # one of parallel links down: failover, often the DES
    assert fast_count >= 0.4 * eligible, f"only {fast_count} of {eligible} took the fast path"
    assert host_bound >= 0.2 * CONFIGS, f"the host capped flows in only {host_bound}"
    assert shared_hosts >= 0.1 * CONFIGS, f"only {shared_hosts} shared a host"
    assert held_up >= 0.2 * fast_count, f"faults held up only {held_up} of {fast_count}"
    assert forms >= 0.2 * CONFIGS or "tree" in algo, f"only {forms} max-plus forms checked"
