"""Hostile input (issue 15): tracebacks, hangs, bad input passed as a failed job or as valid,
silently wrong answers, valid YAML refused, and a checkpoint that would run code.

Every case is bad input, so every case must be one line on stderr and exit 2 (or, for valid
input, a correct result), quickly, with nothing written.
"""

import json
import math
import pickle
import time
from pathlib import Path
from typing import Any

import logfactory as lf
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_run_cli import run_cli, write_test_trace

import transitsim
from transitsim.base.errors import TransitsimError
from transitsim.network.limits import MAX_WORKERS
from transitsim.scenario import network_preset
from transitsim.scenario.presets import preset_dict
from transitsim.traces.format import Trace, read_trace

BASE = "traces: [traces/]\nnetworks: [8x200g-switch]\ntargets: [3.5]\n"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile-in")
    for variant in ("A", "C"):
        write_test_trace(folder / "traces", variant, 0)
    return folder


def one_line_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str], *fragments: str, seconds: float = 60
) -> str:
    """Run the CLI in this process: exit 2, one line naming every fragment, in time."""
    start = time.monotonic()
    code, _, stderr = run_cli(argv, capsys)
    assert time.monotonic() - start < seconds, "took too long: a bound is missing"
    assert code == 2, stderr
    assert len(stderr.splitlines()) == 1 and stderr.startswith("transitsim: error: "), stderr
    for fragment in fragments:
        assert fragment in stderr
    return stderr


def tampered_trace(source: Path, target: Path, column: str, values: list[Any]) -> Path:
    """A copy of a valid trace whose `column` holds `values`, its metadata kept: a file that
    write_trace would never write, as another tool (or an attacker) could."""
    table = pq.read_table(source)
    index = table.schema.get_field_index(column)
    table = table.set_column(index, column, pa.array(values)).replace_schema_metadata(
        table.schema.metadata
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, target)
    return target


BAD_COLUMNS = [
    ("val_loss", lambda n: ["3.1"] * n, "must hold numbers"),
    ("reducible", lambda n: ["False"] * n, "true/false values"),
    ("train_loss", lambda n: [-1.0] * n, "negative losses"),
    ("val_loss", lambda n: [4.0] + [-5.0] * (n - 1), "negative losses"),
    ("payload_bytes", lambda n: [2**62] * n, "bytes in a step"),
    ("compute_s", lambda n: [math.inf] * n, "infinite"),
    ("lr", lambda n: [math.nan] * n, "missing values"),
]


@pytest.mark.parametrize(("column", "values", "message"), BAD_COLUMNS)
def test_broken_step_tables_are_refused_by_every_reader(
    work: Path, tmp_path: Path, capsys, column, values, message
) -> None:
    good = work / "traces" / "tiny-adamw-s0.parquet"
    rows = len(pq.read_table(good))
    bad = tampered_trace(good, tmp_path / "traces" / good.name, column, values(rows))
    one_line_exit_2(["traces", "show", str(bad)], capsys, message)
    one_line_exit_2(["traces", "list", str(bad.parent)], capsys, message)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(BASE, encoding="utf-8")
    one_line_exit_2(["validate", str(scenario)], capsys, message)  # the rows, not only metadata
    one_line_exit_2(["run", str(scenario), "--serial", "-o", str(tmp_path / "out")], capsys)
    assert not (tmp_path / "out").exists()


def _log(folder: Path, change) -> Path:
    """A valid log, one record changed by `change(records)`."""
    records = lf.records([4.0, 3.5, 3.2], variant="band")
    change(records)
    path = folder / "bad.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def _eval(records: list[dict]) -> dict:
    return next(r for r in records if r["type"] == "eval")


BAD_LOGS = [
    ("infinite step", lambda r: _eval(r).update(step=math.inf), "'step' inf"),
    ("nan step", lambda r: _eval(r).update(step=math.nan), "'step' nan"),
    ("huge step", lambda r: _eval(r).update(step=10**30), "eval record has step"),
    ("nan seconds", lambda r: _eval(r).update(seconds=math.nan), "'seconds'"),
    ("diag as a list", lambda r: r[1].update(energy=[1, 2]), "'energy' object"),
    ("diag group as a list", lambda r: r[1]["energy"].update(delta=[0.1]), "not an object"),
    ("band as a list", lambda r: r[0]["config"].update(band=["low"]), "unknown band"),
    ("variant as a list", lambda r: r[0]["config"].update(variant=["band"]), "variant"),
    ("NUL in the name", lambda r: r[0].update(name="run\x00x-s0"), "control characters"),
    ("5,000-character name", lambda r: r[0].update(name="r" * 5000 + "-s0"), "5,003 characters"),
    ("hardware as a list", lambda r: r[0].update(hardware=["torch"]), "'hardware'"),
    ("int64 payload text", lambda r: r[0].update(payload_bytes_int64_per_step="x"), "byte count"),
    ("huge model", lambda r: r[0].update(n_params=10**20), "too large"),
    (
        "line break in a key",  # found by test_hostile_fuzz: the error was two lines
        lambda r: r[1]["energy"]["delta"]["all"].update({"x\r\ny\u2028": "bad"}),
        "x\\r\\ny\\u2028 bad",
    ),
]


@pytest.mark.parametrize(("case", "change", "message"), BAD_LOGS, ids=[b[0] for b in BAD_LOGS])
def test_hostile_logs_are_one_line_and_leave_no_folder(
    tmp_path: Path, capsys, case, change, message
) -> None:
    log = _log(tmp_path, change)
    out = tmp_path / "out"
    one_line_exit_2(["traces", "import", str(log), "-o", str(out)], capsys, message)
    assert not out.exists(), "an empty (or partial) output folder was left"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--lr", "nan"], "lr=nan"),
        (["--lr", "inf"], "lr=inf"),
        (["--kappa", "nan"], "kappa=nan"),
        (["--seed", "99999999999999999999999"], "at most 4,294,967,295"),
        (["--set", "block=100000000"], "block=100000000"),
        (["--set", "block=20000"], "GiB"),
        (["--set", "decay=inf"], "finite"),
    ],
)
def test_train_options_out_of_range(capsys, options: list[str], message: str) -> None:
    one_line_exit_2(["train", "--variant", "E", "--dry-run", *options], capsys, message)


# --- hangs ---------------------------------------------------------------------------------


def _write(work: Path, name: str, text: str) -> str:
    path = work / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_alias_bomb_and_self_reference_are_refused_quickly(work: Path, capsys) -> None:
    lines = ["a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    bomb = _write(work, "bomb.yaml", "\n".join(lines) + "\n" + BASE)
    one_line_exit_2(["validate", bomb], capsys, "200,000 values", seconds=10)
    one_line_exit_2(["run", bomb, "--serial"], capsys, "alias", seconds=10)
    loop = _write(work, "loop.yaml", "x: &a [1, *a]\n" + BASE)
    one_line_exit_2(["validate", loop], capsys, "refers to itself", seconds=10)


def test_document_grid_and_worker_sizes_are_bounded(work: Path, capsys) -> None:
    values = ", ".join(["8"] * 400_000)
    big = _write(
        work,
        "big.yaml",
        BASE + f"grid:\n  network: 8x200g-switch\n  sweep:\n    workers: [{values}]\n",
    )
    one_line_exit_2(["validate", big], capsys, "at most 1,048,576", seconds=10)
    rates = ", ".join(f'"{r} Gb/s"' for r in range(1, 5000))
    long_list = _write(
        work,
        "sweep.yaml",
        BASE + f"grid:\n  network: 8x200g-switch\n  sweep:\n    host_link.rate: [{rates}]\n",
    )
    one_line_exit_2(["validate", long_list], capsys, "4096", seconds=20)
    latencies = ", ".join(f'"{n} us"' for n in range(100))
    hundred_rates = ", ".join(f'"{r} Gb/s"' for r in range(1, 101))
    grid = (
        "grid:\n  network: 8x200g-switch\n  sweep:\n"
        f"    host_link.rate: [{hundred_rates}]\n"
        f"    host_link.latency: [{latencies}]\n"
    )
    points = _write(work, "points.yaml", BASE + grid)
    one_line_exit_2(["validate", points], capsys, "points", seconds=20)
    many = _write(
        work,
        "many.yaml",
        BASE.replace("[8x200g-switch]", "[{preset: 8x200g-switch, workers: 1000000}]"),
    )
    one_line_exit_2(["validate", many], capsys, str(MAX_WORKERS), seconds=10)
    argv = ["collective", "--algo", "ring-allreduce", "--bytes", "1 MB", "--bandwidth", "1 Gb/s"]
    one_line_exit_2([*argv, "--workers", "100000000"], capsys, f"{MAX_WORKERS:,}", seconds=10)
    one_line_exit_2([*argv, "--workers", "8", "--bytes", str(2**62)], capsys, "at most")


# --- bad input must not pass validate or become failed jobs --------------------------------


def test_faults_and_overrides_must_name_real_links(work: Path, capsys) -> None:
    fault = _write(
        work,
        "fault.yaml",
        BASE + 'faults: [{link: "nolink->x", down_at: "0 s", up_at: "1 s"}]\n',
    )
    one_line_exit_2(["validate", fault], capsys, "faults[0].link", "nolink->x")
    good = _write(
        work, "goodfault.yaml", BASE + 'faults: [{link: "h0<->sw", down_at: "0 s", up_at: "1 s"}]\n'
    )
    code, _, stderr = run_cli(["validate", good], capsys)
    assert code == 0, stderr
    trace = str(work / "traces" / "tiny-adamw-s0.parquet")
    replay = ["replay", trace, "--network", "8x200g-switch", "--targets", "3.5"]
    one_line_exit_2([*replay, "--set", "link_overrides.nolink->x.rate=1 Gb/s"], capsys, "nolink")
    one_line_exit_2([*replay, "--sum-at", "switch"], capsys, "summing switch")
    code, _, stderr = run_cli(
        [*replay, "--sum-at", "switch", "--set", "switch.aggregator=true", "--json"], capsys
    )
    assert code == 0, stderr


# --- silently wrong results ----------------------------------------------------------------


def test_rates_and_sizes_that_would_give_inf_or_nan(work: Path, capsys) -> None:
    for rate in ("1e-300 b/s", "1e30 b/s"):
        path = _write(
            work,
            "rate.yaml",
            BASE.replace(
                "[8x200g-switch]", f'[{{preset: 8x200g-switch, host_link: {{rate: "{rate}"}}}}]'
            ),
        )
        one_line_exit_2(["validate", path], capsys, "host_link.rate", "between")


def test_a_label_names_one_config(work: Path, capsys) -> None:
    def scenario(name: str, label_a: str, label_c: str) -> str:
        return _write(
            work,
            name,
            "traces:\n"
            f"  - {{path: traces/tiny-adamw-s0.parquet, label: {label_a}}}\n"
            f"  - {{path: traces/tiny-band-1d256-s0.parquet, label: {label_c}}}\n"
            "networks: [8x200g-switch]\ntargets: [3.5]\nbaseline: SAME\n",
        )

    one_line_exit_2(["validate", scenario("same.yaml", "SAME", "SAME")], capsys, "two configs")
    stolen = scenario("stolen.yaml", "tiny-band-1d256", "SAME")  # A labelled as C's name
    one_line_exit_2(["validate", stolen], capsys, "another config")
    code, _, stderr = run_cli(["validate", scenario("ok.yaml", "SAME", "other")], capsys)
    assert code == 0, stderr


def test_cli_numbers_that_would_mislead(work: Path, capsys) -> None:
    trace = str(work / "traces" / "tiny-adamw-s0.parquet")
    replay = ["replay", trace, "--network", "8x200g-switch"]
    one_line_exit_2([*replay, "--baseline", "zzz", "--targets", "3.5"], capsys, "zzz")
    for target in ("-1", "0", "nan", "inf"):
        one_line_exit_2([*replay, f"--targets={target}"], capsys, "loss target")
    one_line_exit_2(["findings", str(work / "traces"), "--gap-nats", "nan"], capsys, "--gap-nats")
    argv = ["collective", "--algo", "ring-allreduce", "--workers", "8", "--bytes", "1 MB"]
    argv += ["--bandwidth", "1 Gb/s", "--datacentres", "3", "--wan", "1 Gb/s"]
    one_line_exit_2(argv, capsys, "multiple of --datacentres")


def test_the_api_refuses_bad_targets_and_unvalidated_traces(work: Path) -> None:
    network = network_preset("8x200g-switch")
    path = work / "traces" / "tiny-adamw-s0.parquet"
    for target in (math.nan, math.inf, -1.0, 0.0, True, "3"):
        with pytest.raises(TransitsimError, match="target"):
            transitsim.simulate([path], [network], targets=[target])
    trace = read_trace(path)
    broken = Trace(meta={**trace.meta}, steps=trace.steps.drop(columns="compute_s"))
    with pytest.raises(TransitsimError, match="compute_s"):
        transitsim.simulate([broken], [network], targets=[3.5])
    negative = Trace(meta=trace.meta, steps=trace.steps.assign(val_loss=-1.0))
    with pytest.raises(TransitsimError, match="negative"):
        transitsim.simulate([negative], [network], targets=[3.5])
    result = transitsim.simulate([trace], [network], targets=[3.5])
    assert len(result.summary) == 1


# --- valid YAML accepted -------------------------------------------------------------------


def test_a_merge_key_may_be_overridden(work: Path, capsys) -> None:
    text = (
        "traces: [traces/]\nnetworks:\n  - &n {preset: 8x200g-switch, name: a}\n"
        "  - <<: *n\n    name: b\ntargets: [3.5]\n"
    )
    path = _write(work, "merge.yaml", text)
    code, stdout, stderr = run_cli(["validate", "--json", path], capsys)
    assert code == 0, stderr
    assert json.loads(stdout)[0]["networks"] == ["a", "b"]
    twice = _write(work, "twice.yaml", text.replace("name: b", "name: b\n    name: c"))
    one_line_exit_2(["validate", twice], capsys, "duplicate key")


# --- checkpoints never run code ------------------------------------------------------------


class _Payload:
    """Unpickling this calls Path.touch(marker): proof that code from the file ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_crafted_checkpoint_never_runs_code(tmp_path: Path, capsys) -> None:
    torch = pytest.importorskip("torch")
    from trainer.cli import build_parser, config_from_args
    from trainer.loop.checkpoint import checkpoint_path, load_checkpoint
    from trainer.naming import run_name

    marker = tmp_path / "pwned"
    out = tmp_path / "out"
    out.mkdir()
    argv = ["train", "--preset", "synthetic", "--variant", "C", "--steps", "2", "--quiet"]
    cfg = config_from_args(build_parser().parse_args(argv[1:]))
    path = checkpoint_path(out, run_name(cfg))
    with path.open("wb") as handle:  # a plain pickle
        pickle.dump({"format": 1, "x": _Payload(marker)}, handle)
    with pytest.raises(TransitsimError, match="unreadable checkpoint"):
        load_checkpoint(path)
    torch.save({"format": 1, "x": _Payload(marker)}, path)  # the same inside torch's archive
    with pytest.raises(TransitsimError, match="unreadable checkpoint"):
        load_checkpoint(path)
    one_line_exit_2([*argv, "-o", str(out)], capsys, "unreadable checkpoint")
    assert not marker.exists(), "the checkpoint ran code"
    assert preset_dict("8x200g-switch")  # the test ran in a sane process afterwards


def test_json_logs_with_huge_ints_or_nonfinite_losses_still_import(tmp_path: Path) -> None:
    """Non-finite losses are a diverged run (kept, noted); only they may be non-finite."""
    from transitsim.traces.experiment_logs import import_logs

    log = _log(tmp_path, lambda r: _eval(r).update(val_loss=math.inf))
    (result,) = import_logs([log], tmp_path / "out")
    assert any("diverged" in note for note in result.trace.meta["notes"])
    assert isinstance(pd.read_parquet(result.trace.path), pd.DataFrame)


# --- found by tests/test_hostile_fuzz.py -----------------------------------------------------


def _with_meta(source: Path, target: Path, change) -> Path:
    """A copy of a valid trace whose metadata JSON was changed by `change(meta)` (or replaced
    by the bytes it returns)."""
    table = pq.read_table(source)
    metadata = dict(table.schema.metadata)
    meta = json.loads(metadata[b"transitsim.trace"])
    changed = change(meta)
    metadata[b"transitsim.trace"] = changed if isinstance(changed, bytes) else json.dumps(meta)
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.replace_schema_metadata(metadata), target)
    return target


BAD_METADATA = [
    ("notes a number", lambda m: m.update(notes=5), "'notes' must be a list"),
    ("notes of numbers", lambda m: m.update(notes=[1]), "list of text"),
    ("model a list", lambda m: m.update(model=[1]), "'model' must be an object"),
    ("hardware text", lambda m: m.update(hardware="x"), "'hardware' must be an object"),
    ("variant_params a list", lambda m: m.update(variant_params=[1]), "'variant_params'"),
    ("payload as text", lambda m: m.update(payload_bytes_per_step="x"), "byte count"),
    ("wire bytes inf", lambda m: m.update(wire_bytes_per_step=math.inf), "byte count"),
    ("chunk as text", lambda m: m["variant_params"].update(chunk="x"), "whole number"),
    ("keep 5e-324", lambda m: m["variant_params"].update(keep=5e-324), "fraction"),
    ("lr as text", lambda m: m["variant_params"].update(lr="fast"), "finite number"),
    ("warmup as text", lambda m: m.setdefault("config", {}).update(warmup="x"), "warmup"),
    ("nested 100,000 deep", lambda m: b"[" * 100_000, "not valid JSON"),
    ("config block a list", lambda m: m.setdefault("config", {}).update(block=[1]), "config.block"),
    (
        "backward profile of a number",
        lambda m: m.update(backward_profile={"tensors": 5, "backward_share": 0.5}),
        "malformed backward_profile",
    ),
    (
        "backward profile without its share",
        lambda m: m.update(backward_profile={"tensors": [{"numel": 10, "ready": 0.5}]}),
        "backward_profile",
    ),
]


@pytest.mark.parametrize(
    ("case", "change", "message"), BAD_METADATA, ids=[b[0] for b in BAD_METADATA]
)
def test_metadata_of_the_wrong_kind_is_refused_by_every_reader(
    work: Path, tmp_path: Path, capsys, case, change, message
) -> None:
    """Each was a traceback in `traces show`/`list`, labels, findings or replay."""
    bad = _with_meta(
        work / "traces" / "tiny-band-1d256-s0.parquet", tmp_path / "t" / "x-s0.parquet", change
    )
    one_line_exit_2(["traces", "show", str(bad)], capsys, message)
    one_line_exit_2(["traces", "list", str(bad.parent)], capsys, message)
    one_line_exit_2(["findings", str(bad.parent)], capsys, message)
    replay = ["replay", str(bad), "--network", "8x200g-switch", "-o", str(tmp_path / "out")]
    one_line_exit_2(replay, capsys, message)
    one_line_exit_2([*replay, "--overlap", "buckets"], capsys, message)  # was exit 1, 2 lines
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("variant", ["A", "E"])
def test_findings_on_runs_of_one_kind_only(tmp_path: Path, capsys, variant: str) -> None:
    """Only AdamW traces (no selection runs) or only optics traces (no C 1-D 256 to compare
    with): findings says "not recorded" (was KeyError / TypeError tracebacks)."""
    write_test_trace(tmp_path / "traces", variant, 0)
    code, stdout, stderr = run_cli(["findings", str(tmp_path / "traces")], capsys)
    assert code == 0, stderr
    assert "not recorded" in stdout


def test_network_files_and_set_values_are_bounded_like_scenarios(
    work: Path, tmp_path: Path, capsys
) -> None:
    """replay's --network FILE and --set values were read with plain yaml.safe_load: an alias
    bomb hung them, and `validate /dev/zero` read forever."""
    lines = ["a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    bomb = tmp_path / "net.yaml"
    bomb.write_text("preset: 8x200g-switch\ndescription:\n  " + "\n  ".join(lines) + "\n")
    trace = str(work / "traces" / "tiny-adamw-s0.parquet")
    replay = ["replay", trace, "--targets", "3.5"]
    one_line_exit_2([*replay, "--network", str(bomb)], capsys, "alias bomb", seconds=20)
    anchors = ["&a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    anchors += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    value = f"description=[{', '.join(anchors)}]"
    one_line_exit_2(
        [*replay, "--network", "8x200g-switch", "--set", value], capsys, "alias bomb", seconds=20
    )
    duplicate = tmp_path / "dup.yaml"
    duplicate.write_text("preset: 8x200g-switch\nname: a\nname: b\n")
    one_line_exit_2([*replay, "--network", str(duplicate)], capsys, "duplicate key")
    one_line_exit_2(["validate", "/dev/zero"], capsys, "too large", seconds=20)


def test_a_target_named_twice_is_one_row(work: Path, capsys) -> None:
    trace = str(work / "traces" / "tiny-adamw-s0.parquet")
    argv = ["replay", trace, "--network", "8x200g-switch", "--json"]
    code, stdout, stderr = run_cli([*argv, "--targets", "3.5,3.5"], capsys)
    assert code == 0, stderr
    assert [row["target"] for row in json.loads(stdout)] == [3.5]


def test_a_scenario_key_with_a_line_break_is_one_line(work: Path, capsys) -> None:
    path = _write(work, "newline.yaml", BASE + '"a\\nb": 1\n')
    one_line_exit_2(["validate", path], capsys, "a\\nb")
    one_line_exit_2(["run", path, "--serial"], capsys, "a\\nb")


def test_a_log_that_never_ends_is_refused(tmp_path: Path, capsys, monkeypatch) -> None:
    """`traces import /dev/zero` read forever (and grew without bound); a device is no log, and
    a regular file is read to its bound only."""
    from transitsim.traces import experiment_logs as importers

    monkeypatch.setattr(importers, "MAX_LOG_BYTES", 10_000)
    out = tmp_path / "out"
    one_line_exit_2(["traces", "import", "/dev/zero", "-o", str(out)], capsys, "not a regular file")
    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * 10_001)
    one_line_exit_2(["traces", "import", str(big), "-o", str(out)], capsys, "10,001 bytes")
    assert not out.exists()
