"""This project's runs beside the published results (spec §14), row by row, with verdicts.

Sections, each a table with raw numbers (NaN where a figure was not recorded):
  final_loss       (a) final val loss per configuration, mean ± sample sd over seeds, beside the
                   TinyShakespeare CPU check (§14.5) and the TinyStories GPU table (§14.1)
  ordering         (b) the variants ranked by final loss, published and ours
  ordering_claims  (b) the deck's claims on losses (slide 04), holds / does not hold
  energy           (c) captured-energy shares at the run's k (§11, §14.3), group "all"
  energy_claims    (c) the deck's claims on energy (slide 06)
  optics ...       (d), (e) the optics and the switch: see transitsim.findings.optics
  selections ...   (f), (g) issue 14's questions: see transitsim.findings.selection

Runs are grouped into configurations (the run name without its seed) and configurations into
scales (data set, model, steps): every comparison is made within one scale. Rankings and claims
use the runs that kept 1/16 as the published ones did, one configuration per ConfigKey (the
published learning rate when there are several).
"""

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from transitsim.analysis.metrics import group_by_config, run_sort_key
from transitsim.base.tables import config_labels
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
    PUBLISHED_KEEP,
    TINYSHAKESPEARE_CPU,
    TINYSHAKESPEARE_CPU_RUNS,
    TINYSTORIES_GPU,
    TINYSTORIES_GPU_ENERGY,
    TINYSTORIES_GPU_RUNS,
    ConfigKey,
    PublishedScale,
    config_key,
    published_run,
)
from transitsim.traces.format import Trace

SECTIONS = (
    "final_loss",
    "ordering",
    "ordering_claims",
    "energy",
    "energy_claims",
    "optics",
    "optics_claims",
    "switch",
    # issue 14 (transitsim.findings.selection): moving bands and the optics hypothesis
    "selections",
    "selection_claims",
    "optics_oob",
    "optics_oob_claims",
)

# Peak learning rates of the published runs (spec §1.2): AdamW 3e-3, every DeMo variant 1e-3.
PUBLISHED_LR = {"A": 3e-3}
PUBLISHED_DEMO_LR = 1e-3


SOURCES = ("momentum", "delta", "grad")
SELECTORS = ("topk", "low", "random", "calib")
SWITCH_MODES = ("loopback", "exact", "mean")  # E' feedback modes (trainer FEEDBACK_MODES)


class RunScale(NamedTuple):
    """What must agree for two runs' losses to be comparable: data, model shape, length."""

    dataset: str
    n_layer: int | None
    n_embd: int | None
    block: int | None
    steps: int | None
    workers: int | None
    batch: int | None


def run_scale(meta: dict[str, Any]) -> RunScale:
    """A run's scale from its config (trainer and importer both record it), else its metadata."""
    config = meta.get("config") or {}
    model = meta.get("model") or {}
    return RunScale(
        str(config.get("dataset") or meta.get("corpus") or "unknown data"),
        config.get("n_layer", model.get("n_layer")),
        config.get("n_embd", model.get("n_embd")),
        config.get("block", meta.get("context")),
        config.get("steps", meta.get("steps_planned")),
        config.get("workers", meta.get("workers")),
        config.get("batch", meta.get("batch")),
    )


def matching_published_scale(scale: RunScale) -> PublishedScale | None:
    """The published setting run at exactly this scale, if any."""
    for published in (TINYSHAKESPEARE_CPU, TINYSTORIES_GPU):
        if tuple(scale) == tuple(published)[1:]:
            return published
    return None


def scale_label(scale: RunScale) -> str:
    """ "shakespeare, 4 layers x 128, context 128, 600 steps (= TinyShakespeare CPU)"."""
    text = (
        f"{scale.dataset}, {scale.n_layer} layers x {scale.n_embd}, context {scale.block}, "
        f"{scale.steps} steps"
    )
    published = matching_published_scale(scale)
    return f"{text} (= {published.name})" if published else text


@dataclass
class ConfigResult:
    """One configuration of ours: its seeds' runs and what the sections need from them."""

    name: str
    label: str
    key: ConfigKey
    scale: RunScale
    params: dict[str, Any]
    runs: list[Trace] = field(repr=False)

    @property
    def seeds(self) -> int:
        return len(self.runs)

    @property
    def finals(self) -> np.ndarray:
        return np.array([run.final_val_loss for run in self.runs], dtype=float)

    @property
    def mean(self) -> float:
        return float(np.mean(self.finals))

    @property
    def sd(self) -> float:
        """Sample standard deviation over seeds, 0 for one seed (spec §13)."""
        return float(np.std(self.finals, ddof=1)) if self.seeds > 1 else 0.0

    @property
    def diverged(self) -> int:
        return sum(_diverged(run) for run in self.runs)

    @property
    def incomplete(self) -> int:
        return sum(run.meta.get("status") != "complete" for run in self.runs)

    @property
    def loss_for_claims(self) -> float:
        """The mean final loss, or infinity when a seed diverged (its last loss may look fine)."""
        return math.inf if self.diverged else self.mean

    @property
    def comparable(self) -> bool:
        """Kept the published 1/16 (AdamW keeps everything), so published figures apply."""
        keep = self.params.get("keep")
        return self.key.variant == "A" or (keep is not None and math.isclose(keep, PUBLISHED_KEEP))

    @property
    def published_lr(self) -> bool:
        lr = self.params.get("lr")
        wanted = PUBLISHED_LR.get(self.key.variant, PUBLISHED_DEMO_LR)
        return lr is not None and math.isclose(lr, wanted)

    def last_clip(self, column: str) -> float:
        """Mean over seeds of the last recorded value of a clip-rate column (NaN when none)."""
        values = []
        for run in self.runs:
            if column in run.steps.columns:
                recorded = run.steps[column].dropna()
                if len(recorded):
                    values.append(float(recorded.iloc[-1]))
        return float(np.mean(values)) if values else math.nan


def _diverged(run: Trace) -> bool:
    notes = run.meta.get("notes") or []
    return any(str(note).startswith("diverged") for note in notes) or not math.isfinite(
        run.final_val_loss
    )


def summarise(traces: list[Trace]) -> list[ConfigResult]:
    """Our configurations in table order (metrics.run_sort_key), with readable labels."""
    groups = group_by_config(traces)
    labels = config_labels({name: runs[0].meta for name, runs in groups.items()})
    results = []
    for name, runs in groups.items():
        meta = runs[0].meta
        key = config_key(meta["variant"], meta.get("variant_params"))
        results.append(
            ConfigResult(
                name=name,
                label=labels[name],
                key=key,
                scale=run_scale(meta),
                params=dict(meta.get("variant_params") or {}),
                runs=runs,
            )
        )
    return results


def by_key(results: Iterable[ConfigResult]) -> dict[ConfigKey, ConfigResult]:
    """One comparable configuration per key: the one at the published learning rate if any."""
    chosen: dict[ConfigKey, ConfigResult] = {}
    for result in results:
        if not result.comparable:
            continue
        held = chosen.get(result.key)
        if held is None or (result.published_lr and not held.published_lr):
            chosen[result.key] = result
    return chosen


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


# --- (a) final validation loss --------------------------------------------------------------


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
                "status": _status(result),
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
    return _framed(rows, scale)


def _status(result: ConfigResult) -> str:
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
        "published_tinyshakespeare_loss": _nan(cpu and cpu.loss_mean),
        "published_tinystories_loss": _nan(gpu and gpu.loss_mean),
        "published_tinystories_sd": _nan(gpu and gpu.loss_sd),
        "published_tinystories_seeds": gpu.seeds if gpu else 0,
        "published_tinystories_above_topk": _nan(gpu and gpu.loss_mean - topk.loss_mean),
    }


def _framed(rows: list[dict[str, Any]], scale: RunScale) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    df.insert(0, "scale", scale_label(scale))
    return df


# --- (b) ordering and the deck's loss claims -------------------------------------------------


def published_losses(scale: PublishedScale) -> dict[ConfigKey, float]:
    runs = TINYSTORIES_GPU_RUNS if scale == TINYSTORIES_GPU else TINYSHAKESPEARE_CPU_RUNS
    return {run.key: run.loss_mean for run in runs}


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
    return _framed(rows, scale)


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


def _claim_rows(
    claims: list[tuple[str, Verdict, Verdict]], scale: RunScale, setting: str
) -> pd.DataFrame:
    rows = [
        {
            "claim": claim,
            "published_setting": setting,
            "published": published.measured,
            "published_verdict": published.verdict,
            "ours": ours.measured,
            "verdict": ours.verdict,
        }
        for claim, published, ours in claims
    ]
    return _framed(rows, scale)


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
    return _claim_rows(claims, scale, TINYSTORIES_GPU.name)


# --- (c) captured energy ---------------------------------------------------------------------


def warmup_steps(meta: dict[str, Any]) -> int:
    """The run's warm-up: diag records after it are the ones averaged (spec §11)."""
    config = meta.get("config") or {}
    params = meta.get("variant_params") or {}
    return int(config.get("warmup", params.get("warmup", 0)) or 0)


def energy_means(runs: list[Trace]) -> tuple[Energy, int]:
    """Mean share per (source, selector) in group "all" over diag records with step > warmup,
    seeds pooled (each record weighs one), and how many records that was."""
    parts = []
    for run in runs:
        diag = run.diagnostics
        after = diag[(diag["step"] > warmup_steps(run.meta)) & (diag["group"] == "all")]
        parts.append(after.assign(run=run.name))
    pooled = pd.concat(parts, ignore_index=True)
    records = len(pooled[["run", "step"]].drop_duplicates())
    energy: Energy = {}
    for (source, selector), share in pooled.groupby(["source", "selector"])["share"].mean().items():
        energy.setdefault(source, {})[selector] = float(share)
    return energy, records


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
    return _framed(rows, scale)


def _energy_rows(
    label: str, records: int, energy: Energy, published: Energy | None
) -> list[dict[str, Any]]:
    rows = []
    for source in SOURCES:
        row: dict[str, Any] = {"configuration": label, "source": source, "records": records}
        for selector in SELECTORS:
            row[selector] = energy.get(source, {}).get(selector, math.nan)
            row[f"{selector}_published"] = _nan((published or {}).get(source, {}).get(selector))
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
    return _claim_rows(claims, scale, TINYSTORIES_GPU.name)


# --- all sections ----------------------------------------------------------------------------


def findings(traces: list[Trace], gap_nats: float = FIXED_BAND_GAP_NATS) -> dict[str, pd.DataFrame]:
    """Every section's table for a set of runs; each scale's configurations are compared among
    themselves and the tables concatenated, scales in first-seen order."""
    scales: dict[RunScale, list[ConfigResult]] = {}
    for result in summarise(traces):
        scales.setdefault(result.scale, []).append(result)
    # these build on this module's tables and helpers
    from transitsim.findings.optics import optics_claims, optics_table, switch_table
    from transitsim.findings.selection import BUILDERS

    builders: dict[str, Callable[[list[ConfigResult], RunScale], pd.DataFrame]] = {
        "final_loss": final_loss_table,
        "ordering": ordering_table,
        "ordering_claims": lambda results, scale: ordering_claims(results, scale, gap_nats),
        "energy": energy_table,
        "energy_claims": energy_claims,
        "optics": optics_table,
        "optics_claims": optics_claims,
        "switch": switch_table,
        **BUILDERS,
    }
    return {
        section: pd.concat(
            [build(results, scale) for scale, results in scales.items()], ignore_index=True
        )
        for section, build in builders.items()
    }
