"""Issue 14's questions (deck slides 10-12), answered on whatever runs exist, seeds counted.

  selections         top-k (B) beside the comparison-free selections: fixed bands (C 1-D 256,
                     D, F) and the moving ones (G recal, rotating, subspace); final loss, steps
                     and payload to a loss, and the share of the momentum each keeps
  selection_claims   does any comparison-free selection close the gap to top-k?
  optics_oob         E with feedback of the values sent beside the exact band (C 1-D 256), with
                     the per-step out-of-band diagnostics (worker 0)
  optics_oob_claims  does E beat the exact band over seeds, and does the out-of-band energy the
                     values sent carry explain it?

Every figure is a mean over seeds with the sample sd, and says how many seeds it rests on;
"n=1" verdicts say they have no spread. Two means differ when they are more than two standard
errors apart (Welch: sqrt(sd_a^2/n_a + sd_b^2/n_b)); with one seed on either side the verdict is
the sign of the difference, marked "n=1".
"""

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from transitsim.analysis.metrics import bytes_through, first_reaching
from transitsim.findings.published import C_1D256
from transitsim.findings.runs import ConfigResult, RunScale, energy_means, scale_label

SECTIONS = ("selections", "selection_claims", "optics_oob", "optics_oob_claims")
COMPARISON_FREE = ("C", "D", "F", "G")  # no comparisons per step (D chooses once, G per R steps)
OOB_COLUMNS = (
    "oob_sent_share",
    "oob_quant_share",
    "fb_removed_exact_share",
    "fb_removed_sent_share",
)
# The selector a run sends, as the diagnostics name it (momentum share kept by its own band).
OWN_SELECTOR = {"B": "topk", "C": "low", "D": "calib", "G": "current"}
SEPARATION_SE = 2.0  # "differ": more than two standard errors apart


def framed(rows: list[dict[str, Any]], scale: RunScale) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    df.insert(0, "scale", scale_label(scale))
    return df


def mean_sd(values: Iterable[float]) -> tuple[float, float, int]:
    """Mean, sample sd (0 for one value) and count of the finite values (NaN, NaN, 0 if none)."""
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return math.nan, math.nan, 0
    sd = float(np.std(finite, ddof=1)) if len(finite) > 1 else 0.0
    return float(np.mean(finite)), sd, len(finite)


def compare(a: tuple[float, float, int], b: tuple[float, float, int]) -> tuple[float, str]:
    """a minus b and whether a is "lower", "higher" or "within noise" of b (two standard errors);
    with one value on either side: the sign only, marked (n=1)."""
    (ma, sa, na), (mb, sb, nb) = a, b
    if na == 0 or nb == 0:
        return math.nan, "not recorded"
    diff = ma - mb
    if na < 2 or nb < 2:
        return diff, f"{'lower' if diff < 0 else 'higher'} (n=1, no spread)"
    se = math.sqrt(sa**2 / na + sb**2 / nb)
    if abs(diff) <= SEPARATION_SE * se:
        return diff, "within noise"
    return diff, "lower" if diff < 0 else "higher"


def stats_text(stats: tuple[float, float, int]) -> str:
    mean, sd, n = stats
    if n == 0:
        return "not recorded"
    return f"{mean:.3f} ± {sd:.3f} (n={n})" if n > 1 else f"{mean:.3f} (n=1)"


def final_stats(result: ConfigResult | None) -> tuple[float, float, int]:
    if result is None:
        return math.nan, math.nan, 0
    return mean_sd(math.inf if _diverged(r) else r.final_val_loss for r in result.runs)


def _diverged(run: Any) -> bool:
    return any(str(note).startswith("diverged") for note in run.meta.get("notes") or [])


def _pick(results: list[ConfigResult], variant: str, **params: Any) -> ConfigResult | None:
    """The configuration of a variant with these parameters and the most seeds."""
    found = [
        r
        for r in results
        if r.key.variant == variant and all(r.params.get(k) == v for k, v in params.items())
    ]
    return max(found, key=lambda r: r.seeds) if found else None


def topk_result(results: list[ConfigResult]) -> ConfigResult | None:
    return _pick(results, "B", chunk_mode="2d", chunk=64) or _pick(results, "B")


def exact_band_result(results: list[ConfigResult]) -> ConfigResult | None:
    return next((r for r in results if r.key == C_1D256), None)


def to_target(result: ConfigResult, target: float) -> dict[str, Any]:
    """Steps and payload bytes (one worker, broadcasts included) to the first evaluation at or
    below target: means over seeds, NaN unless every seed gets there."""
    reached = []
    for run in result.runs:
        row = None if math.isnan(target) else first_reaching(run.steps, target)
        if row is not None:
            step = int(row["step"])
            reached.append((step, bytes_through(run.steps, run.steps["payload_bytes"], step)))
    every = bool(reached) and len(reached) == result.seeds
    steps, payload = np.mean(reached, axis=0) if every else (math.nan, math.nan)
    return {
        "steps": float(steps),
        "payload_bytes": float(payload),
        "reached": f"{len(reached)}/{result.seeds}",
    }


def _kept_share(result: ConfigResult) -> tuple[float, float]:
    """Share of the plain momentum's energy the run's own selection keeps, and top-k's, averaged
    over diag records after warm-up (seeds pooled); NaN where not recorded."""
    if all(run.diagnostics.empty for run in result.runs):
        return math.nan, math.nan
    energy, records = energy_means(result.runs)
    if not records:
        return math.nan, math.nan
    momentum = energy.get("momentum", {})
    own = OWN_SELECTOR.get(result.key.variant)
    if result.key.variant == "F":
        own = result.params.get("band")
    return momentum.get(own, math.nan), momentum.get("topk", math.nan)


# --- selections ------------------------------------------------------------------------------


def _selection_results(results: list[ConfigResult]) -> list[ConfigResult]:
    shown = []
    topk = topk_result(results)
    if topk is not None:
        shown.append(topk)
    exact = exact_band_result(results)
    for result in results:
        if result is topk:
            continue
        variant = result.key.variant
        if (
            result is exact
            or variant in ("D", "G")
            or (variant == "F" and result.params.get("band") == "random")
        ):
            shown.append(result)
    return shown


def selection_table(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """B, C 1-D 256, D, F random and every G: final loss, gap closed, steps and payload to C 1-D
    256's and top-k's final loss, payload per step and the momentum share each keeps."""
    topk, exact = topk_result(results), exact_band_result(results)
    b_stats, c_stats = final_stats(topk), final_stats(exact)
    b_final, c_final = b_stats[0], c_stats[0]
    b_to_c = to_target(topk, c_final) if topk else None
    rows = []
    for result in _selection_results(results):
        stats = final_stats(result)
        above, verdict = compare(stats, b_stats)
        to_c, to_b = to_target(result, c_final), to_target(result, b_final)
        kept, topk_kept = _kept_share(result)
        payload = np.mean([run.steps["payload_bytes"].mean() for run in result.runs])
        rows.append(
            {
                "configuration": result.label,
                "variant": result.key.variant,
                "comparison_free": result.key.variant in COMPARISON_FREE,
                "seeds": stats[2],
                "final_loss": stats[0],
                "final_loss_sd": stats[1],
                "above_topk": above,
                "vs_topk": "reference" if result is topk else verdict,
                "gap_closed": (c_final - stats[0]) / (c_final - b_final)
                if math.isfinite(c_final - b_final) and c_final != b_final
                else math.nan,
                "steps_to_c": to_c["steps"],
                "reached_c": to_c["reached"],
                "payload_to_c_bytes": to_c["payload_bytes"],
                "payload_to_c_vs_topk": to_c["payload_bytes"] / b_to_c["payload_bytes"]
                if b_to_c
                else math.nan,
                "steps_to_topk": to_b["steps"],
                "reached_topk": to_b["reached"],
                "payload_per_step_bytes": float(payload),
                "momentum_kept": kept,
                "momentum_kept_topk": topk_kept,
            }
        )
    return framed(rows, scale)


def selection_claims(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """Does any comparison-free selection close the gap to top-k: final loss, steps to a loss,
    payload to a loss (loss per byte)?"""
    table = selection_table(results, scale)
    topk = topk_result(results)
    free = table[table["comparison_free"]] if len(table) else table
    rows = []

    def row(question: str, measured: str, verdict: str) -> None:
        rows.append({"question": question, "measured": measured, "verdict": verdict})

    if topk is None or free.empty:
        missing = "top-k (B)" if topk is None else "a comparison-free selection"
        for question in _SELECTION_QUESTIONS:
            row(question, f"not recorded: no {missing} at this scale", "not recorded")
        return framed(rows, scale)
    b = table[table["variant"] == "B"].iloc[0]
    best = free.sort_values("final_loss", kind="stable").iloc[0]
    b_text = stats_text((b.final_loss, b.final_loss_sd, b.seeds))
    closes = best.vs_topk in ("lower", "within noise") or best.vs_topk.startswith("lower")
    row(
        _SELECTION_QUESTIONS[0],
        f"lowest: {best.configuration} "
        f"{stats_text((best.final_loss, best.final_loss_sd, best.seeds))}"
        f" vs top-k {b_text}: {best.above_topk:+.3f} ({best.vs_topk}); "
        f"gap from C 1-D 256 closed {_percent(best.gap_closed)}",
        ("yes" if closes else "no") + few_seeds_mark(best.seeds, b.seeds),
    )
    steps = free.dropna(subset=["steps_to_c"]).sort_values("steps_to_c", kind="stable")
    if steps.empty or math.isnan(b.steps_to_c):
        row(_SELECTION_QUESTIONS[1], _unreached(steps.empty, b.reached_c), "no")
    else:
        first = steps.iloc[0]
        row(
            _SELECTION_QUESTIONS[1],
            f"to C 1-D 256's final loss: fastest {first.configuration} {first.steps_to_c:.0f} "
            f"steps ({first.reached_c}) vs top-k {b.steps_to_c:.0f} ({b.reached_c})",
            ("yes" if first.steps_to_c <= b.steps_to_c else "no")
            + few_seeds_mark(first.seeds, b.seeds),
        )
    paid = free.dropna(subset=["payload_to_c_bytes"]).sort_values(
        "payload_to_c_bytes", kind="stable"
    )
    if paid.empty or math.isnan(b.payload_to_c_bytes):
        row(_SELECTION_QUESTIONS[2], _unreached(paid.empty, b.reached_c), "no")
    else:
        cheapest = paid.iloc[0]
        row(
            _SELECTION_QUESTIONS[2],
            f"payload per worker to C 1-D 256's final loss: least {cheapest.configuration} "
            f"{cheapest.payload_to_c_bytes / 1e6:.2f} MB vs top-k "
            f"{b.payload_to_c_bytes / 1e6:.2f} MB ({cheapest.payload_to_c_vs_topk:.2f}x)",
            ("yes" if cheapest.payload_to_c_bytes <= b.payload_to_c_bytes else "no")
            + few_seeds_mark(cheapest.seeds, b.seeds),
        )
    return framed(rows, scale)


_SELECTION_QUESTIONS = (
    "does a comparison-free selection close the gap to top-k in final loss?",
    "... in steps to a loss (C 1-D 256's final loss)?",
    "... in loss per byte (payload to C 1-D 256's final loss)?",
)


def _unreached(none_free: bool, topk_reached: str) -> str:
    if none_free:
        return "no comparison-free selection reached C 1-D 256's final loss on every seed"
    return f"top-k did not reach C 1-D 256's final loss on every seed ({topk_reached})"


def few_seeds_mark(*seeds: int) -> str:
    return f" (n={min(seeds)})" if min(seeds) < 3 else ""


def _percent(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.0%}"


# --- the optics hypothesis -------------------------------------------------------------------


def _run_column_mean(run: Any, column: str) -> float:
    if column not in run.steps.columns:
        return math.nan
    values = run.steps[column].dropna()
    return float(values.mean()) if len(values) else math.nan


def _sent_results(results: list[ConfigResult]) -> list[ConfigResult]:
    return [r for r in results if r.key.variant == "E" and r.key.feedback == "sent"]


def optics_oob_table(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """C 1-D 256 and every E with feedback sent: final loss against C over seeds, and per-step
    out-of-band diagnostics (means over the steps the optics ran, then over seeds)."""
    exact = exact_band_result(results)
    c_stats = final_stats(exact)
    rows = []
    for result in ([exact] if exact else []) + _sent_results(results):
        stats = final_stats(result)
        above, verdict = compare(stats, c_stats)
        row = {
            "configuration": result.label,
            "seeds": stats[2],
            "final_loss": stats[0],
            "final_loss_sd": stats[1],
            "above_c": above,
            "vs_c": "reference" if result is exact else verdict,
            "clip_rate": result.last_clip("clip_rate"),
        }
        for column in OOB_COLUMNS:
            mean, sd, n = mean_sd(_run_column_mean(run, column) for run in result.runs)
            row[column], row[f"{column}_sd"], row[f"{column}_seeds"] = mean, sd, n
        rows.append(row)
    return framed(rows, scale)


def optics_oob_claims(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """Does E (feedback of the values sent) beat the exact band over seeds, and does the
    out-of-band energy the values sent carry explain it?"""
    exact = exact_band_result(results)
    sent = _sent_results(results)
    rows = []
    if exact is None or not sent:
        missing = "C 1-D 256" if exact is None else "E with feedback sent"
        for question in _OOB_QUESTIONS:
            rows.append(
                {"question": question, "measured": f"not recorded: no {missing}", "verdict": "-"}
            )
        return framed(rows, scale)
    c_stats = final_stats(exact)
    parts, beats = [], 0
    for result in sent:
        diff, verdict = compare(final_stats(result), c_stats)
        parts.append(f"{result.label} {diff:+.3f} ({verdict}, n={result.seeds})")
        beats += verdict == "lower"
    rows.append(
        {
            "question": _OOB_QUESTIONS[0],
            "measured": f"vs C 1-D 256 {stats_text(c_stats)}: " + "; ".join(parts),
            "verdict": f"{beats} of {len(sent)} configurations lower by more than "
            f"{SEPARATION_SE:g} standard errors",
        }
    )
    points = [
        (_run_column_mean(run, "oob_quant_share"), run.final_val_loss - c_stats[0])
        for result in sent
        for run in result.runs
    ]
    points = [(x, y) for x, y in points if math.isfinite(x) and math.isfinite(y)]
    if len(points) < 3:
        measured = f"{len(points)} run(s) with the out-of-band diagnostics; need 3 to correlate"
        verdict = "cannot tell (n<3)"
    else:
        xs, ys = np.array(points).T
        r = float(np.corrcoef(xs, ys)[0, 1]) if xs.std() > 0 and ys.std() > 0 else math.nan
        measured = (
            f"across {len(points)} E-sent runs: mean out-of-band energy sent (quantisation and "
            f"clipping) {xs.mean():.2e} of the delta; Pearson r with loss above C = {r:+.2f}"
        )
        if beats == 0:
            verdict = "nothing to explain: E does not beat the exact band"
        elif math.isfinite(r) and r <= -0.5:
            verdict = "consistent: more out-of-band energy sent goes with lower loss"
        else:
            verdict = "no: the out-of-band energy sent does not track the loss"
    rows.append({"question": _OOB_QUESTIONS[1], "measured": measured, "verdict": verdict})
    removed = [
        (
            mean_sd(_run_column_mean(run, "fb_removed_sent_share") for run in r.runs)[0],
            mean_sd(_run_column_mean(run, "fb_removed_exact_share") for run in r.runs)[0],
        )
        for r in sent
    ]
    removed = [(s, e) for s, e in removed if math.isfinite(s) and math.isfinite(e)]
    if removed:
        sent_share, exact_share = np.mean(removed, axis=0)
        rows.append(
            {
                "question": _OOB_QUESTIONS[2],
                "measured": f"per step, feedback of the values sent removes {sent_share:.2e} of "
                f"the delta's energy, of the exact band {exact_share:.2e}",
                "verdict": "sent removes less" if sent_share < exact_share else "sent removes more",
            }
        )
    else:
        rows.append(
            {
                "question": _OOB_QUESTIONS[2],
                "measured": "no run with the out-of-band diagnostics",
                "verdict": "-",
            }
        )
    return framed(rows, scale)


_OOB_QUESTIONS = (
    "does E with feedback of the values sent beat the exact band over seeds?",
    "does the out-of-band energy the values sent carry explain it?",
    "how much of the delta's energy does feedback remove: values sent vs exact band?",
)

BUILDERS = {
    "selections": selection_table,
    "selection_claims": selection_claims,
    "optics_oob": optics_oob_table,
    "optics_oob_claims": optics_oob_claims,
}
