"""The runs `transitsim findings` compares, grouped: scales, configurations and their seeds.

Runs are grouped into configurations (the run name without its seed) and configurations into
scales (data set, model, steps): every comparison is made within one scale. Every section
(`sections.py`, `optics.py`, `selection.py`) builds its table from these and the helpers here.
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from transitsim.analysis.metrics import group_by_config
from transitsim.base.tables import config_labels
from transitsim.findings.claims import (
    Energy,
    Verdict,
)
from transitsim.findings.published import (
    PUBLISHED_KEEP,
    TINYSHAKESPEARE_CPU,
    TINYSHAKESPEARE_CPU_RUNS,
    TINYSTORIES_GPU,
    TINYSTORIES_GPU_RUNS,
    ConfigKey,
    PublishedScale,
    config_key,
)
from transitsim.traces.format import Trace

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


def nan_of(value: float | None) -> float:
    return math.nan if value is None else float(value)


def framed(rows: list[dict[str, Any]], scale: RunScale) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    df.insert(0, "scale", scale_label(scale))
    return df


def published_losses(scale: PublishedScale) -> dict[ConfigKey, float]:
    runs = TINYSTORIES_GPU_RUNS if scale == TINYSTORIES_GPU else TINYSHAKESPEARE_CPU_RUNS
    return {run.key: run.loss_mean for run in runs}


def claim_rows(
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
    return framed(rows, scale)


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
