"""Hostile loss logs for `traces import --loss` (issue 45): a ragged CSV row is refused with its
line number (never shifted into other columns), numbers beyond any float are one line, and a
TensorBoard log that also logs a scalar named `step` reads its loss tag right."""

import sys
import types
from pathlib import Path

import pandas as pd
import pytest
from cli_run import assert_refused, run_cli
from test_byo_cli import make_profile, write_profile

from transitsim.base.errors import TransitsimError
from transitsim.traces.loss_logs import read_loss_log


def _import(tmp_path: Path, loss: Path) -> tuple[list[str], int, str]:
    profile = write_profile(tmp_path / "p.json.gz", make_profile())
    argv = ["traces", "import", "--profile", str(profile), "--loss", str(loss), "-o"]
    argv.append(str(tmp_path / "out"))
    code, _, stderr = run_cli(argv)
    return argv, code, stderr


def test_a_csv_row_with_extra_fields_is_refused_with_its_line(tmp_path) -> None:
    """Regression (issue 45): `1,3.0,9,9` under `step,loss` became step 9, loss 9."""
    loss = tmp_path / "loss.csv"
    loss.write_text("step,loss\n1,3.0,9,9\n2,2.9\n3,2.8\n")
    argv, code, stderr = _import(tmp_path, loss)
    assert_refused(argv, code, stderr, tmp_path / "out")
    assert "loss.csv:2: 4 field(s) where the header has 2" in stderr


def test_a_short_row_inside_a_csv_is_refused_with_its_line(tmp_path) -> None:
    loss = tmp_path / "loss.csv"
    loss.write_text("step,loss,val_loss\n1,3.0,3.1\n\n2,2.9\n3,2.8,2.9\n")
    with pytest.raises(TransitsimError, match=r"loss.csv:4: 2 field\(s\) where the header has 3"):
        read_loss_log(loss)


def test_a_cut_last_csv_row_is_dropped_with_a_note(tmp_path) -> None:
    loss = tmp_path / "loss.csv"
    loss.write_text("step,loss,val_loss\n1,3.0,3.1\n2,2.9,3.0\n3,2.")
    log = read_loss_log(loss)
    assert log.table["step"].tolist() == [1, 2]
    assert log.table["train_loss"].tolist() == [3.0, 2.9]
    assert any("last line (4) is cut short" in note for note in log.notes)


@pytest.mark.parametrize("where", ["step", "loss"])
def test_jsonl_integers_beyond_any_float_are_one_line(tmp_path, where: str) -> None:
    """Regression (issue 45): float(10**400) raised OverflowError (a traceback)."""
    record = {"step": 1, "loss": 2.0}
    record[where] = "HUGE"
    loss = tmp_path / "loss.jsonl"
    text = pd.Series([record]).to_json(orient="records", lines=True)
    loss.write_text(text.replace('"HUGE"', "1" + "0" * 400))
    argv, code, stderr = _import(tmp_path, loss)
    assert_refused(argv, code, stderr, tmp_path / "out")
    assert f"column {where!r} holds" in stderr and "not a number" in stderr


def _fake_tbparse(monkeypatch, scalars: pd.DataFrame) -> None:
    """tbparse (the optional byo extra) as far as the reader uses it: SummaryReader(path).scalars,
    the long table of (step, tag, value) that tbparse returns."""

    class SummaryReader:
        def __init__(self, path: str, pivot: bool = False) -> None:
            self.scalars = scalars

    monkeypatch.setitem(sys.modules, "tbparse", types.SimpleNamespace(SummaryReader=SummaryReader))


def test_a_tensorboard_scalar_named_step_does_not_collide(tmp_path, monkeypatch) -> None:
    """Regression (issue 45): a log that also logs a scalar named `step` stopped with "cannot
    insert step, already exists" (a traceback)."""
    rows = [(s, tag, value) for s in (10, 20, 30)
            for tag, value in (("train/loss", 3 - s / 100), ("step", float(s * 64)))]  # fmt: skip
    _fake_tbparse(monkeypatch, pd.DataFrame(rows, columns=["step", "tag", "value"]))
    events = tmp_path / "events.out.tfevents.1"
    events.write_bytes(b"\0")
    log = read_loss_log(events)
    assert log.table["step"].tolist() == [10, 20, 30]  # the events' own steps
    assert log.table["train_loss"].tolist() == pytest.approx([2.9, 2.8, 2.7])
    argv, code, stderr = _import(tmp_path, events)
    assert code == 0, stderr
    chosen = read_loss_log(events, {"step": "step (tag)", "train_loss": "train/loss"})
    assert chosen.table["step"].tolist() == [640, 1280, 1920]  # the scalar, where asked for
