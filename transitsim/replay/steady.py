"""Replay of a run with no random input, no link fault and no background change, as arrays.

Then a row's steps all take one exchange result, and what a row takes does not depend on when it
starts: each distinct (exchange, compute, compression, update) is timed once, by the very calls
the step-by-step replay makes (`clean_outcome`, `segment_figures`), and the timeline is those
figures gathered row by row, its clock a running sum. np.cumsum adds in order, as the stepping
does, so both give the same numbers bit for bit (tests/test_replay_steady.py). A sweep of
3,000-step traces spent ~0.1 ms a row in the stepping's Python; here a row costs a dictionary
lookup.
"""

from typing import Any

import numpy as np

from transitsim.replay.keys import first_appearance_codes
from transitsim.replay.step import (
    OVERLAP_FIGURES,
    Outcome,
    Run,
    StepPlan,
    clean_outcome,
    segment_figures,
)

# the per-step figures a row takes from its template (timeline columns)
ROW_FIGURES = ("compute_s", "transform_s", "wire_s", "wait_s", "step_s", *OVERLAP_FIGURES)


def steady_rows(run: Run, plan: StepPlan, factors: np.ndarray) -> dict[str, Any] | None:
    """Every row's timeline figures at once, as arrays; None where one step could differ from
    another (faults, background changes, reuse off: the stepping handles those)."""
    if run.faults or run.changes or not run.reuse:
        return None
    # the plan shares one Exchange object among the rows that exchange alike
    exchanges = list({id(e): e for e in plan.exchange}.values())  # distinct, first appearance
    code_of = {id(e): code for code, e in enumerate(exchanges)}
    codes = np.array([code_of[id(e)] for e in plan.exchange])
    keys = (codes, plan.compute_s, plan.compress_s, plan.update_s)
    template_of, firsts = first_appearance_codes(keys)
    outcomes: list[Outcome] = []
    names = (*ROW_FIGURES, "wire_bytes", "wan_bytes")
    figures: dict[str, list[float]] = {name: [] for name in names}
    for row in firsts.tolist():
        exchange, compress_s, update_s = (
            plan.exchange[row],
            plan.compress_s[row],
            plan.update_s[row],
        )
        compute_w_s = plan.compute_s[row] * factors
        outcome = clean_outcome(run, exchange, compute_w_s, compress_s, cacheable=True)
        segment = segment_figures(outcome, 1, compute_w_s, compress_s, update_s)
        outcomes.append(outcome)
        for name in figures:
            figures[name].append(getattr(segment, name))
    count = np.asarray(plan.interval, dtype=np.int64)
    columns = {name: np.asarray(values)[template_of] for name, values in figures.items()}
    payload = np.array([e.payload_bytes for e in exchanges], dtype=np.int64)[codes]
    rows: dict[str, Any] = {"step": plan.step}
    for name in ROW_FIGURES:
        rows[name] = columns[name]
    rows["time_s"] = np.cumsum(count * columns["step_s"])
    rows["wire_bytes"] = np.cumsum(count * columns["wire_bytes"])
    rows["wan_bytes"] = np.cumsum(count * columns["wan_bytes"])
    rows["payload_bytes"] = np.cumsum(payload * count)
    of_exchange = {
        "algo": np.array([e.algo for e in exchanges], dtype=object)[codes].tolist(),
        "payload_bytes": payload,
        "dense_bytes": np.array([e.dense_bytes for e in exchanges], dtype=np.int64)[codes],
    }
    _record(run, plan, outcomes, template_of, count, of_exchange)
    return rows


def _record(
    run: Run,
    plan: StepPlan,
    outcomes: list[Outcome],
    template_of: np.ndarray,
    count: np.ndarray,
    of_exchange: dict[str, Any],
) -> None:
    """The link use and step detail the stepping records: one detail row per trace row (its
    exchange's columns in `of_exchange`), and per outcome (in order of first use) the steps it
    stood for (templates may share an outcome)."""
    group: dict[int, int] = {}
    group_of_template = np.array([group.setdefault(id(o), len(group)) for o in outcomes])
    group_of_row = group_of_template[template_of]
    steps_of_group = np.zeros(len(group), dtype=np.int64)
    np.add.at(steps_of_group, group_of_row, count)
    first_rows = np.unique(group_of_row, return_index=True)[1]
    for row, steps in zip(first_rows.tolist(), steps_of_group.tolist(), strict=True):
        outcome = outcomes[int(template_of[row])]
        run.count_use(outcome, steps)
    reused = np.ones(len(template_of), dtype=bool)
    reused[first_rows] = False

    def of_rows(name: str) -> np.ndarray:
        return np.asarray([getattr(o, name) for o in outcomes])[template_of]

    run.detail_columns = {
        "first_step": np.asarray(plan.step, dtype=np.int64) - count + 1,
        "steps": count,
        **of_exchange,  # algo, payload_bytes, dense_bytes per row
        "exchange_s": of_rows("exchange_s"),
        "units": of_rows("units"),
        "transform_s": of_rows("transform_s"),
        "wire_s": of_rows("wire_s"),
        "wait_s": of_rows("wait_s"),
        "events": of_rows("events"),
        "faulted": of_rows("faulted"),
        "reused": reused,
    }
