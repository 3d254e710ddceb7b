"""Issue 26's question, answered on whatever runs exist: communicate less often, or less?

  local_sgd          the local-SGD family (H DiLoCo, H-s Streaming DiLoCo, L SparseLoCo) beside
                     the every-step methods (A AdamW, B top-k, C 1-D 256 and the best G): final
                     loss, steps and payload to C 1-D 256's and to top-k's final loss, syncs
  local_sgd_claims   does local SGD reach top-k's loss, and with fewer bytes or steps?

Same rules as section (f) (selection.py): means over seeds with the sample sd, the number of
seeds said, two means differ when more than two standard errors apart (Welch), "n=1" where a
side has one seed. The payload is per worker, counted on the steps that send (a local-SGD run
sends nothing on its inner steps), so "payload to a loss" is the loss-per-byte comparison.
"""

import math
from typing import Any

import numpy as np
import pandas as pd

from transitsim.findings.runs import ConfigResult, RunScale
from transitsim.findings.sections import config_status
from transitsim.findings.selection import (
    compare,
    exact_band_result,
    few_seeds_mark,
    final_stats,
    framed,
    stats_text,
    to_target,
    topk_result,
)

LOCAL_SGD = ("H", "H-s", "L")
EVERY_STEP = ("A", "B", "C", "G")
QUESTIONS = (
    "Does a local-SGD variant end at or below top-k's final loss?",
    "To C 1-D 256's final loss, does local SGD send fewer payload bytes than every every-step "
    "method?",
    "To C 1-D 256's final loss, does local SGD need fewer steps than AdamW?",
)


def _best_g(results: list[ConfigResult]) -> ConfigResult | None:
    moving = [r for r in results if r.key.variant == "G"]
    return min(moving, key=lambda r: final_stats(r)[0]) if moving else None


def _adamw(results: list[ConfigResult]) -> ConfigResult | None:
    adamw = [r for r in results if r.key.variant == "A"]
    return max(adamw, key=lambda r: r.seeds) if adamw else None


def _shown(results: list[ConfigResult]) -> list[ConfigResult]:
    every = [_adamw(results), topk_result(results), exact_band_result(results), _best_g(results)]
    local = sorted(
        (r for r in results if r.key.variant in LOCAL_SGD), key=lambda r: (r.key.variant, r.label)
    )
    return [r for r in every if r is not None] + local


def _syncs(result: ConfigResult) -> float:
    """Mean number of steps that sent anything, over seeds."""
    return float(np.mean([(run.steps["payload_bytes"] > 0).sum() for run in result.runs]))


def local_sgd_table(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """Every local-SGD configuration beside A, B, C 1-D 256 and the best G (empty without a
    local-SGD run at this scale)."""
    if not any(r.key.variant in LOCAL_SGD for r in results):
        return framed([], scale)
    topk, exact, adamw = topk_result(results), exact_band_result(results), _adamw(results)
    b_stats, c_stats = final_stats(topk), final_stats(exact)
    a_to_c = to_target(adamw, c_stats[0]) if adamw else None
    rows = []
    for result in _shown(results):
        stats = final_stats(result)
        above, verdict = compare(stats, b_stats) if topk else (math.nan, "no top-k run")
        to_c, to_b = to_target(result, c_stats[0]), to_target(result, b_stats[0])
        rows.append(
            {
                "configuration": result.label,
                "variant": result.key.variant,
                "local_sgd": result.key.variant in LOCAL_SGD,
                "seeds": stats[2],
                "final_loss": stats[0],
                "final_loss_sd": stats[1],
                "above_topk": above,
                "vs_topk": "reference" if result is topk else verdict,
                "steps_to_c": to_c["steps"],
                "reached_c": to_c["reached"],
                "payload_to_c_bytes": to_c["payload_bytes"],
                "payload_to_c_vs_adamw": to_c["payload_bytes"] / a_to_c["payload_bytes"]
                if a_to_c and a_to_c["payload_bytes"] > 0
                else math.nan,
                "steps_to_topk": to_b["steps"],
                "reached_topk": to_b["reached"],
                "payload_to_topk_bytes": to_b["payload_bytes"],
                "sync_steps": _syncs(result),
                "steps": float(np.mean([len(run.steps) for run in result.runs])),
                "status": config_status(result),  # a run still recording says "incomplete"
            }
        )
    return framed(rows, scale)


def local_sgd_claims(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """The three questions of QUESTIONS, on the table above."""
    table = local_sgd_table(results, scale)
    if table.empty:
        return table
    rows: list[dict[str, Any]] = []

    def row(question: str, measured: str, verdict: str) -> None:
        rows.append({"question": question, "measured": measured, "verdict": verdict})

    local = table[table["local_sgd"]]
    every = table[~table["local_sgd"]]
    b = table[table["variant"] == "B"]
    if b.empty:
        row(QUESTIONS[0], "not recorded: no top-k (B) at this scale", "not recorded")
    else:
        b = b.iloc[0]
        best = local.sort_values("final_loss", kind="stable").iloc[0]
        reaches = best.vs_topk in ("lower", "within noise") or best.vs_topk.startswith("lower")
        row(
            QUESTIONS[0],
            f"lowest: {best.configuration} "
            f"{stats_text((best.final_loss, best.final_loss_sd, best.seeds))} vs top-k "
            f"{stats_text((b.final_loss, b.final_loss_sd, b.seeds))}: {best.above_topk:+.3f} "
            f"({best.vs_topk})",
            ("yes" if reaches else "no") + few_seeds_mark(best.seeds, b.seeds),
        )
    paid_local = local.dropna(subset=["payload_to_c_bytes"]).sort_values("payload_to_c_bytes")
    paid_every = every.dropna(subset=["payload_to_c_bytes"]).sort_values("payload_to_c_bytes")
    if paid_local.empty or paid_every.empty:
        side = "no local-SGD run" if paid_local.empty else "no every-step run"
        row(QUESTIONS[1], f"not reached: {side} reaches C 1-D 256's final loss", "no")
    else:
        least, rival = paid_local.iloc[0], paid_every.iloc[0]
        row(
            QUESTIONS[1],
            f"least: {least.configuration} {least.payload_to_c_bytes / 1e6:.2f} MB "
            f"({least.reached_c}) vs {rival.configuration} {rival.payload_to_c_bytes / 1e6:.2f} "
            f"MB ({rival.reached_c}): {least.payload_to_c_bytes / rival.payload_to_c_bytes:.3f}x",
            ("yes" if least.payload_to_c_bytes < rival.payload_to_c_bytes else "no")
            + few_seeds_mark(least.seeds, rival.seeds),
        )
    a = table[table["variant"] == "A"]
    stepped = local.dropna(subset=["steps_to_c"]).sort_values("steps_to_c", kind="stable")
    if a.empty:
        row(QUESTIONS[2], "not recorded: no AdamW (A) run at this scale", "not recorded")
    elif stepped.empty or math.isnan(a.iloc[0].steps_to_c):
        row(QUESTIONS[2], "not reached by AdamW or by any local-SGD run", "no")
    else:
        a, first = a.iloc[0], stepped.iloc[0]
        row(
            QUESTIONS[2],
            f"fastest: {first.configuration} {first.steps_to_c:.0f} steps ({first.reached_c}) "
            f"vs AdamW {a.steps_to_c:.0f} ({a.reached_c})",
            ("yes" if first.steps_to_c < a.steps_to_c else "no")
            + few_seeds_mark(first.seeds, a.seeds),
        )
    return framed(rows, scale)


BUILDERS = {"local_sgd": local_sgd_table, "local_sgd_claims": local_sgd_claims}
