"""`transitsim findings` sections (f) and (g) (issue 14) on tiny traces with known losses."""

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from transitsim.commands import findings_cmd
from transitsim.findings.selection import compare, mean_sd
from transitsim.findings.tables import findings
from transitsim.traces.format import read_trace, write_trace

STEPS = 60
SCALE = dict(dataset="synthetic", n_layer=1, n_embd=64, block=64, steps=STEPS)


def write_run(
    folder: Path,
    variant: str,
    params: dict[str, Any],
    name: str,
    seed: int,
    final: float,
    payload: int = 500,
    broadcast_every: int = 0,
    oob: float | None = None,
) -> Path:
    """A trainer-like trace: val loss every 10 steps falling linearly to `final`."""
    step = np.arange(1, STEPS + 1)
    frame = pd.DataFrame(
        {
            "step": step,
            "train_loss": final + 0.1 + (1 - step / STEPS),
            "val_loss": np.where(step % 10 == 0, final + 2.0 * (1 - step / STEPS), np.nan),
            "lr": 1e-3,
            "payload_bytes": payload,
            "collective": "all_gather",
            "reducible": variant != "B",
            "compute_s": 0.01,
            "compress_s": 0.001,
        }
    )
    if broadcast_every:
        chosen = (step % broadcast_every == 0) & (step < STEPS)
        frame["broadcast_bytes"] = np.where(chosen, 100, 0)
        frame["payload_bytes"] = payload + frame["broadcast_bytes"]
    if oob is not None:
        active = step > 10
        frame["oob_sent_share"] = np.where(active, 2 * oob, np.nan)
        frame["oob_quant_share"] = np.where(active, oob, np.nan)
        frame["fb_removed_exact_share"] = np.where(active, 0.01, np.nan)
        frame["fb_removed_sent_share"] = np.where(active, 0.01 - 2 * oob, np.nan)
    meta = {
        "name": f"{name}-s{seed}",
        "variant": variant,
        "variant_params": {"lr": 1e-3, "keep": 1 / 16, "warmup": 5, **params},
        "config": {**SCALE, "warmup": 5, "workers": 8, "batch": 2, "seed": seed},
        "seed": seed,
        "workers": 8,
        "n_params": 57_536,
        "dense_bytes_per_step": 115_072,
        "rows": "every_step",
        "origin": "trainer",
        "status": "complete",
        "notes": [],
    }
    return write_trace(folder / f"{name}-s{seed}.parquet", frame, meta)


TOPK = dict(algorithm="topk", chunk_mode="2d", chunk=64)
BAND = dict(algorithm="band", band="low", chunk_mode="1d", chunk=256)
CHUNKS = dict(chunk_mode="1d", chunk=256)
RECAL = dict(algorithm="moving", band="recal", selection="recal", select_every=10, **CHUNKS)
ROTATING = dict(algorithm="moving", band="rotating", selection="rotating", select_every=1)


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("study")
    chunks = dict(chunk_mode="1d", chunk=256)
    for seed, jitter in enumerate((0.0, 0.01, -0.01)):
        write_run(folder, "B", TOPK, "t-topk", seed, 2.0 + jitter, payload=1000)
        write_run(folder, "C", BAND, "t-band", seed, 2.5 + jitter)
        write_run(folder, "G", {**RECAL}, "t-recal", seed, 2.2 + jitter, broadcast_every=10)
        write_run(folder, "G", {**ROTATING, **chunks}, "t-rot", seed, 2.0 + 2 * jitter)
        optics = dict(
            algorithm="optics", band="low", enob=8.0, planes=8, fs_every=50, feedback="sent"
        )
        # more out-of-band energy sent, lower loss: r = -1 across these three runs
        oob = (1e-3, 2e-3, 0.5e-3)[seed]
        write_run(folder, "E", {**optics, **chunks}, "t-opt", seed, 2.45 - 20 * oob, oob=oob)
    return folder


@pytest.fixture(scope="module")
def sections(study: Path) -> dict[str, pd.DataFrame]:
    traces = [read_trace(path) for path in sorted(study.glob("*.parquet"))]
    return findings(traces)


def row(df: pd.DataFrame, start: str) -> pd.Series:
    hits = df[df.iloc[:, 1].astype(str).str.startswith(start)]
    assert len(hits) == 1, (start, df.iloc[:, 1].tolist())
    return hits.iloc[0]


def test_compare_uses_two_standard_errors_and_says_n1():
    assert compare((2.0, 0.01, 3), (2.0, 0.01, 3))[1] == "within noise"
    assert compare((2.2, 0.01, 3), (2.0, 0.01, 3))[1] == "higher"
    assert compare((1.9, 0.01, 3), (2.0, 0.01, 3))[1] == "lower"
    assert compare((1.9, 0.0, 1), (2.0, 0.01, 3))[1] == "lower (n=1, no spread)"
    assert compare((1.9, 0.0, 1), (math.nan, math.nan, 0))[1] == "not recorded"
    assert mean_sd([1.0, math.nan, 3.0]) == (2.0, pytest.approx(math.sqrt(2)), 2)


def test_selections_table(sections):
    table = sections["selections"]
    topk, band = row(table, "B "), row(table, "C ")
    recal, rotating = row(table, "G recal"), row(table, "G rotating")
    assert topk.vs_topk == "reference" and topk.seeds == 3
    assert recal.final_loss == pytest.approx(2.2) and recal.vs_topk == "higher"
    assert recal.gap_closed == pytest.approx(0.6)
    assert rotating.vs_topk == "within noise"
    assert band.gap_closed == pytest.approx(0.0)
    # C's mean final is 2.5: loss final + 2 (1 - s/60) <= 2.5 first at the evaluation of step 50
    # for top-k (final 2.0 +- 0.01); C itself gets there at step 60 on two seeds of three
    assert topk.steps_to_c == 50
    assert math.isnan(band.steps_to_c) and band.reached_c == "2/3"  # 2.51 > 2.5 on seed 1
    assert topk.payload_to_c_bytes == 50 * 1000
    # recal pays its broadcasts: 100 bytes at steps 10 .. 50 (not at the last step)
    assert recal.payload_to_c_bytes == pytest.approx(np.mean([60 * 500 + 5 * 100] * 3))
    assert recal.payload_to_c_vs_topk == pytest.approx((30_000 + 500) / 50_000, rel=0.05)
    assert math.isnan(band.steps_to_topk) and band.reached_topk == "0/3"


def test_selection_claims(sections):
    claims = sections["selection_claims"]
    final, steps, per_byte = (claims.iloc[i] for i in range(3))
    assert "G rotating" in final.measured and final.verdict == "yes"
    assert steps.verdict == "yes"  # rotating reaches C's final at 50 steps, as top-k does
    assert per_byte.verdict == "yes" and "G rotating" in per_byte.measured  # 25 kB vs 50 kB


def test_optics_oob(sections):
    table = sections["optics_oob"]
    optics = row(table, "E ")
    assert optics.seeds == 3 and optics.vs_c == "lower"
    assert optics.oob_quant_share == pytest.approx(np.mean([1e-3, 2e-3, 0.5e-3]))
    assert optics.oob_quant_share_seeds == 3
    claims = sections["optics_oob_claims"]
    assert claims.iloc[0].verdict.startswith("1 of 1")
    assert "r with loss above C = -1.00" in claims.iloc[1].measured
    assert claims.iloc[1].verdict.startswith("consistent")
    assert claims.iloc[2].verdict == "sent removes less"


def test_sections_say_not_recorded_without_their_runs(tmp_path):
    write_run(tmp_path, "C", BAND, "t-band", 0, 2.5)
    found = findings([read_trace(path) for path in tmp_path.glob("*.parquet")])
    assert set(found["selection_claims"]["verdict"]) == {"not recorded"}
    assert "not recorded" in found["optics_oob_claims"].iloc[0].measured


def test_markdown_prints_the_new_sections(study, capsys):
    traces = [read_trace(path) for path in sorted(study.glob("*.parquet"))]
    findings_cmd.emit_findings(findings(traces), "markdown")
    out = capsys.readouterr().out
    assert "(f) Does a comparison-free selection close the gap to top-k?" in out
    assert "(g) The optics hypothesis" in out and "n=3" in out
