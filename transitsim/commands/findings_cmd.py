"""`transitsim findings`: our recorded runs beside the published results, section by section."""

import math
import sys
from pathlib import Path
from typing import Any, TextIO

import pandas as pd
import typer

from transitsim.base.errors import TransitsimError
from transitsim.base.tables import DASH, emit_json, emit_table, output_format
from transitsim.commands import QUIET_HELP
from transitsim.findings.published import FIXED_BAND_GAP_NATS
from transitsim.findings.tables import SECTIONS, UNKNOWN, findings
from transitsim.traces.format import find_traces, read_trace

NEW = "new: none published"
TITLES = {
    "final_loss": "(a) Final validation loss per configuration (mean ± sample sd over seeds)",
    "ordering": "(b) Ordering of the variants by final loss (1 = lowest)",
    "ordering_claims": "(b) The deck's claims on final loss (slides 04, 11)",
    "energy": "(c) Captured energy at the run's k: group all, diag records after warm-up, "
    "seeds pooled, worker 0 (published: TinyStories GPU, §14.3)",
    "energy_claims": "(c) The deck's claims on captured energy (slide 06)",
    "optics": "(d) The optics (E) against the exact band C 1-D 256 (§14.1, §14.2, §14.5)",
    "optics_claims": "(d) The deck's claims on the optics (slides 08-10)",
    "switch": "(e) E' (band summed at a switch): new, nothing published; beside E sent and C",
    "selections": "(f) Selections without comparisons (C, D, F, G) against top-k (B): new, "
    "nothing published; mean ± sd over seeds",
    "selection_claims": "(f) Does a comparison-free selection close the gap to top-k?",
    "optics_oob": "(g) E with feedback of the values sent against the exact band, with the "
    "out-of-band energy the values sent carry (per step, worker 0; means over seeds)",
    "optics_oob_claims": "(g) The optics hypothesis (slide 10), over seeds",
    "local_sgd": "(h) Local SGD (H DiLoCo, H-s Streaming DiLoCo, L SparseLoCo) against the "
    "every-step methods: new, nothing published; mean ± sd over seeds, payload per worker",
    "local_sgd_claims": "(h) Communicate less often, or less each step?",
}
CLAIM_HEADERS = {
    "claim": "Claim",
    "published_setting": "Published setting",
    "published": "Published",
    "published_verdict": "Published verdict",
    "ours": "Ours",
    "verdict": "Verdict (ours)",
}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _loss(value: float, sd: float = math.nan, seeds: int = 1) -> str:
    if _missing(value):
        return DASH
    if math.isinf(value):
        return "inf"
    return f"{value:.3f} ± {sd:.3f}" if seeds > 1 else f"{value:.3f}"


def _signed(value: float) -> str:
    return DASH if _missing(value) else f"{value:+.3f}"


def _percent(value: float) -> str:
    return DASH if _missing(value) else f"{value:.2%}"


def _ours(row: pd.Series, text: str) -> str:
    """A figure of ours: "not recorded" when we have no run of the configuration."""
    return UNKNOWN if row["seeds"] == 0 else text


def _published(value: float, text: str) -> str:
    """A published figure: "not recorded" when the configuration was not published."""
    return UNKNOWN if _missing(value) else text


def _published_clip(value: float, published: bool) -> str:
    """A published clip rate: a dash where the run was published without one."""
    return _percent(value) if published else UNKNOWN


def show_final_loss(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    out = pd.DataFrame({"configuration": df["configuration"], "seeds": df["seeds"]})
    out["final_loss"] = [
        _ours(
            row,
            _loss(row.final_loss, row.final_loss_sd, row.seeds)
            + ("" if row.status == "complete" else f" ({row.status})"),
        )
        for _, row in df.iterrows()
    ]
    out["above_topk"] = [_ours(row, _signed(row.above_topk)) for _, row in df.iterrows()]
    out["cpu"] = [_published(v, _loss(v)) for v in df["published_tinyshakespeare_loss"]]
    out["gpu"] = [
        _published(
            row.published_tinystories_loss,
            _loss(
                row.published_tinystories_loss,
                row.published_tinystories_sd,
                row.published_tinystories_seeds,
            ),
        )
        for _, row in df.iterrows()
    ]
    out["gpu_above_topk"] = [
        _published(v, _signed(v)) for v in df["published_tinystories_above_topk"]
    ]
    switch = df["variant"].isin(["E'", "G"]).to_numpy()  # never published
    out.loc[switch, ["cpu", "gpu", "gpu_above_topk"]] = NEW
    out["gpu_scale"] = df["tinystories_scale"]
    headers = {
        "configuration": "Configuration",
        "seeds": "Seeds",
        "final_loss": "Final loss",
        "above_topk": "Above top-k",
        "cpu": "Published (TinyShakespeare CPU)",
        "gpu": "Published (TinyStories GPU)",
        "gpu_above_topk": "Published above top-k",
        "gpu_scale": "Scale vs TinyStories GPU",
    }
    return out, headers


def show_ordering(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    def rank(value: Any) -> str:
        return UNKNOWN if _missing(value) else str(int(value))

    out = pd.DataFrame(
        {
            "configuration": df["configuration"],
            "published_rank": [rank(v) for v in df["published_rank"]],
            "published": [_published(v, _loss(v)) for v in df["published_tinystories_loss"]],
            "rank": [rank(v) for v in df["rank"]],
            "final_loss": [UNKNOWN if _missing(v) else _loss(v) for v in df["final_loss"]],
        }
    )
    headers = {
        "configuration": "Configuration",
        "published_rank": "Published rank",
        "published": "Published (TinyStories GPU)",
        "rank": "Our rank",
        "final_loss": "Our final loss",
    }
    return out, headers


def show_claims(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    return df[list(CLAIM_HEADERS)].copy(), CLAIM_HEADERS


def show_energy(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    selectors = ("topk", "low", "random", "calib")
    published_any = df[[f"{s}_published" for s in selectors]].notna().any(axis=1)
    out = pd.DataFrame({"configuration": df["configuration"], "source": df["source"]})
    out["records"] = df["records"]
    names = {"topk": "Top-k", "low": "Low", "random": "Random", "calib": "Calibrated"}
    headers = {"configuration": "Run", "source": "Tensor", "records": "Records"}
    for selector in selectors:
        out[selector] = [
            (UNKNOWN if records == 0 else "n/a") if _missing(v) else f"{v:.3f}"
            for v, records in zip(df[selector], df["records"], strict=True)
        ]
        out[f"{selector}_pub"] = [
            (UNKNOWN if not any_ else "n/a") if _missing(v) else f"{v:.3f}"
            for v, any_ in zip(df[f"{selector}_published"], published_any, strict=True)
        ]
        headers[selector] = names[selector]
        headers[f"{selector}_pub"] = f"{names[selector]} (published)"
    return out, headers


def _optics_columns(df: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame({"configuration": df["configuration"], "seeds": df["seeds"]})
    out["final_loss"] = [
        _ours(row, _loss(row.final_loss, row.final_loss_sd, row.seeds)) for _, row in df.iterrows()
    ]
    out["above_c"] = [_ours(row, _signed(row.above_c)) for _, row in df.iterrows()]
    return out


def show_optics(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    out = _optics_columns(df)
    out["outcome"] = df["outcome"]
    out["clip"] = [_ours(row, _percent(row.clip_rate)) for _, row in df.iterrows()]
    gpu = df["published_tinystories_loss"].notna()
    cpu = df["published_tinyshakespeare_loss"].notna()
    out["gpu"] = [_published(v, _loss(v)) for v in df["published_tinystories_loss"]]
    out["gpu_above_c"] = [_published(v, _signed(v)) for v in df["published_tinystories_above_c"]]
    out["gpu_clip"] = [
        _published_clip(v, recorded)
        for v, recorded in zip(df["published_tinystories_clip_rate"], gpu, strict=True)
    ]
    out["cpu"] = [_published(v, _loss(v)) for v in df["published_tinyshakespeare_loss"]]
    out["cpu_above_c"] = [
        _published(v, _signed(v)) for v in df["published_tinyshakespeare_above_c"]
    ]
    out["cpu_clip"] = [
        _published_clip(v, recorded)
        for v, recorded in zip(df["published_tinyshakespeare_clip_rate_interval"], cpu, strict=True)
    ]
    headers = {
        "configuration": "Configuration",
        "seeds": "Seeds",
        "final_loss": "Final loss",
        "above_c": "Above C",
        "outcome": "Outcome",
        "clip": "Clip rate (whole run)",
        "gpu": "Published (TinyStories GPU)",
        "gpu_above_c": "GPU above C",
        "gpu_clip": "GPU clip (whole run)",
        "cpu": "Published (TinyShakespeare CPU)",
        "cpu_above_c": "CPU above C",
        "cpu_clip": "CPU clip (last interval)",
    }
    return out, headers


def show_switch(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    out = _optics_columns(df)
    out["above_e_sent"] = [_ours(row, _signed(row.above_e_sent)) for _, row in df.iterrows()]
    out["clip"] = [_ours(row, _percent(row.clip_rate)) for _, row in df.iterrows()]
    switch = df["configuration"].str.startswith("E'")
    for column, source in (
        ("gpu", "published_tinystories_loss"),
        ("cpu", "published_tinyshakespeare_loss"),
    ):
        out[column] = [
            NEW if is_switch else _published(v, _loss(v))
            for v, is_switch in zip(df[source], switch, strict=True)
        ]
    headers = {
        "configuration": "Configuration",
        "seeds": "Seeds",
        "final_loss": "Final loss",
        "above_c": "Above C",
        "above_e_sent": "Above E sent",
        "clip": "Clip rate (whole run)",
        "gpu": "Published (TinyStories GPU)",
        "cpu": "Published (TinyShakespeare CPU)",
    }
    return out, headers


def _bytes(value: float) -> str:
    return DASH if _missing(value) else f"{value / 1e6:.2f} MB"


def _steps(value: float, reached: str) -> str:
    return f"not reached ({reached})" if _missing(value) else f"{value:.0f} ({reached})"


def _share(value: float, sd: float = math.nan, seeds: int = 1) -> str:
    if _missing(value):
        return DASH
    return f"{value:.2e} ± {sd:.1e}" if seeds > 1 else f"{value:.2e}"


def _against_topk(df: pd.DataFrame) -> pd.DataFrame:
    """Configuration, seeds, final loss and how far above top-k: sections (f) and (h)."""
    out = pd.DataFrame({"configuration": df["configuration"], "seeds": df["seeds"]})
    out["final_loss"] = [
        _loss(row.final_loss, row.final_loss_sd, row.seeds) for _, row in df.iterrows()
    ]
    out["above_topk"] = [
        f"{_signed(row.above_topk)} ({row.vs_topk})" if row.vs_topk != "reference" else "reference"
        for _, row in df.iterrows()
    ]
    return out


def show_selections(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    out = _against_topk(df)
    out["gap_closed"] = [DASH if _missing(v) else f"{v:.0%}" for v in df["gap_closed"]]
    out["steps_to_c"] = [
        _steps(v, r) for v, r in zip(df["steps_to_c"], df["reached_c"], strict=True)
    ]
    out["payload_to_c"] = [_bytes(v) for v in df["payload_to_c_bytes"]]
    out["steps_to_topk"] = [
        _steps(v, r) for v, r in zip(df["steps_to_topk"], df["reached_topk"], strict=True)
    ]
    out["payload_per_step"] = [f"{v:,.0f}" for v in df["payload_per_step_bytes"]]
    out["kept"] = [DASH if _missing(v) else f"{v:.3f}" for v in df["momentum_kept"]]
    out["kept_topk"] = [DASH if _missing(v) else f"{v:.3f}" for v in df["momentum_kept_topk"]]
    headers = {
        "configuration": "Configuration",
        "seeds": "Seeds",
        "final_loss": "Final loss",
        "above_topk": "Above top-k",
        "gap_closed": "Gap from C closed",
        "steps_to_c": "Steps to C's final",
        "payload_to_c": "Payload to C's final",
        "steps_to_topk": "Steps to top-k's final",
        "payload_per_step": "Payload/step (B, mean)",
        "kept": "Momentum kept (own band)",
        "kept_topk": "Momentum kept (top-k)",
    }
    return out, headers


def show_questions(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    headers = {"question": "Question", "measured": "Measured", "verdict": "Verdict"}
    return df[list(headers)].copy(), headers


def show_optics_oob(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    out = pd.DataFrame({"configuration": df["configuration"], "seeds": df["seeds"]})
    out["final_loss"] = [
        _loss(row.final_loss, row.final_loss_sd, row.seeds) for _, row in df.iterrows()
    ]
    out["above_c"] = [
        f"{_signed(row.above_c)} ({row.vs_c})" if row.vs_c != "reference" else "reference"
        for _, row in df.iterrows()
    ]
    out["clip"] = [_percent(v) for v in df["clip_rate"]]
    names = {
        "oob_sent_share": "Out-of-band sent",
        "oob_quant_share": "… without readout noise",
        "fb_removed_exact_share": "Removed by fb exact",
        "fb_removed_sent_share": "Removed by fb sent",
    }
    headers = {
        "configuration": "Configuration",
        "seeds": "Seeds",
        "final_loss": "Final loss",
        "above_c": "Above C",
        "clip": "Clip rate",
    }
    for column, title in names.items():
        out[column] = [
            _share(row[column], row[f"{column}_sd"], row[f"{column}_seeds"])
            + ("" if row[f"{column}_seeds"] in (0, row.seeds) else f" (n={row[f'{column}_seeds']})")
            for _, row in df.iterrows()
        ]
        headers[column] = title
    return out, headers


def show_local_sgd(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    out = _against_topk(df)
    out["steps_to_c"] = [
        _steps(v, r) for v, r in zip(df["steps_to_c"], df["reached_c"], strict=True)
    ]
    out["payload_to_c"] = [_bytes(v) for v in df["payload_to_c_bytes"]]
    out["vs_adamw"] = [DASH if _missing(v) else f"{v:.3f}x" for v in df["payload_to_c_vs_adamw"]]
    out["steps_to_topk"] = [
        _steps(v, r) for v, r in zip(df["steps_to_topk"], df["reached_topk"], strict=True)
    ]
    out["payload_to_topk"] = [_bytes(v) for v in df["payload_to_topk_bytes"]]
    out["syncs"] = [
        f"{s:.0f} of {n:.0f}" for s, n in zip(df["sync_steps"], df["steps"], strict=True)
    ]
    headers = {
        "configuration": "Configuration",
        "seeds": "Seeds",
        "final_loss": "Final loss",
        "above_topk": "Above top-k",
        "steps_to_c": "Steps to C's final",
        "payload_to_c": "Payload to C's final",
        "vs_adamw": "… vs AdamW",
        "steps_to_topk": "Steps to top-k's final",
        "payload_to_topk": "Payload to top-k's final",
        "syncs": "Steps that send",
        "status": "Status",
    }
    return out, headers


SHOW = {
    "final_loss": show_final_loss,
    "ordering": show_ordering,
    "ordering_claims": show_claims,
    "energy": show_energy,
    "energy_claims": show_claims,
    "optics": show_optics,
    "optics_claims": show_claims,
    "switch": show_switch,
    "selections": show_selections,
    "selection_claims": show_questions,
    "optics_oob": show_optics_oob,
    "optics_oob_claims": show_questions,
    "local_sgd": show_local_sgd,
    "local_sgd_claims": show_questions,
}


def emit_findings(
    sections: dict[str, pd.DataFrame], fmt: str, out: TextIO | None = None, quiet: bool = False
) -> None:
    """Print every section: JSON as one document, else a titled table each (the scale in the
    title when all runs share one, else as a first column)."""
    out = out or sys.stdout
    if fmt == "json":
        emit_json(
            {
                section: [
                    dict(zip(df.columns, row, strict=True)) for row in df.itertuples(index=False)
                ]
                for section, df in sections.items()
            },
            out,
        )
        return
    scales = list(dict.fromkeys(pd.concat([df["scale"] for df in sections.values()])))
    out.write(f"Scale: {'; '.join(scales)}\n\n")
    for section in SECTIONS:
        df = sections[section]
        if df.empty:  # no run of the section's kind (e.g. only AdamW traces): say so
            shown = pd.DataFrame({"note": ["not recorded: no runs of this kind"]})
            title = None if quiet else TITLES[section]
            emit_table(shown, fmt, title=title, headers={"note": "Note"}, out=out)
            out.write("\n" if section != SECTIONS[-1] else "")
            continue
        shown, headers = SHOW[section](df)
        if len(scales) > 1:
            shown.insert(0, "scale", df["scale"].to_numpy())
            headers = {"scale": "Scale", **headers}
        emit_table(shown, fmt, title=None if quiet else TITLES[section], headers=headers, out=out)
        if section != SECTIONS[-1]:
            out.write("\n")


def findings_command(
    paths: list[Path] = typer.Argument(..., help="Folders (or files) of recorded traces."),
    gap_nats: float = typer.Option(
        FIXED_BAND_GAP_NATS,
        "--gap-nats",
        help="The gap above top-k the claim 'every fixed band ends more than X above top-k' "
        "tests (the deck says a nat).",
    ),
    markdown: bool = typer.Option(False, "--markdown", help="Print markdown tables."),
    json_: bool = typer.Option(False, "--json", help="Print one JSON document (raw numbers)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
) -> int:
    """Our runs beside the published results: (a) final losses, (b) ordering and the deck's
    loss claims, (c) captured energy, (d) the optics, (e) E' at a switch, (f) selections
    without comparisons, (g) the optics hypothesis, (h) local SGD."""
    fmt = output_format(markdown=markdown, json_=json_)
    if not math.isfinite(gap_nats) or gap_nats < 0:
        raise TransitsimError(f"--gap-nats must be a non-negative number, got {gap_nats}")
    traces = [read_trace(path) for path in find_traces(paths)]
    if not traces:
        raise TransitsimError(f"no traces in {', '.join(map(str, paths))}")
    emit_findings(findings(traces, gap_nats), fmt, quiet=quiet)
    return 0


def register(app: typer.Typer) -> None:
    """Add `transitsim findings` to the main app."""
    app.command("findings")(findings_command)
