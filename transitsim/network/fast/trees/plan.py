"""The double binary tree's pipeline spacing, chosen by time so that latency never helps.

A rule (`tree_spacing`, once in schedules/trees.py, now removed) put K slots between a tree level
and the next, K growing with the latency against a chunk's send, because the two trees'
dependencies loop through one rank's chains. A rule jumps from K to K + 1 at some latency, and the
schedule of the larger K can be much faster there (issue 44: 8 ranks, 4 MB, 100 Gb/s: 797 us at 2
us of latency, 702 us at 3 us), so more latency took less time. Here every K of SPACINGS (and the
chunk count: a larger K changes no order) is timed, all ranks starting together and no faults (what
a plan can know), and the fastest taken, ties to the smaller K. The set tried does not depend on
the latency, the rates or the start times, so wherever each candidate's time grows with the latency
and falls with the rates, their least does too (max-min sharing inside one schedule does not
always: docs/engine.md "Monotone physics"). The DES and the fast paths time the same chosen
schedule. One tree, or no latency anywhere and no loop to break: K = 1 as before.
"""

import numpy as np

from transitsim.network.des.engine import run_des
from transitsim.network.fabric import Fabric, Weights
from transitsim.network.fast.trees.fixed import run_fast_tree
from transitsim.network.fast.trees.split import run_split_tree, tree_parts
from transitsim.network.schedules.trees import tree_chunks

SPACINGS = (1, 2, 3, 5, 8, 13, 21, 34)  # the K tried, with the chunk count (at most 64)
_PLANS: dict[tuple, int] = {}


def spacing_candidates(chunks: int) -> list[int]:
    """The spacings tried for a tree of `chunks` chunks: SPACINGS below it, and it."""
    return [k for k in SPACINGS if k < chunks] + [max(chunks, 1)]


def _time_s(fabric: Fabric, algo: str, payload: int, pre: bool, weights: Weights, k: int) -> float:
    """The tree's time with spacing k, all ranks starting at 0, no faults."""
    schedule, path_ids, compiled, table, links = tree_parts(fabric, algo, payload, pre, weights, k)
    start = np.zeros(schedule.workers)
    if not hasattr(links, "overlap"):  # NotExact: the DES
        timing = run_des(fabric, schedule, path_ids, compiled, start, [])
    elif links.overlap:
        timing = run_split_tree(fabric, table, links, start)
    else:
        timing = run_fast_tree(fabric, table, start)
    counted = timing.arrive_s[schedule.counts]
    return float(counted.max()) if len(counted) else 0.0


def planned_spacing(fabric: Fabric, algo: str, payload: int, pre: bool, weights: Weights) -> int:
    """The spacing the tree all-reduce runs with on this fabric (1 but for the double binary
    tree with latency)."""
    if algo != "double_binary_tree" or fabric.network.workers < 3:
        return 1
    candidates = spacing_candidates(tree_chunks(payload / 2))
    key = (repr(fabric.network), fabric.excluded, algo, payload, pre, repr(weights))
    if key not in _PLANS:
        if len(_PLANS) >= 64:
            _PLANS.pop(next(iter(_PLANS)))
        best, best_s = candidates[0], np.inf
        for k in candidates:
            time_s = _time_s(fabric, algo, payload, pre, weights, k)
            if time_s < best_s * (1 - 1e-9):
                best, best_s = k, time_s
        _PLANS[key] = best
    return _PLANS[key]
