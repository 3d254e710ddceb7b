"""The max-plus forms of an exchange: what lets replay time many steps at once.

An exchange whose transfer times do not depend on when workers start has a linear form (finish = max
over start + constant, fast/shared/maxplus.py); hierarchical has a stage-vectorised one
(fast/hierarchical/maxplus.py). Both are built from the same fabric, schedules and fast-path plans
as `simulate_exchange`, and cached per (network, exchange).
"""

import numpy as np

from transitsim.network.exchange import (
    equal_groups,
    exchange_time_s,
    fabric_for,
    hier_dag,
    sends_nothing,
    switch_plan,
    transform_weights,
    tree_dag,
)
from transitsim.network.exchange_spec import Exchange, validate_exchange
from transitsim.network.fast.hierarchical import lean as hier_lean
from transitsim.network.fast.hierarchical.maxplus import HierForm, hier_form
from transitsim.network.fast.ring.maxplus import ring_linear
from transitsim.network.fast.shared.maxplus import Linear
from transitsim.network.fast.switch_sum.maxplus import switch_linear
from transitsim.network.fast.trees.fixed import tree_linear
from transitsim.network.fast.trees.split import SplitLinks
from transitsim.network.nccl import applies as nccl_applies
from transitsim.network.nccl import nccl_choice
from transitsim.network.schedules.dag import ring_plan
from transitsim.network.schedules.trees import TREE_ALGOS
from transitsim.network.spec import NetworkSpec
from transitsim.network.varying import varies as background_varies

_LINEAR: dict[tuple, Linear | HierForm | None] = {}


def linear_exchange(network: NetworkSpec, exchange: Exchange) -> Linear | None:
    """The exchange's max-plus linear form (linear.py), where it has one; cached.

    None where transfer times depend on the start times (shared links, a pre-stage transform,
    a summing rate that binds, a background share that changes in time) or no fast path
    exists: then simulate each start vector.
    """
    if sends_nothing(exchange):  # finish = max(start): nothing depends on another worker
        return Linear(np.full(network.workers, -np.inf))
    if nccl_applies(network, exchange):  # the chosen protocol's channel, plus its base latency
        choice = nccl_choice(network, exchange, exchange_time_s)
        form = linear_exchange(choice.network, choice.exchange)
        if not isinstance(form, Linear) or choice.base_s == 0:
            return form
        return Linear(form.d_s + choice.base_s)
    key = (repr(network), exchange)
    if key not in _LINEAR:
        if len(_LINEAR) >= 16:
            _LINEAR.pop(next(iter(_LINEAR)))
        fabric = fabric_for(network)
        validate_exchange(network, exchange)
        weights = transform_weights(network, exchange)
        form = None
        if fabric.backgrounds or fabric.greedy:  # capacities or shares that vary: no linear form
            _LINEAR[key] = None
            return None
        if exchange.algo in ("ring_allreduce", "ring_allgather"):
            transform = exchange.transform_at is not None
            plan = ring_plan(exchange.algo, network.workers, exchange.payload_bytes, transform)
            form = ring_linear(fabric, plan, weights)
        elif exchange.algo == "switch_sum":
            form = switch_linear(fabric, switch_plan(fabric, exchange), weights)
        elif exchange.algo in TREE_ALGOS:
            _, _, _, table, links = tree_dag(fabric, exchange, weights)
            fixed = isinstance(links, SplitLinks) and not links.overlap
            form = tree_linear(table) if fixed else None
        _LINEAR[key] = form
    return _LINEAR[key]


def steps_form(network: NetworkSpec, exchange: Exchange) -> Linear | HierForm | None:
    """What times many steps of this exchange at once: its linear form, or hierarchical's
    stage-vectorised form (fast/hierarchical/maxplus.py); None: simulate step by step."""
    if nccl_applies(network, exchange):
        choice = nccl_choice(network, exchange, exchange_time_s)
        if choice.base_s > 0:  # a base latency shifts a linear form; other forms step by step
            return linear_exchange(network, exchange)
        return steps_form(choice.network, choice.exchange)
    form = linear_exchange(network, exchange)
    if (
        form is None
        and exchange.algo == "hierarchical"
        and not background_varies(network)
        and not fabric_for(network).greedy
    ):
        fabric = fabric_for(network)
        weights = transform_weights(network, exchange)
        key = (repr(network), exchange, "hier")
        if key not in _LINEAR:
            groups = equal_groups(network)
            pre = exchange.transform_at == "pluggable"
            if hier_lean.is_lean(groups.shape, pre):  # one phase of each ring stage kept
                lean_key = (repr(network), fabric.excluded, exchange)
                parts = hier_lean.cached_parts(
                    lean_key, fabric, groups, exchange.payload_bytes, weights
                )
                _LINEAR[key] = None if pre else parts.form(fabric)
            else:
                schedule, layout, path_ids, compiled, table = hier_dag(fabric, exchange, weights)
                _LINEAR[key] = hier_form(fabric, schedule, layout, path_ids, compiled, table)
        return _LINEAR[key]
    return form
