"""Importing the published experiment's JSONL logs: what each record becomes, and how damaged,
short or diverged logs import what is there and say so."""

import json
import math
from pathlib import Path

import logfactory as lf
import pandas as pd
import pytest

from transitsim.base.errors import TransitsimError
from transitsim.traces.experiment_logs import TIMING_NOTE, import_log, import_logs
from transitsim.traces.format import read_trace

STEPS = [200 * i for i in range(1, 16)]


def losses(n: int = 15, start: float = 4.0) -> list[float]:
    return [start - 0.1 * i for i in range(n)]


def test_complete_topk_log_becomes_metadata_rows_and_diagnostics(tmp_path: Path) -> None:
    log = lf.write_log(tmp_path, losses(), variant="topk", seed=1)
    result = import_log(log)
    assert result.warnings == []
    meta = result.trace.meta
    config = lf.run_config(variant="topk", seed=1)
    assert meta["name"] == "tinystories-topk-k16-2d64-lr0.001-s1"
    assert meta["variant"] == "B"
    assert meta["variant_params"] == {
        "band": "low",
        "chunk_mode": "2d",
        "chunk": 64,
        "keep": 0.0625,
        "lr": 0.001,
        "enob": 8.0,
        "planes": 8,
        "kappa": 4.0,
        "fs_every": 0,  # the older config lacks the key
        "feedback": "exact",
    }
    assert meta["config"] == config
    assert meta["model"] == {"n_layer": 8, "n_head": 6, "n_embd": 384, "block": 256, "vocab": 4096}
    assert (meta["workers"], meta["batch"], meta["context"], meta["seed"]) == (8, 8, 256, 1)
    assert meta["corpus"] == "tinystories"
    assert meta["tokenizer"] == "byte-level BPE, 4096 tokens"
    assert meta["hardware"] == lf.HARDWARE
    assert meta["versions"] == {"torch": "2.11.0+cu130", "python": "3.13.15"}
    assert meta["n_params"] == lf.N_PARAMS
    assert meta["dense_bytes_per_step"] == lf.DENSE_BYTES
    assert meta["payload_bytes_per_step"] == lf.TOPK_BYTES
    assert meta["payload_bytes_int64_per_step"] == lf.TOPK_INT64_BYTES
    assert meta["wire_bytes_per_step"] == 7 * lf.TOPK_BYTES
    assert meta["steps_planned"] == 3000
    assert (meta["rows"], meta["origin"], meta["status"]) == (
        "evaluated_steps",
        "import",
        "complete",
    )
    assert meta["timing"] == TIMING_NOTE
    assert meta["notes"] == []

    steps = result.trace.steps
    assert steps["step"].tolist() == STEPS
    assert steps["val_loss"].tolist() == pytest.approx(losses())
    assert steps["train_loss"].tolist() == pytest.approx([v + 0.5 for v in losses()])
    assert steps["lr"].iloc[-1] == pytest.approx(0.001 * 0.5)
    assert set(steps["payload_bytes"]) == {lf.TOPK_BYTES}
    assert set(steps["payload_int64_bytes"]) == {lf.TOPK_INT64_BYTES}
    assert steps["wire_bytes"].tolist() == pytest.approx([7.0 * lf.TOPK_BYTES] * 15)
    assert steps["wall_s"].tolist() == pytest.approx([lf.SECONDS_PER_STEP] * 15)
    assert steps["compute_s"].tolist() == pytest.approx([lf.SECONDS_PER_STEP / 8] * 15)
    assert set(steps["compress_s"]) == {0.0}
    assert set(steps["collective"]) == {"all_gather"}
    assert not steps["reducible"].any()
    assert "clip_rate" not in steps.columns

    diag = result.trace.diagnostics
    assert len(diag) == 15 * 3 * 4 * 5
    one = diag[(diag["step"] == 400) & (diag["source"] == "momentum") & (diag["group"] == "mlp")]
    assert dict(zip(one["selector"], one["share"], strict=True)) == pytest.approx(
        {s: lf.share("momentum", "mlp", s, 400) for s in lf.SELECTORS}
    )


def test_per_step_figures_come_from_the_cumulative_counters(tmp_path: Path) -> None:
    """Irregular intervals: per-step values are deltas over the steps each row stands for."""
    records = lf.records(losses(3), variant="band", eval_every=200, steps=600)
    seconds = [0, 30.0, 110.0, 140.0]  # cumulative at steps 0, 200, 400, 600
    evals = [r for r in records if r["type"] == "eval"]
    for record, total in zip(evals, seconds[1:], strict=True):
        record["seconds"] = total
    log = tmp_path / "run.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    steps = import_log(log).trace.steps
    assert steps["wall_s"].tolist() == pytest.approx([0.15, 0.4, 0.15])
    assert steps["compute_s"].tolist() == pytest.approx([0.15 / 8, 0.4 / 8, 0.15 / 8])


@pytest.mark.parametrize(
    ("kw", "variant", "collective", "reducible"),
    [
        ({"variant": "adamw"}, "A", "all_reduce", True),
        ({"variant": "topk"}, "B", "all_gather", False),
        (
            {"variant": "band", "band": "low", "chunk_mode": "1d", "chunk": 256},
            "C",
            "all_gather",
            True,
        ),
        ({"variant": "calib", "band": "calib"}, "D", "all_gather", True),
        ({"variant": "optics", "chunk_mode": "1d", "chunk": 256}, "E", "all_gather", True),
        ({"variant": "band", "band": "zigzag"}, "F", "all_gather", True),
        ({"variant": "band", "band": "high"}, "F", "all_gather", True),
        ({"variant": "band", "band": "random"}, "F", "all_gather", True),
    ],
)
def test_variant_ids_and_collectives(tmp_path: Path, kw, variant, collective, reducible) -> None:
    trace = import_log(lf.write_log(tmp_path, losses(), **kw)).trace
    assert trace.variant == variant
    assert set(trace.steps["collective"]) == {collective}
    assert set(trace.steps["reducible"]) == {reducible}
    payload, _, wire = lf.bytes_per_step(kw["variant"])
    assert set(trace.steps["payload_bytes"]) == {payload}
    assert trace.steps["wire_bytes"].iloc[-1] == pytest.approx(wire)
    assert trace.diagnostics.empty == (variant == "A")


def test_optics_log_keeps_clip_rates_and_new_config_keys(tmp_path: Path) -> None:
    log = lf.write_log(
        tmp_path,
        losses(),
        variant="optics",
        chunk_mode="1d",
        chunk=256,
        fs_every=100,
        feedback="sent",
        enob=None,
    )
    trace = import_log(log).trace
    assert trace.name == "tinystories-optics-low-k16-1d256-enobNone-p8-agc100-fbsent-lr0.001-s0"
    params = trace.meta["variant_params"]
    assert (params["fs_every"], params["feedback"], params["enob"]) == (100, "sent", None)
    clip = trace.steps["clip_rate"]
    assert math.isnan(clip.iloc[0])
    assert clip.iloc[1:].tolist() == pytest.approx([0.01 * i for i in range(1, 15)])
    assert trace.steps["clip_rate_interval"].iloc[-1] == pytest.approx(0.28)


def test_crashed_run_imports_what_is_there(tmp_path: Path) -> None:
    log = lf.write_log(tmp_path, losses(7), done=False)
    result = import_log(log)
    assert result.trace.meta["status"] == "incomplete"
    assert result.trace.steps["step"].iloc[-1] == 1400
    assert result.trace.meta["notes"] == ["ended early at step 1400 of 3000"]
    assert result.warnings == [f"{log}: ended early at step 1400 of 3000"]


def test_diverged_run_is_noted_at_its_first_diverged_evaluation(tmp_path: Path) -> None:
    values = losses(12) + [60.0, 214.6471405029297, 344.38779067993164]
    result = import_log(lf.write_log(tmp_path, values, variant="optics"))
    assert result.trace.meta["status"] == "complete"
    assert result.trace.meta["notes"] == ["diverged: val_loss 60.000 at step 2600"]
    assert result.trace.final_val_loss == pytest.approx(344.38779067993164)


def test_non_finite_losses_are_stored_as_inf_and_reported(tmp_path: Path) -> None:
    log = lf.write_log(tmp_path, losses(2) + [math.nan], steps=600, variant="optics")
    result = import_log(log)  # json writes the NaN token, as Python's json module does
    steps = result.trace.steps
    assert steps["val_loss"].iloc[-1] == math.inf
    assert steps["train_loss"].iloc[-1] == math.inf
    assert "diverged: val_loss nan at step 600" in result.trace.meta["notes"]
    assert "non-finite val_loss stored as inf" in result.trace.meta["notes"]


def test_broken_last_line_is_ignored_and_reported(tmp_path: Path) -> None:
    log = lf.write_log(tmp_path, losses(5), done=False, broken_last_line=True)
    result = import_log(log)
    assert result.trace.steps["step"].tolist() == STEPS[:5]
    assert result.trace.meta["notes"] == [
        "ignored a broken last line",
        "ended early at step 1000 of 3000",
    ]
    assert len(result.warnings) == 2


def test_resumed_run_keeps_the_later_records(tmp_path: Path) -> None:
    records = lf.records(losses(4), variant="band", steps=800, done=False)
    again = [json.loads(json.dumps(r)) for r in records if r["type"] == "eval"][2:]
    for record in again:
        record["val_loss"] -= 1.0
    log = tmp_path / "resumed.jsonl"
    lines = records + again + [{"type": "done", "step": 800, "seconds": 200.0}]
    log.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    result = import_log(log)
    assert result.trace.steps["step"].tolist() == [200, 400, 600, 800]
    assert result.trace.steps["val_loss"].tolist() == pytest.approx([4.0, 3.9, 2.8, 2.7])
    assert result.trace.meta["status"] == "complete"
    assert result.trace.meta["notes"] == ["resumed: re-logged steps replace the earlier records"]


def test_broken_middle_line_names_file_and_line(tmp_path: Path) -> None:
    log = lf.write_log(tmp_path, losses(3), steps=600)
    lines = log.read_text().splitlines()
    lines[2] = lines[2][:40]
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(TransitsimError, match=f"^{log}:3: broken line"):
        import_log(log)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty log"),
        ("\n\n", "empty log"),
        ('{"type": "eval", "step": 200}\n', "no config record"),
        ("step,val_loss\n200,3.0\n", "not a JSONL log"),
        (b"PAR1\x00\xff\xfe binary", "not a JSONL log"),
        ('[1, 2]\n{"type": "done"}\n', ":1: not a log record"),
    ],
)
def test_files_that_are_not_logs_are_errors(tmp_path: Path, content, message) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(TransitsimError, match=message) as error:
        import_log(log)
    assert str(log) in str(error.value)
    assert len(str(error.value).splitlines()) == 1


def test_config_without_evaluations_is_an_error(tmp_path: Path) -> None:
    log = lf.write_log(tmp_path, [], done=False)
    with pytest.raises(TransitsimError, match="no eval records"):
        import_log(log)


def test_unknown_variant_and_missing_fields_are_errors(tmp_path: Path) -> None:
    records = lf.records(losses(1), steps=200)
    records[0]["config"]["variant"] = "lion"
    log = tmp_path / "x.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in records))
    with pytest.raises(TransitsimError, match="unknown variant 'lion'"):
        import_log(log)
    records = lf.records(losses(1), steps=200)
    del records[-2]["seconds"]
    log.write_text("\n".join(json.dumps(r) for r in records))
    with pytest.raises(TransitsimError, match=f"{log}:3: eval record has no number 'seconds'"):
        import_log(log)


def test_missing_file_and_folder_are_errors(tmp_path: Path) -> None:
    with pytest.raises(TransitsimError, match="no such file"):
        import_log(tmp_path / "missing.jsonl")
    with pytest.raises(TransitsimError, match="is a folder"):
        import_log(tmp_path)


def test_import_logs_writes_named_traces_that_read_back_identically(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    first = lf.write_log(logs, losses(), variant="adamw", seed=0)
    lf.write_log(logs, losses(), variant="calib", band="calib", seed=2)
    out = tmp_path / "traces"
    results = import_logs([logs, first], out)  # a file named twice imports once
    assert sorted(p.name for p in out.iterdir()) == [
        "tinystories-adamw-lr0.003-s0.parquet",
        "tinystories-calib-calib-k16-2d64-lr0.001-s2.parquet",
    ]
    for result in results:
        again = read_trace(result.trace.path)
        assert again.meta == result.trace.meta
        pd.testing.assert_frame_equal(again.steps, result.trace.steps, check_dtype=False)
        pd.testing.assert_frame_equal(again.diagnostics, result.trace.diagnostics)


def test_import_is_deterministic(tmp_path: Path) -> None:
    log = lf.write_log(tmp_path, losses(), variant="band")
    a = import_logs([log], tmp_path / "a")[0].trace.path
    b = import_logs([log], tmp_path / "b")[0].trace.path
    assert a.read_bytes() == b.read_bytes()


def test_two_logs_of_one_run_name_write_nothing(tmp_path: Path) -> None:
    for folder in ("gpu", "gpu-lr"):
        (tmp_path / folder).mkdir()
        lf.write_log(tmp_path / folder, losses(), variant="adamw")
    with pytest.raises(TransitsimError, match="both run 'tinystories-adamw-lr0.003-s0'"):
        import_logs([tmp_path / "gpu", tmp_path / "gpu-lr"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_bad_log_among_good_ones_writes_nothing(tmp_path: Path) -> None:
    lf.write_log(tmp_path, losses(), variant="adamw")
    (tmp_path / "zz.jsonl").write_text("")
    with pytest.raises(TransitsimError, match="empty log"):
        import_logs([tmp_path], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(TransitsimError, match="no .jsonl logs"):
        import_logs([tmp_path / "empty"], tmp_path / "out")
    with pytest.raises(TransitsimError, match="no such file or folder"):
        import_logs([tmp_path / "nowhere"], tmp_path / "out")
