"""Findings (d) and (e): the optics run E against the exact band, and E' summed at a switch.

  optics           (d) E against the exact band C 1-D 256, with clip rates (§14.2, §14.4, §14.5)
  optics_claims    (d) the deck's claims on the optics (slides 08-10)
  switch           (e) E' (band summed at a switch; new, nothing published) beside E sent and C

Built on transitsim.findings.runs' configurations, scales and table helpers; `findings()`
(tables.py)
calls these builders with the other sections'.
"""

import math
from typing import Any

import pandas as pd

from transitsim.analysis.metrics import run_sort_key
from transitsim.findings.claims import (
    DIVERGED_NATS,
    REPAIRED_NATS,
    UNKNOWN,
    claim_exact_feedback_diverges,
    claim_sent_feedback_repairs,
    key_label,
    sort_meta,
)
from transitsim.findings.published import (
    C_1D256,
    TINYSHAKESPEARE_CPU,
    TINYSHAKESPEARE_CPU_RUNS,
    TINYSTORIES_GPU,
    TINYSTORIES_GPU_RUNS,
    ConfigKey,
    PublishedRun,
    published_run,
)
from transitsim.findings.runs import (
    SWITCH_MODES,
    ConfigResult,
    RunScale,
    by_key,
    claim_rows,
    framed,
    nan_of,
    published_losses,
)


def optics_outcome(excess: float) -> str:
    """Where an optics run ended relative to the exact band C."""
    if math.isnan(excess):
        return UNKNOWN
    if excess > DIVERGED_NATS:
        return "diverged"
    if excess > REPAIRED_NATS:
        return "above C"
    return "matches C" if excess >= -REPAIRED_NATS else "below C"


def _exact_band(results: list[ConfigResult]) -> ConfigResult | None:
    return by_key(results).get(C_1D256)


def optics_table(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """C 1-D 256, then every E configuration: loss, distance above C, clip rates, beside the
    TinyStories GPU (§14.1, §14.2) and TinyShakespeare CPU (§14.5) figures; published E
    configurations we lack as "not recorded"."""
    exact = _exact_band(results)
    c_loss = exact.mean if exact else math.nan
    gpu_c = published_run(TINYSTORIES_GPU, C_1D256)
    cpu_c = published_run(TINYSHAKESPEARE_CPU, C_1D256)
    shown = ([exact] if exact else []) + [r for r in results if r.key.variant == "E"]
    rows = []
    for result in shown:
        excess = math.inf if result.diverged else result.mean - c_loss
        row = {
            "configuration": result.label,
            "seeds": result.seeds,
            "final_loss": result.mean,
            "final_loss_sd": result.sd,
            "above_c": excess,
            "outcome": "reference" if result is exact else optics_outcome(excess),
            "clip_rate": result.last_clip("clip_rate"),
            "clip_rate_interval": result.last_clip("clip_rate_interval"),
        }
        row.update(_published_optics(result.key if result.comparable else None, gpu_c, cpu_c))
        row["_sort"] = run_sort_key(result.runs[0].meta)
        rows.append(row)
    if exact is None:
        rows.append(_missing_optics(C_1D256, gpu_c, cpu_c))
    recorded = {r.key for r in shown if r.comparable}
    published_keys = [run.key for run in (*TINYSTORIES_GPU_RUNS, *TINYSHAKESPEARE_CPU_RUNS)]
    for key in dict.fromkeys(published_keys):
        if key.variant == "E" and key not in recorded:
            rows.append(_missing_optics(key, gpu_c, cpu_c))
    rows.sort(key=lambda row: row.pop("_sort"))
    return framed(rows, scale)


def _published_optics(
    key: ConfigKey | None, gpu_c: PublishedRun, cpu_c: PublishedRun
) -> dict[str, float]:
    gpu = published_run(TINYSTORIES_GPU, key) if key else None
    cpu = published_run(TINYSHAKESPEARE_CPU, key) if key else None
    return {
        "published_tinystories_loss": nan_of(gpu and gpu.loss_mean),
        "published_tinystories_above_c": nan_of(gpu and gpu.loss_mean - gpu_c.loss_mean),
        "published_tinystories_clip_rate": nan_of(gpu and gpu.clip_rate),
        "published_tinyshakespeare_loss": nan_of(cpu and cpu.loss_mean),
        "published_tinyshakespeare_above_c": nan_of(cpu and cpu.loss_mean - cpu_c.loss_mean),
        "published_tinyshakespeare_clip_rate_interval": nan_of(cpu and cpu.clip_rate_interval),
    }


def _missing_optics(key: ConfigKey, gpu_c: PublishedRun, cpu_c: PublishedRun) -> dict[str, Any]:
    row = {
        "configuration": key_label(key),
        "seeds": 0,
        "final_loss": math.nan,
        "final_loss_sd": math.nan,
        "above_c": math.nan,
        "outcome": UNKNOWN,
        "clip_rate": math.nan,
        "clip_rate_interval": math.nan,
        **_published_optics(key, gpu_c, cpu_c),
    }
    row["_sort"] = run_sort_key(sort_meta(key))
    return row


def optics_claims(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """The deck's optics claims (slides 08-10) on the published setting closest to ours (the
    TinyShakespeare CPU check for Shakespeare runs, else TinyStories GPU) and on ours."""
    setting = TINYSHAKESPEARE_CPU if scale.dataset == "shakespeare" else TINYSTORIES_GPU
    published = published_losses(setting)
    ours = {key: r.loss_for_claims for key, r in by_key(results).items()}
    exact = _exact_band(results)
    our_c = exact.mean if exact else None
    claims = [
        (
            "E with feedback of the exact band (full scale fixed) diverges: ends more than "
            f"{DIVERGED_NATS:g} nat above C 1-D 256",
            claim_exact_feedback_diverges(published, published[C_1D256]),
            claim_exact_feedback_diverges(ours, our_c),
        ),
        (
            "E with feedback of the values sent repairs it: ends at most "
            f"{REPAIRED_NATS:g} above C 1-D 256 (ENOB >= 8, >= 8 planes)",
            claim_sent_feedback_repairs(published, published[C_1D256]),
            claim_sent_feedback_repairs(ours, our_c),
        ),
    ]
    return claim_rows(claims, scale, setting.name)


def switch_table(results: list[ConfigResult], scale: RunScale) -> pd.DataFrame:
    """E' modes (new: nothing published) beside E with feedback sent and the exact band C;
    E' modes we lack are "not recorded" rows at the default optics (ENOB 8, 8 planes)."""
    exact = _exact_band(results)
    c_loss = exact.mean if exact else math.nan
    sent = [r for r in results if r.key.variant == "E" and r.key.feedback == "sent"]
    switch = [r for r in results if r.key.variant == "E'"]
    rows = []
    for result in ([exact] if exact else []) + sent + switch:
        partner = _sent_partner(result, sent) if result.key.variant == "E'" else None
        published = result.key.variant != "E'" and result.comparable
        gpu = published_run(TINYSTORIES_GPU, result.key) if published else None
        cpu = published_run(TINYSHAKESPEARE_CPU, result.key) if published else None
        rows.append(
            {
                "configuration": result.label,
                "seeds": result.seeds,
                "final_loss": result.mean,
                "final_loss_sd": result.sd,
                "above_c": result.mean - c_loss,
                "above_e_sent": result.mean - partner.mean if partner else math.nan,
                "clip_rate": result.last_clip("clip_rate"),
                "published_tinystories_loss": nan_of(gpu and gpu.loss_mean),
                "published_tinyshakespeare_loss": nan_of(cpu and cpu.loss_mean),
            }
        )
    modes = {r.key.feedback for r in switch}
    for mode in SWITCH_MODES:
        if mode not in modes:
            key = ConfigKey("E'", "low", "1d", 256, 8.0, 8, 0, mode)
            rows.append(
                {
                    "configuration": key_label(key),
                    "seeds": 0,
                    **{column: math.nan for column in _SWITCH_NUMBERS},
                }
            )
    return framed(rows, scale)


_SWITCH_NUMBERS = (
    "final_loss",
    "final_loss_sd",
    "above_c",
    "above_e_sent",
    "clip_rate",
    "published_tinystories_loss",
    "published_tinyshakespeare_loss",
)


def _sent_partner(result: ConfigResult, sent: list[ConfigResult]) -> ConfigResult | None:
    """E with feedback sent at the same optics (ENOB, planes, re-set interval, chunking)."""
    for candidate in sent:
        if candidate.key._replace(variant="E'", feedback=None) == result.key._replace(
            feedback=None
        ):
            return candidate
    return None
