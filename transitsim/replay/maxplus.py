"""Straggler replay in O(N) a step: steps whose exchange is max-plus linear, all at once.

With random stragglers no two steps share a simulation. Where every transfer of the exchange
takes a fixed time (`network.linear`), a step's end is max_i(ready_i + d_i) with d computed
once, so a block of consecutive rows with the same exchange is one numpy expression over
(steps, workers), with the same random draws, in the same order, as step-by-step replay.

The finishing times are exact. The split of a step's exchange into transform and wire time is
the unperturbed exchange's (all workers ready together), scaled to the critical worker's path
length d_i (they are equal on a homogeneous network); waiting is what is left of the step. Link
bytes are the same every step; busy seconds are the unperturbed exchange's (exact for every
resource but a summing aggregator, whose busy time is the union of uploads that stragglers
spread).
"""

from dataclasses import dataclass

import numpy as np

from transitsim.network import Exchange, NetworkSpec
from transitsim.network.fast.shared.maxplus import Linear
from transitsim.network.forms import steps_form
from transitsim.replay.compute import Stragglers

BLOCK_VALUES = 1 << 21  # (steps x workers) values per block: 16 MB an array


@dataclass
class LinearBlock:
    """Consecutive rows `rows` sharing one linear exchange: per step (row_of says whose), the
    step-relative finish, the critical path length and the fastest worker's compute."""

    rows: np.ndarray
    row_of: np.ndarray
    steps: np.ndarray  # the optimiser step of each
    finish_s: np.ndarray  # when the exchange ended, from the step's start
    ready_min_s: np.ndarray  # when its first worker was ready
    moving_s: np.ndarray | None  # the critical worker's d: transform + wire (None: not linear)
    compute_s: np.ndarray
    compress_s: np.ndarray
    update_s: np.ndarray


def linear_block(
    network: NetworkSpec,
    exchanges: list[Exchange],
    first: int,
    columns: dict[str, list],
    stragglers: Stragglers,
    rng: np.random.Generator,
    end: int | None = None,
) -> LinearBlock | None:
    """Rows first.. (while they share one linear exchange, and before row `end`) at once; None
    when not linear.

    columns: the plan's per-row step, interval, compute_s, compress_s and update_s.
    """
    exchange = exchanges[first]
    form = steps_form(network, exchange)
    if form is None:
        return None
    intervals = columns["interval"]
    last, steps = first, intervals[first]
    budget = max(BLOCK_VALUES // network.workers, 1)  # steps per block: bounded memory
    end = len(exchanges) if end is None else end
    while (
        last + 1 < end and exchanges[last + 1] is exchange and steps + intervals[last + 1] <= budget
    ):
        last += 1
        steps += intervals[last]
    rows = np.arange(first, last + 1)
    counts = np.asarray(intervals, dtype=np.int64)[rows]
    workers = network.workers
    jitter = stragglers.draw(rng, int(counts.sum()), workers)  # the same stream as step by step
    row_of = np.repeat(rows, counts)
    base = np.asarray(columns["compute_s"], dtype=np.float64)[row_of]
    compress = np.asarray(columns["compress_s"], dtype=np.float64)[row_of]
    update = np.asarray(columns["update_s"], dtype=np.float64)[row_of]
    compute_w = stragglers.apply(base[:, None], jitter, workers)
    ready = compute_w + compress[:, None]
    offset = ready.min(axis=1)
    relative = ready - offset[:, None]
    first_step = np.asarray(columns["step"], dtype=np.int64)[row_of] - np.repeat(counts, counts)
    within = np.arange(len(row_of)) - np.repeat(np.cumsum(counts) - counts, counts)
    finish = form.finish_s(relative)
    moving = None
    if isinstance(form, Linear):  # d is -inf where the exchange sends nothing: no path, 0 s
        moving = np.maximum(form.d_s[form.critical(relative)], 0.0)
    return LinearBlock(
        rows=rows,
        row_of=row_of,
        steps=first_step + 1 + within,
        finish_s=finish + offset,
        ready_min_s=offset,
        moving_s=moving,
        compute_s=compute_w.min(axis=1),
        compress_s=compress,
        update_s=update,
    )
