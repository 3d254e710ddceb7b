"""`transitsim train` / `python -m trainer`: dry-run figures, training, one-line errors."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from trainer.cli import main  # noqa: E402
from transitsim import cli as transitsim_cli  # noqa: E402
from transitsim.base.errors import TransitsimError  # noqa: E402
from transitsim.traces.format import read_trace  # noqa: E402

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parent.parent


def dry_run_json(capsys, *args: str) -> dict:
    assert main(["--dry-run", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_dry_run_reproduces_the_published_gpu_profile_bytes(capsys):
    """Spec §3 and §10: 15,833,472 parameters and the byte table of the GPU profile."""
    adamw = dry_run_json(capsys, "--preset", "tinystories-gpu", "--variant", "A")
    assert adamw["n_params"] == 15_833_472
    assert adamw["payload_bytes_per_step"] == adamw["dense_bytes_per_step"] == 31_666_944
    assert adamw["wire_bytes_per_step"] == 55_417_152
    assert adamw["collective"] == "all_reduce" and adamw["tokens_per_step"] == 16_384
    topk = dry_run_json(capsys, "--preset", "tinystories-gpu", "--variant", "B")
    assert topk["payload_bytes_per_step"] == 3_957_960
    assert topk["payload_bytes_int64_per_step"] == 9_895_920
    assert topk["wire_bytes_per_step"] == 27_705_720
    assert topk["ratio_vs_dense"] == pytest.approx(8.000825, rel=1e-6)
    for variant, extra in (
        ("C", []),
        ("C", ["--chunk-mode", "1d", "--chunk", "256"]),
        ("E", []),
        ("D", []),
    ):
        band = dry_run_json(capsys, "--preset", "tinystories-gpu", "--variant", variant, *extra)
        assert band["payload_bytes_per_step"] == 1_979_184, (variant, extra)
        assert band["wire_bytes_per_step"] == 13_854_288
        assert band["ratio_vs_dense"] == 16.0


def test_dry_run_table_for_shakespeare(capsys):
    assert (
        main("--dry-run --preset shakespeare --variant C --chunk-mode 1d --chunk 256".split()) == 0
    )
    out = capsys.readouterr().out
    assert "shakespeare-band-low-k16-1d256-lr0.001-s0" in out
    for figure in ("820,352", "1,640,704", "102,544", "717,808", "16x"):
        assert figure in out, figure


def test_transitsim_train_passes_every_option_to_the_trainer(capsys):
    with pytest.raises(SystemExit) as exit_info:
        transitsim_cli.main(
            "train --preset synthetic --variant F --band zigzag --dry-run --json".split()
        )
    assert exit_info.value.code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["name"] == "synthetic-band-zigzag-k16-2d64-lr0.001-s0"
    assert report["n_params"] == 57_536 and report["variant"] == "F"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--variant", "Z"], "unknown variant 'Z'"),
        (["--variant", "A", "--bogus"], "unrecognized arguments: --bogus"),
        (["--variant", "A", "--steps", "ten"], "invalid int value"),
        (["--variant", "A", "--set", "nope=1"], "unknown config field 'nope'"),
        (["--variant", "A", "--set", "workers=two"], "expected a int"),
        (["--variant", "A", "--set", "workers"], "expected FIELD=VALUE"),
        (["--variant", "C", "--keep", "2"], "keep"),
        (["--variant", "E", "--feedback", "loopback"], "feedback"),
        (["--variant", "C", "--chunk-mode", "3d"], "chunk_mode"),
        (["--variant", "C", "--preset", "huge"], "unknown preset 'huge'"),
        (["--variant", "C"], "-o DIR"),
    ],
)
def test_bad_options_are_one_line_errors_with_exit_code_2(capsys, args, message):
    with pytest.raises(TransitsimError, match=message):
        main(args)
    with pytest.raises(SystemExit) as exit_info:
        transitsim_cli.main(["train", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("transitsim: error:") and "\n" not in err and message in err


def test_python_dash_m_trainer_reports_errors_in_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "trainer", "--variant", "Q", "--dry-run"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "unknown variant 'Q'" in result.stderr


def test_without_torch_transitsim_train_says_how_to_install_it(monkeypatch, capsys):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "torch" else real_find_spec(name, *a),
    )
    with pytest.raises(SystemExit) as exit_info:
        transitsim_cli.main(["train", "--variant", "A", "--dry-run"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "pip install -e '.[train]'" in err and "\n" not in err


def test_training_through_the_cli_writes_the_trace_and_resumes_nothing_twice(tmp_path, capsys):
    args = "--preset synthetic --variant E' --steps 12 --threads 1 --enob none".split()
    args += ["--set", "eval_every=6", "-o", str(tmp_path)]
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    trace = read_trace(result["trace"])
    assert trace.name == "synthetic-opticsum-low-k16-1d256-enobNone-p8-fbloopback-lr0.001-s0"
    assert trace.variant == "E'" and trace.meta["config"]["enob"] is None
    assert (trace.steps["collective"] == "reduce_at_switch").all()
    assert result["final_val_loss"] == trace.final_val_loss and result["steps_done"] == 12
    assert main([*args, "--quiet"]) == 0  # complete already: skipped, not retrained
    assert "already complete" in capsys.readouterr().err


# --- rough edges a new user hit (issue 13, part 3) -------------------------------------------


def test_the_default_thread_count_is_one_and_auto_is_offered():
    """Auto followed the load in bench_threads, but a thread count that changes mid-run can
    change G's losses in the last bits and so break the bit-exact resume: the default is 1 whether
    or not a preset is used, and --threads auto is there to ask for."""
    from trainer.config import RunConfig, make_config

    assert RunConfig().threads == 1
    assert all(make_config(preset, "C").threads == 1 for preset in ("shakespeare", "synthetic"))
    assert "default: 1" in build_help()
    assert "auto" in build_help()


def test_quiet_training_still_says_where_the_trace_went(tmp_path, capsys):
    args = f"--preset synthetic --variant C --steps 3 --quiet -o {tmp_path}".split()
    assert main(args) == 0
    out = capsys.readouterr().out
    trace = tmp_path / "synthetic-band-low-k16-2d64-lr0.001-s0.parquet"
    assert str(trace) in out and trace.exists()


def test_a_rerun_with_other_steps_does_not_overwrite_a_finished_trace(tmp_path, capsys):
    base = f"--preset synthetic --variant C --quiet -o {tmp_path}".split()
    assert main([*base, "--steps", "4"]) == 0
    trace = tmp_path / "synthetic-band-low-k16-2d64-lr0.001-s0.parquet"
    before = trace.read_bytes()
    with pytest.raises(TransitsimError, match=r"steps=4 \(not 6\).*--force"):
        main([*base, "--steps", "6"])
    assert trace.read_bytes() == before and read_trace(trace).meta["steps_done"] == 4
    assert main([*base, "--steps", "6", "--force"]) == 0
    assert read_trace(trace).meta["steps_done"] == 6


def build_help() -> str:
    from trainer.cli import build_parser

    return build_parser().format_help()


def test_help_shows_every_options_default():
    from trainer.cli import build_parser

    parser = build_parser()
    flags = {"--dry-run", "--json", "--quiet", "-h"}  # on/off switches: off unless given
    for action in parser._actions:
        name = action.option_strings[0] if action.option_strings else action.dest
        if name in flags or not action.option_strings:
            continue
        assert action.help and ("default" in action.help or "required" in action.help), name
    text = " ".join(build_help().split())
    assert "shakespeare-mini 400" in text and "(default: 0)" in text  # --steps, --seed
    assert "A/H/H-s/L 0.003; B/C/D/E/E'/F/G 0.001" in text  # --lr per variant
