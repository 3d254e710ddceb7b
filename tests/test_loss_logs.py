"""Loss logs in (issue 23, item 2): CSV, JSONL and TensorBoard events, columns named or
recognised, rows of one step merged; every malformed log one line, exit 2, nothing written."""

import json
import math
from pathlib import Path

import pytest

from transitsim.base.errors import TransitsimError
from transitsim.traces.loss_logs import parse_columns, read_loss_log


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_with_eval_rows_merges_them_into_their_steps(tmp_path) -> None:
    log = write(
        tmp_path / "l.csv",
        "step,train_loss,val_loss\n1,3.0,\n2,2.5,\n2,,2.75\n3,2.0,\n4,1.5,1.9\n",
    )
    read = read_loss_log(log)
    assert read.table["step"].tolist() == [1, 2, 3, 4]
    assert read.table["train_loss"].tolist() == [3.0, 2.5, 2.0, 1.5]
    val = read.table["val_loss"].tolist()
    assert math.isnan(val[0]) and val[1] == 2.75 and math.isnan(val[2]) and val[3] == 1.9
    assert read.every_step
    assert any("merged" in note for note in read.notes)


@pytest.mark.parametrize(
    ("header", "roles"),
    [
        ("iter,loss", {"step": "iter", "train_loss": "loss"}),
        ("global_step;train/loss;eval/loss;lr", None),
        ("Step\tLoss", {"step": "Step", "train_loss": "Loss"}),
    ],
)
def test_common_column_names_are_recognised(tmp_path, header: str, roles) -> None:
    sep = ";" if ";" in header else "\t" if "\t" in header else ","
    width = len(header.split(sep))
    rows = [sep.join(str(v) for v in [s, 2.0 / s, 2.5 / s, 0.1][:width]) for s in (10, 20, 30)]
    read = read_loss_log(write(tmp_path / "l.csv", "\n".join([header, *rows]) + "\n"))
    assert read.table["step"].tolist() == [10, 20, 30]
    assert read.table["train_loss"].tolist() == pytest.approx([0.2, 0.1, 2 / 30])
    assert not read.every_step  # every 10th step: evaluated_steps rows
    if roles:
        assert {k: read.columns[k] for k in roles} == roles
    else:
        assert read.columns["val_loss"] == "eval/loss" and read.columns["lr"] == "lr"


def test_jsonl_with_named_columns_and_steps_from_zero(tmp_path) -> None:
    records = [{"it": i, "nll": 3.0 - i / 10} for i in range(5)] + [{"it": 4, "heldout": 2.8}]
    log = write(tmp_path / "l.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    read = read_loss_log(log, parse_columns("step=it,train_loss=nll,val_loss=heldout"))
    assert read.table["step"].tolist() == [1, 2, 3, 4, 5]  # shifted: a trace counts from 1
    assert read.table["val_loss"].iloc[-1] == 2.8
    assert read.table["val_loss"].iloc[:-1].isna().all()  # not evaluated, not diverged
    assert any("shifted by 1" in note for note in read.notes)


def test_a_log_of_validation_losses_only_uses_them_as_train_loss_and_says_so(tmp_path) -> None:
    read = read_loss_log(write(tmp_path / "l.csv", "step,val_loss\n100,3.0\n200,2.5\n"))
    assert read.table["train_loss"].tolist() == [3.0, 2.5]
    assert any("no training-loss column" in note for note in read.notes)


def test_diverged_losses_are_stored_as_inf(tmp_path) -> None:
    read = read_loss_log(write(tmp_path / "l.csv", "step,loss\n1,2.0\n2,nan\n3,inf\n"))
    assert read.table["train_loss"].tolist()[1:] == [math.inf, math.inf]
    jsonl = '{"step": 1, "loss": 2.0}\n{"step": 2, "loss": NaN}\n{"step": 3, "loss": null}\n'
    read = read_loss_log(write(tmp_path / "l.jsonl", jsonl))
    assert read.table["train_loss"].tolist() == [2.0, math.inf]  # step 3 logged no loss


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty loss log"),
        ("step,loss\n1,abc\n", "holds 'abc' at row 1: not a number"),
        ("epoch,loss\n1,2.0\n", "no step column"),
        ("step,accuracy\n1,0.5\n", "no loss column"),
        ("step,loss\n1,-0.5\n", "negative train_loss at step 1"),
        ("step,loss\n1.5,2.0\n", "whole numbers"),
        ('{"step": 1, "loss": 2}\n[1, 2]\n{"step": 3}\n', "one object a line"),
        ("step,loss\n\x00\x01,2\n", "binary data"),
    ],
)
def test_malformed_logs_are_one_line_errors(tmp_path, text: str, message: str) -> None:
    suffix = ".jsonl" if text.startswith("{") else ".csv"
    with pytest.raises(TransitsimError, match=message) as raised:
        read_loss_log(write(tmp_path / f"l{suffix}", text))
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("text", ["step", "step=", "epoch=e", "step=a,step=b"])
def test_bad_columns_option_is_one_line(text: str) -> None:
    with pytest.raises(TransitsimError, match="--columns"):
        parse_columns(text)


def test_named_column_that_is_absent_names_the_columns(tmp_path) -> None:
    log = write(tmp_path / "l.csv", "step,loss\n1,2.0\n")
    with pytest.raises(TransitsimError, match="no column 'val' for val_loss"):
        read_loss_log(log, parse_columns("val_loss=val"))


def test_tensorboard_events_are_read_through_the_byo_extra(tmp_path) -> None:
    pytest.importorskip("tbparse", reason="the byo extra (pip install 'transitsim[byo]') is absent")
    tensorboard = pytest.importorskip("torch.utils.tensorboard")
    writer = tensorboard.SummaryWriter(str(tmp_path / "tb"))
    for step in range(1, 6):
        writer.add_scalar("train/loss", 3.0 - step / 10, step)
        if step % 2 == 0:
            writer.add_scalar("eval/loss", 3.1 - step / 10, step)
    writer.close()
    read = read_loss_log(tmp_path / "tb")
    assert read.table["step"].tolist() == [1, 2, 3, 4, 5]
    assert read.table["train_loss"].tolist() == pytest.approx([2.9, 2.8, 2.7, 2.6, 2.5])
    assert read.table["val_loss"].iloc[1] == pytest.approx(2.9)
    assert read.table["val_loss"].iloc[[0, 2, 4]].isna().all()
    assert read.columns == {"step": "step", "train_loss": "train/loss", "val_loss": "eval/loss"}


def test_tensorboard_without_the_extra_says_how_to_install_it(tmp_path, monkeypatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_tbparse(name, *args, **kwargs):
        if name == "tbparse":
            raise ImportError("absent")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tbparse)
    (tmp_path / "tb").mkdir()
    with pytest.raises(TransitsimError, match=r"pip install 'transitsim\[byo\]'"):
        read_loss_log(tmp_path / "tb")
