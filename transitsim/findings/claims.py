"""The deck's claims (spec §14) as verdicts: each claim_* measures one claim on a set of losses or
energy shares and says whether it holds, with thresholds that turn the deck's words into numbers.

`transitsim.findings.sections` applies them to the published data and to this project's runs.
"""

import math
from typing import Any, NamedTuple

import numpy as np

from transitsim.analysis.metrics import run_sort_key
from transitsim.base.tables import variant_label
from transitsim.findings.published import ConfigKey

HOLDS, FAILS, UNKNOWN = "holds", "does not hold", "not recorded"

# Thresholds that turn the deck's words into verdicts; each says what the published data gives.
CHUNK_SHAPE_SHARE = 0.10  # "barely matters": spread < 10% of the gap above top-k (published 2.5%)
FAR_LESS_RATIO = 0.5  # "far less": low < half a random set's share (published 0.013/0.065 = 0.2)
ZERO_SHARE = 0.01  # "~0": below 0.01, a sixth of a random set's 1/16 (published 8.5e-5)
DIVERGED_NATS = 1.0  # "diverges": > 1 nat above C (published: +6.3 CPU, +8 to +556 GPU)
REPAIRED_NATS = 0.1  # "repairs": at most 0.1 above C (published CPU +0.056, +0.071)

NON_OPTICS = ("A", "B", "C", "D", "F")
FIXED_BANDS = ("C", "D", "F")

Energy = dict[str, dict[str, float]]  # source -> selector -> share


class Verdict(NamedTuple):
    """One claim measured on one set of losses: what was measured, and holds / does not hold."""

    measured: str
    verdict: str


NOT_RECORDED = Verdict(UNKNOWN, UNKNOWN)


def key_label(key: ConfigKey) -> str:
    """A readable label for a configuration key, as tables.variant_label writes run labels."""
    params = {name: value for name, value in key._asdict().items() if value is not None}
    label = f"{key.variant} {variant_label({'variant': key.variant, 'variant_params': params})}"
    return label


def sort_meta(key: ConfigKey, name: str = "") -> dict[str, Any]:
    return {"variant": key.variant, "variant_params": key._asdict(), "name": name}


def ranked(losses: dict[ConfigKey, float]) -> list[ConfigKey]:
    """Keys from lowest to highest final loss (NaN last; ties in table order)."""
    keys = sorted(losses, key=lambda key: run_sort_key(sort_meta(key)))
    return sorted(keys, key=lambda key: (math.isnan(losses[key]), losses[key]))


def pick_topk(losses: dict[ConfigKey, float]) -> tuple[ConfigKey, float] | None:
    """The top-k reference: B in 2-D 64 chunks as published, else any B."""
    preferred = ConfigKey("B", None, "2d", 64)
    if preferred in losses:
        return preferred, losses[preferred]
    for key, loss in losses.items():
        if key.variant == "B":
            return key, loss
    return None


def _gap_text(gaps: dict[ConfigKey, float]) -> str:
    low = min(gaps, key=gaps.get)
    high = max(gaps, key=gaps.get)
    return (
        f"smallest gap {gaps[low]:+.3f} ({key_label(low)}), "
        f"largest {gaps[high]:+.3f} ({key_label(high)})"
    )


# --- (b) the deck's loss claims ---------------------------------------------------------------


def claim_topk_above_adamw(losses: dict[ConfigKey, float]) -> Verdict:
    topk = pick_topk(losses)
    if topk is None or ConfigKey("A") not in losses:
        return NOT_RECORDED
    gap = topk[1] - losses[ConfigKey("A")]
    return Verdict(f"B - A = {gap:+.3f}", HOLDS if gap > 0 else FAILS)


def claim_fixed_bands_above_topk(losses: dict[ConfigKey, float], gap_nats: float) -> Verdict:
    topk = pick_topk(losses)
    if topk is None:
        return NOT_RECORDED
    gaps = {key: loss - topk[1] for key, loss in losses.items() if key.variant in FIXED_BANDS}
    if not gaps:
        return NOT_RECORDED
    return Verdict(_gap_text(gaps), HOLDS if min(gaps.values()) > gap_nats else FAILS)


def claim_random_beats_structured(losses: dict[ConfigKey, float]) -> Verdict:
    fixed = {key: loss for key, loss in losses.items() if key.variant in FIXED_BANDS}
    random = {key: loss for key, loss in fixed.items() if key.band == "random"}
    structured = {key: loss for key, loss in fixed.items() if key.band != "random"}
    if not random or not structured:
        return NOT_RECORDED
    worst_random = max(random, key=random.get)
    best = min(structured, key=structured.get)
    text = (
        f"random {random[worst_random]:.3f} vs best structured {structured[best]:.3f} "
        f"({key_label(best)})"
    )
    return Verdict(text, HOLDS if random[worst_random] < structured[best] else FAILS)


def claim_chunk_shape_barely_matters(losses: dict[ConfigKey, float]) -> Verdict:
    topk = pick_topk(losses)
    low = {key: loss for key, loss in losses.items() if key.variant == "C" and key.band == "low"}
    if topk is None or len(low) < 2:
        return NOT_RECORDED
    spread = max(low.values()) - min(low.values())
    gap = float(np.mean(list(low.values()))) - topk[1]
    share = spread / abs(gap) if gap else math.inf
    shapes = ", ".join(f"{key.chunk_mode}{key.chunk} {low[key]:.3f}" for key in ranked(low))
    text = f"spread {spread:.3f} ({shapes}) = {share:.1%} of their gap above top-k ({gap:+.3f})"
    return Verdict(text, HOLDS if share < CHUNK_SHAPE_SHARE else FAILS)


def claim_high_band_worst(losses: dict[ConfigKey, float]) -> Verdict:
    high = {key: loss for key, loss in losses.items() if key.band == "high"}
    others = {
        key: loss
        for key, loss in losses.items()
        if key.band != "high" and key.variant in NON_OPTICS
    }
    if not high or not others:
        return NOT_RECORDED
    best_high = min(high.values())
    worst = max(others, key=others.get)
    text = f"high {best_high:.3f} vs next worst {others[worst]:.3f} ({key_label(worst)})"
    return Verdict(text, HOLDS if best_high > others[worst] else FAILS)


def claim_ordering(
    ours: dict[ConfigKey, float], published: dict[ConfigKey, float]
) -> tuple[Verdict, Verdict]:
    """The published order vs ours over the configurations both have: (published, ours)."""
    common = [key for key in ours if key in published and key.variant in NON_OPTICS]
    if len(common) < 2:
        everything = " < ".join(key_label(key) for key in ranked(published))
        return Verdict(everything, HOLDS), NOT_RECORDED
    theirs = ranked({key: published[key] for key in common})
    mine = ranked({key: ours[key] for key in common})
    text = " < ".join(key_label(key) for key in theirs)
    verdict = HOLDS if theirs == mine else FAILS
    return Verdict(text, HOLDS), Verdict(" < ".join(key_label(key) for key in mine), verdict)


# --- (c) the deck's energy claims -------------------------------------------------------------


def claim_low_band_misses_momentum(energies: dict[ConfigKey, Energy]) -> Verdict:
    ratios = {}
    for key, energy in energies.items():
        momentum = energy.get("momentum", {})
        if key.variant == "C" and key.chunk_mode == "2d" and "low" in momentum:
            ratios[key] = (momentum["low"], momentum.get("random", math.nan))
    if not ratios:
        return NOT_RECORDED
    texts, holds = [], True
    for key, (low, random) in ratios.items():
        ratio = low / random if random else math.inf
        texts.append(f"{key_label(key)}: low {low:.3f} vs random {random:.3f} ({ratio:.2f}x)")
        holds = holds and ratio < FAR_LESS_RATIO
    return Verdict("; ".join(texts), HOLDS if holds else FAILS)


def claim_delta_empty_in_band(energies: dict[ConfigKey, Energy]) -> Verdict:
    shares = {}
    for key, energy in energies.items():
        delta = energy.get("delta", {})
        selector = {"C": "low", "D": "calib"}.get(key.variant)
        if selector in delta:
            shares[key] = delta[selector]
    if not shares:
        return NOT_RECORDED
    worst = max(shares, key=shares.get)
    text = f"largest {shares[worst]:.2g} ({key_label(worst)}), {len(shares)} band run(s)"
    return Verdict(text, HOLDS if shares[worst] < ZERO_SHARE else FAILS)


# --- (d) the deck's optics claims -------------------------------------------------------------


def claim_exact_feedback_diverges(losses: dict[ConfigKey, float], c_loss: float | None) -> Verdict:
    if c_loss is None:  # no C 1-D 256 run to compare with (e.g. only E traces)
        return NOT_RECORDED
    excess = {
        key: loss - c_loss
        for key, loss in losses.items()
        if key.variant == "E" and key.feedback == "exact" and key.fs_every == 0
    }
    if not excess:
        return NOT_RECORDED
    least = min(excess, key=excess.get)
    text = f"smallest excess {excess[least]:+.3f} ({key_label(least)}), {len(excess)} config(s)"
    return Verdict(text, HOLDS if excess[least] > DIVERGED_NATS else FAILS)


def claim_sent_feedback_repairs(losses: dict[ConfigKey, float], c_loss: float | None) -> Verdict:
    def precise(key: ConfigKey) -> bool:
        return (key.enob is None or key.enob >= 8) and (key.planes is None or key.planes >= 8)

    if c_loss is None:  # no C 1-D 256 run to compare with (e.g. only E traces)
        return NOT_RECORDED
    excess = {
        key: loss - c_loss
        for key, loss in losses.items()
        if key.variant == "E" and key.feedback == "sent" and precise(key)
    }
    if not excess:
        return NOT_RECORDED
    most = max(excess, key=excess.get)
    text = f"largest excess {excess[most]:+.3f} ({key_label(most)}), {len(excess)} config(s)"
    return Verdict(text, HOLDS if excess[most] <= REPAIRED_NATS else FAILS)
