"""`transitsim traces import|list|show` and `transitsim ladder`: output in every format, and one
line on stderr with exit code 2 for every kind of bad input."""

import io
import json
import subprocess
import sys
from pathlib import Path

import logfactory as lf
import pandas as pd
import pytest

from transitsim.cli import main

OPTICS = {"variant": "optics", "chunk_mode": "1d", "chunk": 256}


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    return exited.value.code, out, err


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """Logs of the known study (3 seeds of A-D, one F) plus a crashed and a diverged E run."""
    folder = tmp_path_factory.mktemp("cli")
    logs = folder / "logs"
    logs.mkdir()
    lf.write_study(logs)
    lf.write_log(logs, [4.5] * 7, done=False, fs_every=100, feedback="sent", **OPTICS)
    lf.write_log(logs, [4.5, 4.6, 70.0, 214.6471405029297], steps=800, **OPTICS)
    return folder


@pytest.fixture(scope="module")
def traces(study: Path) -> Path:
    out = study / "traces"
    with pytest.raises(SystemExit) as exited:
        main(["traces", "import", str(study / "logs"), "-o", str(out), "--json"])
    assert exited.value.code == 0
    return out


CRASHED = "tinystories-optics-low-k16-1d256-enob8.0-p8-agc100-fbsent-lr0.001-s0"
DIVERGED = "tinystories-optics-low-k16-1d256-enob8.0-p8-lr0.001-s0"


def test_import_prints_what_it_wrote_and_one_warning_line_each(study: Path, capsys) -> None:
    code, out, err = run(["traces", "import", str(study / "logs"), "-o", str(study / "t2")], capsys)
    assert code == 0
    assert err.splitlines() == [
        f"transitsim: warning: {study / 'logs' / CRASHED}.jsonl: ended early at step 1400 of 3000",
        f"transitsim: warning: {study / 'logs' / DIVERGED}.jsonl: "
        "diverged: val_loss 70.000 at step 600",
    ]
    assert "Imported 15 log(s)" in out
    assert len(list((study / "t2").glob("*.parquet"))) == 15


def test_list_table_shows_one_row_per_run(traces: Path, capsys) -> None:
    code, out, err = run(["traces", "list", str(traces)], capsys)
    assert (code, err) == (0, "")
    lines = [line for line in out.splitlines() if "tinystories-" in line]
    assert len(lines) == 15
    adamw = next(line for line in lines if "adamw-lr0.003-s1" in line)
    for text in ("AdamW", "3,000", "1.640", "31,666,944", "55,417,152", "complete"):
        assert text in adamw
    optics = next(line for line in lines if CRASHED in line)
    for text in ("optics enob8 p8 fs100 fb-sent", "1,400", "4.500", "incomplete"):
        assert text in optics
    diverged = next(line for line in lines if DIVERGED in line)
    assert "214.647" in diverged and "complete, diverged" in diverged
    order = [line.split("│")[3].strip() for line in lines]
    assert order == sorted(order)  # rows in variant order A..F


def test_list_csv_json_markdown(traces: Path, capsys) -> None:
    code, out, _ = run(["traces", "list", str(traces), "--csv"], capsys)
    frame = pd.read_csv(io.StringIO(out))
    assert code == 0 and len(frame) == 15
    row = frame[frame["name"] == "tinystories-band-low-k16-1d256-lr0.001-s1"].iloc[0]
    assert (row["variant"], row["params"], row["seed"]) == ("C", "low band 1d256", 1)
    assert row["final_val_loss"] == pytest.approx(3.15)
    assert row["payload_bytes_per_step"] == lf.BAND_BYTES
    assert row["wire_bytes_per_step"] == 7 * lf.BAND_BYTES

    code, out, _ = run(["traces", "list", str(traces), "--json"], capsys)
    records = json.loads(out)
    assert code == 0 and len(records) == 15
    assert records[0]["name"] == "tinystories-adamw-lr0.003-s0"
    assert records[0]["final_val_loss"] == pytest.approx(1.64)

    code, out, _ = run(["traces", "list", str(traces), "--markdown"], capsys)
    lines = out.splitlines()
    assert code == 0
    assert lines[2].startswith(
        "| Folder | Run | Var | Parameters | Seed | Steps | Final val loss |"
    )
    assert lines[3].startswith("|---|---|---|---|---:|---:|---:|")
    assert len([line for line in lines if line.startswith("| traces | tinystories-")]) == 15


def test_list_defaults_to_the_traces_folder(traces: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(traces.parent)
    code, out, _ = run(["traces", "list", "--json"], capsys)
    assert code == 0 and len(json.loads(out)) == 15


def test_show_in_every_format(traces: Path, capsys) -> None:
    path = str(traces / f"{DIVERGED}.parquet")
    code, out, _ = run(["traces", "show", path], capsys)
    assert code == 0
    for text in (DIVERGED, "optics enob8 p8", "214.647", "diverged: val_loss 70.000 at step 600"):
        assert text in out
    assert "estimated: wall-clock per step / workers" in out

    code, out, _ = run(["traces", "show", path, "--json", "--steps"], capsys)
    document = json.loads(out)
    assert document["meta"]["variant"] == "E"
    assert document["summary"]["final_val_loss"] == pytest.approx(214.6471405029297)
    assert document["summary"]["final_clip_rate"] == pytest.approx(0.03)
    assert [row["step"] for row in document["steps"]] == [200, 400, 600, 800]
    assert document["steps"][0]["clip_rate"] is None  # NaN is null in strict JSON

    code, out, _ = run(["traces", "show", path, "--csv"], capsys)
    fields = dict(pd.read_csv(io.StringIO(out)).itertuples(index=False))
    assert fields["last_step"] == "800" and fields["status"] == "complete, diverged"

    code, out, _ = run(["traces", "show", path, "--markdown", "--steps"], capsys)
    assert "| payload_bytes_per_step | 1,979,184 |" in out
    assert "| 800 | 215.147 | 214.647 |" in out


def test_ladder_prints_the_published_style_table(traces: Path, capsys) -> None:
    code, out, err = run(["ladder", str(traces), "--targets", "3.158,3.124,3.087,1.785"], capsys)
    assert (code, err) == (0, "")
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line}
    cells = {label: [c.strip() for c in line.split("│")[2:-1]] for label, line in rows.items()}
    assert cells["A AdamW"] == [
        "3",
        "400 (12.67 GB)",
        "400 (12.67 GB)",
        "400 (12.67 GB)",
        "2,000 (63.33 GB)",
    ]
    assert cells["B top-k 2d64"] == ["3", *["400 (1.58 GB)"] * 3, "– (0/3)"]
    assert cells["C low band 1d256"] == ["3", "2,667 (5.28 GB)", "– (2/3)", "– (0/3)", "– (0/3)"]
    assert cells["D calibrated band 2d64"][1:3] == ["2,533 (5.01 GB)", "2,667 (5.28 GB)"]
    assert cells["F random band 2d64"][1:4] == ["1,200 (2.38 GB)", *["1,400 (2.77 GB)"] * 2]
    assert list(cells) == [
        "A AdamW",
        "B top-k 2d64",
        "C low band 1d256",
        "D calibrated band 2d64",
        "E optics enob8 p8",
        "E optics enob8 p8 fs100 fb-sent",
        "F random band 2d64",
    ]
    assert "to 3.158" in out and "to 1.785" in out


def test_ladder_wire_markdown_csv_json_and_final_targets(traces: Path, capsys) -> None:
    code, out, _ = run(["ladder", str(traces), "-t", "3.158", "--wire", "--markdown"], capsys)
    assert code == 0
    assert "| A AdamW | 3 | 400 (22.17 GB) |" in out  # 400 x 1.75 x dense

    code, out, _ = run(["ladder", str(traces), "-t", "final:A,3.158", "--csv"], capsys)
    frame = pd.read_csv(io.StringIO(out))
    assert list(frame.columns) == [
        "config",
        "label",
        "variant",
        "target",
        "seeds",
        "reached",
        "steps",
        "payload_bytes",
        "wire_bytes",
        "steps_crossed",
        "steps_before",
    ]
    assert frame["target"].iloc[0] == pytest.approx(1.64)
    a = frame[(frame["variant"] == "A") & (frame["target"] == 1.64)].iloc[0]
    assert (a["reached"], a["steps"]) == ("3/3", 3000)

    code, out, _ = run(["ladder", str(traces), "-t", "3.124", "--json"], capsys)
    records = {r["label"]: r for r in json.loads(out)}
    assert records["C low band 1d256"]["reached"] == "2/3"
    assert records["C low band 1d256"]["steps"] is None
    assert records["D calibrated band 2d64"]["steps"] == pytest.approx(8000 / 3)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ladder", "{traces}", "-t", "final:Z"], "unknown configuration 'Z'"),
        (["ladder", "{traces}", "-t", "3.1,x"], "bad loss target 'x'"),
        (["ladder", "{traces}", "-t", "final:band"], "ambiguous"),
        (["ladder", "{traces}"], "--targets"),
        (["ladder", "{traces}", "{traces}", "-t", "3.0"], "appears twice"),
        (["ladder", "{empty}", "-t", "3.0"], "no traces in"),
        (["traces", "list", "{traces}", "--csv", "--json"], "choose one output format"),
        (["traces", "list", "{missing}"], "no such file or folder"),
        (["traces", "list", "{logs}/x.jsonl"], "not a Parquet file"),
        (["traces", "show", "{traces}"], "is a folder"),
        (["traces", "import", "{missing}"], "no such file or folder"),
        (["traces", "import", "{logs}/x.jsonl", "-o", "{out}"], "x.jsonl:2: broken line"),
        (["traces", "import", "{logs}/empty.jsonl", "-o", "{out}"], "empty log"),
        (["traces", "import", "{logs}/noconfig.jsonl", "-o", "{out}"], "no config record"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, traces, argv, message, capsys) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (tmp_path / "empty").mkdir()
    good = lf.write_log(logs, [4.0, 3.0], steps=400).read_text().splitlines()
    (logs / "x.jsonl").write_text("\n".join([good[0], "{oops", *good[1:]]) + "\n")
    (logs / "x.parquet").write_text("")
    (logs / "empty.jsonl").write_text("")
    (logs / "noconfig.jsonl").write_text("\n".join(good[1:]) + "\n")
    names = {
        "traces": traces,
        "empty": tmp_path / "empty",
        "missing": tmp_path / "missing",
        "logs": logs,
        "out": tmp_path / "out",
    }
    argv = [arg.format(**names) for arg in argv]
    argv = [arg.replace("x.jsonl", "x.parquet") if argv[1] == "list" else arg for arg in argv]
    code, out, err = run(argv, capsys)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith("transitsim: error: ") and message in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["traces", "import", "{bad}", "-o", "{out}"],
        ["traces", "list", "{bad}"],
        ["ladder", "{good}", "--targets", "final:nothing-like-this"],
    ],
)
def test_cli_process_prints_no_traceback(tmp_path: Path, traces: Path, argv) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    argv = [a.format(bad=bad, out=tmp_path / "out", good=traces) for a in argv]
    done = subprocess.run(
        [sys.executable, "-m", "transitsim.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("transitsim: error: ")
    assert "Traceback" not in done.stderr
