"""Replay's stepping: every row's steps in order on one clock, each exchange simulated (or reused).

Where a run has nothing random, `steady.py` gives the same rows as arrays; with random stragglers
and a max-plus linear exchange, `maxplus.py` gives whole blocks of steps at once; everything else
goes step by step through `step.py`.

Background traffic that changes in time takes the faults' route: between two changes the network
is the one frozen at that piece's shares (`Run.enter`), reused like any other; a step whose window
holds a change is simulated on its own, on the replay clock (`clock_s`), as a faulted step is.
"""

import math
from typing import Any

import numpy as np

from transitsim.network import Exchange
from transitsim.replay import steady
from transitsim.replay.compute import Stragglers
from transitsim.replay.maxplus import linear_block
from transitsim.replay.step import (
    OVERLAP_FIGURES,
    Outcome,
    Run,
    Segment,
    StepPlan,
    clean_outcome,
    hits_fault,
    hits_fault_one,
    make_segment,
    one_step,
    row_figures,
)


def replay_rows(
    run: Run, plan: StepPlan, stragglers: Stragglers, rng: np.random.Generator
) -> dict[str, list[Any]]:
    """Every row's steps in order on one clock; per-row figures as timeline columns."""
    workers = run.network.workers
    factors = stragglers.factors(workers)
    if not stragglers.random:
        arrays = steady.steady_rows(run, plan, factors)
        if arrays is not None:
            return _with_plan_columns(arrays, plan)
    names = ("compute_s", "transform_s", "wire_s", "wait_s", "step_s", *OVERLAP_FIGURES)
    rows: dict[str, list[Any]] = {
        name: [] for name in ("step", *names, "time_s", "wire_bytes", "wan_bytes", "payload_bytes")
    }
    clock_s = time_s = wire_total = wan_total = 0.0
    payload_total = 0
    linear: dict[int, list[Segment]] = {}  # rows replayed at once by their linear exchange
    for i, count in enumerate(plan.interval):
        exchange = plan.exchange[i]
        first_step = plan.step[i] - count + 1
        if stragglers.random and i not in linear:
            linear.update(_linear_rows(run, plan, i, stragglers, rng, clock_s))
        if i in linear:
            segments = linear.pop(i)
        elif stragglers.random:
            jitter = stragglers.draw(rng, count, workers)
            segments = []
            for j in range(count):
                compute_w = stragglers.apply(plan.compute_s[i], jitter[j], workers)
                segment = one_step(
                    run,
                    exchange,
                    compute_w,
                    plan.compress_s[i],
                    plan.update_s[i],
                    clock_s,
                    first_step + j,
                    cacheable=False,
                )
                segments.append(segment)
                clock_s += segment.step_s
        else:
            segments, clock_s = _steady_steps(
                run,
                exchange,
                plan.compute_s[i] * factors,
                plan.compress_s[i],
                plan.update_s[i],
                clock_s,
                first_step,
                count,
            )
        figures = row_figures(segments, count)
        time_s += figures["row_s"]
        clock_s = time_s  # one clock: the timeline's
        wire_total += figures["wire_bytes_total"]
        wan_total += figures["wan_bytes_total"]
        payload_total += exchange.payload_bytes * count
        rows["step"].append(plan.step[i])
        for name in names:
            rows[name].append(figures[name])
        rows["time_s"].append(time_s)
        rows["wire_bytes"].append(wire_total)
        rows["wan_bytes"].append(wan_total)
        rows["payload_bytes"].append(payload_total)
    return _with_plan_columns(rows, plan)


def _with_plan_columns(rows: dict[str, list[Any]], plan: StepPlan) -> dict[str, list[Any]]:
    rows["compress_s"] = plan.compress_s
    rows["update_s"] = plan.update_s
    rows["interval_steps"] = plan.interval
    rows["algo"] = [exchange.algo for exchange in plan.exchange]
    return rows


# the stage form (fast/hierarchical/maxplus.py) gives each step's finish exactly but no
# critical path: its transform / wire split is the all-ready exchange's, the rest is wait
APPROXIMATE_SPLIT = (
    "approximate: the wire / wait split of hierarchical straggler steps (step times exact): "
    "each step's transform and wire are the exchange's with every worker ready, capped at "
    "its time; the rest is counted as wait"
)


def _linear_rows(
    run: Run,
    plan: StepPlan,
    first: int,
    stragglers: Stragglers,
    rng: np.random.Generator,
    clock_s: float = 0.0,
) -> dict[int, list[Segment]]:
    """Rows first.. at once where their exchange is max-plus linear (maxplus.py); {} else.

    The transform / wire split of each step is the unperturbed exchange's, scaled to the
    critical worker's path; link bytes and busy seconds are the unperturbed exchange's (exact
    for every resource but a summing aggregator, whose busy time stragglers spread). With link
    faults, the block ends before the row of the first step whose exchange a fault meets (the
    row starting at clock_s on the replay clock); those rows are stepped, with the same draws.
    """
    if run.changes or run.method == "des" or not run.reuse or run.overlap is not None:
        return {}
    columns = {
        "step": plan.step,
        "interval": plan.interval,
        "compute_s": plan.compute_s,
        "compress_s": plan.compress_s,
        "update_s": plan.update_s,
    }
    state = rng.bit_generator.state
    block = linear_block(run.network, plan.exchange, first, columns, stragglers, rng)
    if block is None:
        return {}
    if run.faults:
        end = _first_faulted_row(run, block, clock_s)
        if end is not None:  # draw again, for the rows before it only
            rng.bit_generator.state = state
            if end == first:
                return {}
            block = linear_block(run.network, plan.exchange, first, columns, stragglers, rng, end)
            assert block is not None
    exchange = plan.exchange[first]
    # all workers ready together: simulated once per exchange, not once per block (at 65,536
    # workers the reference step takes minutes and a block holds only 32 steps)
    reference = clean_outcome(run, exchange, np.zeros(run.network.workers), 0.0, cacheable=True)
    moving = reference.transform_s + reference.wire_s
    share = reference.transform_s / moving if moving > 0 else 0.0
    exchange_s = block.finish_s - block.ready_min_s
    path_s = block.moving_s if block.moving_s is not None else np.minimum(moving, exchange_s)
    if block.moving_s is None and APPROXIMATE_SPLIT not in run.notes:
        run.notes.append(APPROXIMATE_SPLIT)
    transform = path_s * share
    wire = path_s - transform
    step_s = block.finish_s + block.update_s
    wait = step_s - (block.compute_s + block.compress_s + transform + wire + block.update_s)
    wait = np.where(np.abs(wait) <= 1e-12 * step_s, 0.0, wait)
    run.count_use(reference, len(block.row_of))
    segments: dict[int, list[Segment]] = {int(r): [] for r in block.rows}
    values = zip(
        block.row_of.tolist(),
        block.steps.tolist(),
        step_s.tolist(),
        block.compute_s.tolist(),
        transform.tolist(),
        wire.tolist(),
        wait.tolist(),
        exchange_s.tolist(),
        strict=True,
    )
    for row, step, total, compute, tr, wi, wa, ex in values:
        exposed = tr + wi + wa
        segments[row].append(
            Segment(
                1,
                total,
                compute,
                tr,
                wi,
                wa,
                reference.wire_bytes,
                ex,
                exposed,
                0.0,
                reference.wan_bytes,
            )
        )
        run.detail.append(
            {
                "first_step": step,
                "steps": 1,
                "algo": exchange.algo,
                "payload_bytes": exchange.payload_bytes,
                "dense_bytes": exchange.dense_bytes,
                "exchange_s": ex,
                "units": 1,
                "transform_s": tr,
                "wire_s": wi,
                "wait_s": ex - tr - wi,
                "events": 0,
                "faulted": False,
                "reused": False,
            }
        )
    return segments


def _first_faulted_row(run: Run, block: Any, clock_s: float) -> int | None:
    """The row of the block's first step whose exchange a fault meets (None: no step's)."""
    step_s = block.finish_s + block.update_s
    began = clock_s + np.concatenate(([0.0], np.cumsum(step_s)[:-1]))
    hit = np.zeros(len(step_s), dtype=bool)
    for fault in run.faults:
        hit |= (fault.down_from_s < began + block.finish_s) & (
            fault.down_until_s > began + block.ready_min_s
        )
    where = np.flatnonzero(hit)
    return int(block.row_of[where[0]]) if len(where) else None


def _steady_steps(
    run: Run,
    exchange: Exchange,
    compute_w_s: np.ndarray,
    compress_s: float,
    update_s: float,
    clock_s: float,
    first_step: int,
    count: int,
) -> tuple[list[Segment], float]:
    """`count` steps with no random input: one simulation for every run of fault-free steps."""
    segments: list[Segment] = []
    done = 0
    while done < count:
        run.enter(clock_s)
        if run.reuse:
            clean = clean_outcome(run, exchange, compute_w_s, compress_s, cacheable=True)
            step_s = clean.finish_s + update_s
            ready_min_s = clean.start_s
            free = _fault_free_steps(run, clock_s, step_s, ready_min_s, clean, count - done)
            if free:
                segments.append(
                    make_segment(
                        run,
                        free,
                        first_step + done,
                        exchange,
                        clean,
                        compute_w_s,
                        compress_s,
                        update_s,
                    )
                )
                clock_s += free * step_s
                done += free
            if done == count:
                break
        segment = one_step(
            run,
            exchange,
            compute_w_s,
            compress_s,
            update_s,
            clock_s,
            first_step + done,
            cacheable=True,
        )
        segments.append(segment)
        clock_s += segment.step_s
        done += 1
    return segments, clock_s


def _fault_free_steps(
    run: Run, clock_s: float, step_s: float, ready_min_s: float, clean: Outcome, limit: int
) -> int:
    """How many steps from `clock_s` on (at most `limit`) no fault window or background change
    meets (the steps are over, exchange and all, before the next change)."""
    limit = min(limit, _steps_before_change(run, clock_s, step_s, clean.finish_s, limit))
    if not run.faults:
        return limit
    if step_s <= 0:
        return 0 if hits_fault(run, clock_s, ready_min_s, clean.finish_s) else limit
    first_hit = limit
    for fault in run.faults:
        # step j meets it when clock + j*step + finish > from and clock + j*step + ready < until
        guess = math.floor((fault.down_from_s - clock_s - clean.finish_s) / step_s) + 1
        first = max(guess - 1, 0)  # an outage that began earlier may still be on: step 0
        for j in (first, first + 1, first + 2):
            if 0 <= j < first_hit and hits_fault_one(
                fault, clock_s + j * step_s, ready_min_s, clean.finish_s
            ):
                first_hit = j
                break
    return first_hit


def _steps_before_change(
    run: Run, clock_s: float, step_s: float, finish_s: float, limit: int
) -> int:
    """How many steps j = 0.. (at most limit) end their exchange by the next background change:
    clock_s + j * step_s + finish_s <= that change."""
    change_s = run.steady_until_s(clock_s)
    if not math.isfinite(change_s):
        return limit
    if step_s <= 0:
        return limit if clock_s + finish_s <= change_s else 0
    room = change_s - clock_s - finish_s
    count = min(max(math.floor(room / step_s) + 1, 0), limit) if room >= 0 else 0
    while count > 0 and clock_s + (count - 1) * step_s + finish_s > change_s:
        count -= 1  # rounding: the products as the stepping computes them decide
    while count < limit and clock_s + count * step_s + finish_s <= change_s:
        count += 1
    return count
