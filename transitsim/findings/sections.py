"""Sections (a)-(c) of `transitsim findings`: final losses, orderings and energies, with verdicts.

Sections, each a table with raw numbers (NaN where a figure was not recorded):
  final_loss       (a) final val loss per configuration, mean ± sample sd over seeds, beside the
                   TinyShakespeare CPU check (§14.5) and the TinyStories GPU table (§14.1)
  ordering         (b) the variants ranked by final loss, published and ours
  ordering_claims  (b) the deck's claims on losses (slide 04), holds / does not hold
  energy           (c) captured-energy shares at the run's k (§11, §14.3), group "all"
  energy_claims    (c) the deck's claims on energy (slide 06)

Runs are grouped into configurations (the run name without its seed) and configurations into
scales (data set, model, steps): every comparison is made within one scale. Rankings and claims
use the runs that kept 1/16 as the published ones did, one configuration per ConfigKey (the
published learning rate when there are several).
"""

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from transitsim.analysis.metrics import run_sort_key
from transitsim.findings.claims import (
    CHUNK_SHAPE_SHARE,
    FAR_LESS_RATIO,
    NON_OPTICS,
    UNKNOWN,
    ZERO_SHARE,
    Energy,
    Verdict,
    claim_chunk_shape_barely_matters,
    claim_delta_empty_in_band,
    claim_fixed_bands_above_topk,
    claim_high_band_worst,
    claim_low_band_misses_momentum,
    claim_ordering,
    claim_random_beats_structured,
    claim_topk_above_adamw,
    key_label,
    pick_topk,
    ranked,
    sort_meta,
)
from transitsim.findings.published import (
    FIXED_BAND_GAP_NATS,
    TINYSHAKESPEARE_CPU,
    TINYSTORIES_GPU,
    TINYSTORIES_GPU_ENERGY,
    TINYSTORIES_GPU_RUNS,
    ConfigKey,
    published_run,
)
from transitsim.findings.runs import (
    SELECTORS,
    SOURCES,
    ConfigResult,
    RunScale,
    by_key,
    claim_rows,
    energy_means,
    framed,
    matching_published_scale,
    nan_of,
    published_losses,
)

# --- (a) final validation loss --------------------------------------------------------------


def config_status(result: ConfigResult) -> str:
    if result.diverged:
        return f"diverged {result.diverged}/{result.seeds}"
    if result.incomplete:
        return f"incomplete {result.incomplete}/{result.seeds}"
    return "complete"


def _published_losses(key: ConfigKey | None) -> dict[str, float]:
    """The published figures of a key (None: a run the published tables cannot match)."""
    cpu = published_run(TINYSHAKESPEARE_CPU, key) if key else None
    gpu = published_run(TINYSTORIES_GPU, key) if key else None
    topk = published_run(TINYSTORIES_GPU, ConfigKey("B", None, "2d", 64))
    return {
        "published_tinyshakespeare_loss": nan_of(cpu and cpu.loss_mean),
        "published_tinystories_loss": nan_of(gpu and gpu.loss_mean),
        "published_tinystories_sd": nan_of(gpu and gpu.loss_sd),
        "published_tinystories_seeds": gpu.seeds if gpu else 0,
        "published_tinystories_above_topk": nan_of(gpu and gpu.loss_mean - topk.loss_mean),
    }


def final_loss_table(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """Each configuration's final loss and its distance above top-k, beside the published
    figures for the same key; published non-optics configurations we lack as "not recorded"."""
    topk = pick_topk({key: r.mean for key, r in by_key(results).items()})
    topk_loss = topk[1] if topk else math.nan
    rows = []
    for result in results:
        rows.append(
            {
                "configuration": result.label,
                "config": result.name,
                "variant": result.key.variant,
                "seeds": result.seeds,
                "final_loss": result.mean,
                "final_loss_sd": result.sd,
                "status": config_status(result),
                "above_topk": result.mean - topk_loss,
                **_published_losses(result.key if result.comparable else None),
                "_sort": run_sort_key(result.runs[0].meta),
            }
        )
    recorded = {r.key for r in results if r.comparable}
    for run in TINYSTORIES_GPU_RUNS:
        if run.key.variant in NON_OPTICS and run.key not in recorded:
            rows.append(
                {
                    "configuration": key_label(run.key),
                    "config": None,
                    "variant": run.key.variant,
                    "seeds": 0,
                    "final_loss": math.nan,
                    "final_loss_sd": math.nan,
                    "status": UNKNOWN,
                    "above_topk": math.nan,
                    **_published_losses(run.key),
                    "_sort": run_sort_key(sort_meta(run.key)),
                }
            )
    same = "same" if matching_published_scale(scale) == TINYSTORIES_GPU else "differs"
    for row in rows:
        row["tinystories_scale"] = same
    rows.sort(key=lambda row: row.pop("_sort"))
    return framed(rows, scale)


# --- (b) ordering and the deck's loss claims -------------------------------------------------


def ordering_table(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """Non-optics configurations in the published order of final loss, with our rank beside;
    configurations only we ran follow in our order."""
    ours = {key: r for key, r in by_key(results).items() if key.variant in NON_OPTICS}
    our_losses = {key: r.mean for key, r in ours.items()}
    our_rank = {key: rank for rank, key in enumerate(ranked(our_losses), 1)}
    published = {
        key: loss
        for key, loss in published_losses(TINYSTORIES_GPU).items()
        if key.variant in NON_OPTICS
    }
    rows = []
    for rank, key in enumerate(ranked(published), 1):
        rows.append(_order_row(ours.get(key), key, published[key], rank, our_rank.get(key)))
    for key in ranked(our_losses):
        if key not in published:
            rows.append(_order_row(ours[key], key, math.nan, None, our_rank[key]))
    return framed(rows, scale)


def _order_row(
    result: ConfigResult | None,
    key: ConfigKey,
    published: float,
    rank: int | None,
    our_rank: int | None,
) -> dict[str, Any]:
    return {
        "configuration": result.label if result else key_label(key),
        "published_tinystories_loss": published,
        "published_rank": rank,
        "final_loss": result.mean if result else math.nan,
        "rank": our_rank,
    }


def ordering_claims(
    results: list[ConfigResult], scale: RunScale, gap_nats: float = FIXED_BAND_GAP_NATS
) -> pd.DataFrame:
    """The deck's claims on final losses (slides 04, 11), on the published data and on ours."""
    ours = {
        key: r.loss_for_claims for key, r in by_key(results).items() if key.variant in NON_OPTICS
    }
    published = {
        key: loss
        for key, loss in published_losses(TINYSTORIES_GPU).items()
        if key.variant in NON_OPTICS
    }
    measures: list[tuple[str, Callable[[dict[ConfigKey, float]], Verdict]]] = [
        ("top-k ends above AdamW", claim_topk_above_adamw),
        (
            f"every fixed band ends more than {gap_nats:g} nat above top-k",
            lambda losses: claim_fixed_bands_above_topk(losses, gap_nats),
        ),
        (
            "every fixed band ends above top-k",
            lambda losses: claim_fixed_bands_above_topk(losses, 0.0),
        ),
        ("random fixed set beats every structured band", claim_random_beats_structured),
        (
            "chunk shape barely matters for the low band (1-D 256 vs 1-D 64 vs 2-D), "
            f"spread < {CHUNK_SHAPE_SHARE:.0%} of the gap above top-k",
            claim_chunk_shape_barely_matters,
        ),
        ("high band is worst", claim_high_band_worst),
    ]
    claims = [(claim, measure(published), measure(ours)) for claim, measure in measures]
    claims.append(("ordering of variants as published", *claim_ordering(ours, published)))
    return claim_rows(claims, scale, TINYSTORIES_GPU.name)


# --- (c) captured energy ---------------------------------------------------------------------


def _energy_runs(results: list[ConfigResult]) -> list[ConfigResult]:
    """As analyse.py: variants B, C, D whose band is low or calib (F and E are left out)."""
    return [
        r
        for r in results
        if r.key.variant in ("B", "C", "D")
        and r.params.get("band")
        in (
            "low",
            "calib",
        )
    ]


def energy_table(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """Shares of momentum, delta and gradient each selector keeps, ours beside §14.3."""
    rows = []
    for result in _energy_runs(results):
        energy, records = energy_means(result.runs)
        published = TINYSTORIES_GPU_ENERGY.get(result.key) if result.comparable else None
        rows += _energy_rows(result.label, records, energy, published)
    recorded = {r.key for r in _energy_runs(results) if r.comparable}
    for key, published in TINYSTORIES_GPU_ENERGY.items():
        if key not in recorded:
            rows += _energy_rows(key_label(key), 0, {}, published)
    return framed(rows, scale)


def _energy_rows(
    label: str, records: int, energy: Energy, published: Energy | None
) -> list[dict[str, Any]]:
    rows = []
    for source in SOURCES:
        row: dict[str, Any] = {"configuration": label, "source": source, "records": records}
        for selector in SELECTORS:
            row[selector] = energy.get(source, {}).get(selector, math.nan)
            row[f"{selector}_published"] = nan_of((published or {}).get(source, {}).get(selector))
        rows.append(row)
    return rows


def energy_claims(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """The deck's claims on captured energy (slide 06), on §14.3 and on ours."""
    ours = {}
    for key, result in by_key(_energy_runs(results)).items():
        energy, records = energy_means(result.runs)
        if records:
            ours[key] = energy
    claims = [
        (
            "in 2-D chunks the low band keeps far less of the momentum's energy than a random "
            f"set (< {FAR_LESS_RATIO:g}x)",
            claim_low_band_misses_momentum(TINYSTORIES_GPU_ENERGY),
            claim_low_band_misses_momentum(ours),
        ),
        (
            f"delta holds ~0 in the band for fixed bands (< {ZERO_SHARE:g})",
            claim_delta_empty_in_band(TINYSTORIES_GPU_ENERGY),
            claim_delta_empty_in_band(ours),
        ),
    ]
    return claim_rows(claims, scale, TINYSTORIES_GPU.name)


# --- all sections ----------------------------------------------------------------------------
