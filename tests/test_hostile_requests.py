"""Hostile input to replay's edges (issue 45): options that do not apply are refused in one line,
the notebook API says what to fix, and a list of copies is refused before anything is read."""

import time
from pathlib import Path

import pytest
from cli_run import assert_refused, run_cli

from transitsim import simulate
from transitsim.base.errors import TransitsimError
from transitsim.network import validate_network
from transitsim.scenario import network_from_dict
from transitsim.traces.format import read_trace

ROOT = Path(__file__).resolve().parents[1]
DENSE = ROOT / "traces/shakespeare-mini/shakespeare-adamw-lr0.003-s0.parquet"
DILOCO = (
    ROOT / "traces/shakespeare-mini-sites/shakespeare-diloco-h10-olr0.7-om0.9-lr0.003-s0.parquet"
)


def test_replicas_site_on_a_dense_trace_is_refused_not_ignored() -> None:
    argv = ["replay", str(DENSE), "-n", "2dc-wan", "--replicas", "site", "-q"]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr)
    assert "none of shakespeare-adamw-lr0.003-s0 is a local-SGD trace" in stderr


def test_replicas_site_on_a_network_without_sites_is_one_line_exit_2() -> None:
    """It exited 1 with two lines (a failed job and the summary)."""
    argv = ["replay", str(DILOCO), "-n", "8x200g-switch", "--replicas", "site", "-q"]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr)
    assert "has no datacentres" in stderr


@pytest.mark.parametrize("traces", [None, 3, 2.5])
def test_simulate_names_what_traces_must_be(traces) -> None:
    with pytest.raises(TransitsimError, match="traces must be a path, a folder, a glob, a Trace"):
        simulate(traces, ["8x200g-switch"])


def test_copies_of_one_run_are_refused_before_any_is_read() -> None:
    """simulate([trace] * 10**7) validated every copy before finding the repeat."""
    trace = read_trace(DENSE)
    start = time.monotonic()
    with pytest.raises(TransitsimError, match="given more than once: shakespeare-adamw"):
        simulate([trace] * 1_000_000, ["8x200g-switch"])
    paths = [str(DENSE)] * 1000
    with pytest.raises(TransitsimError, match="given more than once"):
        simulate(paths, ["8x200g-switch"])
    assert time.monotonic() - start < 60, "the copies were read: the check came too late"


@pytest.mark.parametrize("scale", [10**30, 10**15 + 1])
def test_a_model_size_past_the_bound_is_refused_with_it(scale: int) -> None:
    """10**30 gave a numpy cast warning and a negative payload."""
    with pytest.raises(
        TransitsimError, match=r"scale_params must be at most 1,000,000,000,000,000"
    ):
        simulate(str(DENSE), ["8x200g-switch"], scale_params=scale)


def test_a_protocol_outside_the_protocols_list_is_refused() -> None:
    """`nccl: {protocol: ll, protocols: [simple]}` ran LL."""
    description = {
        "name": "ll",
        "workers": 8,
        "topology": "switch",
        "host_link": {"rate": "100 Gb/s", "latency": "1 us"},
        "nccl": {"protocol": "ll", "protocols": ["simple"]},
    }
    with pytest.raises(TransitsimError, match="nccl.protocol ll is not among nccl.protocols"):
        validate_network(network_from_dict(description))


@pytest.mark.parametrize("fifo_as", ["--profile", "--loss"])
def test_a_fifo_as_an_input_is_refused_not_waited_on(tmp_path: Path, fifo_as: str) -> None:
    """A FIFO as --profile or --loss blocked the import forever (calibrate checked; import not)."""
    import gzip
    import json
    import os
    import subprocess
    import sys

    from test_byo_cli import make_profile

    profile = tmp_path / "rank0.json.gz"
    with gzip.open(profile, "wt", encoding="utf-8") as handle:
        json.dump(make_profile(), handle)
    loss = tmp_path / "losses.csv"
    loss.write_text("step,train_loss\n1,3.0\n2,2.9\n3,2.8\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    inputs = {"--profile": str(profile), "--loss": str(loss), fifo_as: str(fifo)}
    argv = ["traces", "import", *[x for pair in inputs.items() for x in pair]]
    argv += ["-o", str(tmp_path / "out")]
    code = "import sys; from transitsim.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "not a regular file" in done.stderr, done.stderr


def test_a_concurrent_runs_writability_probe_is_nobodys_content(tmp_path: Path) -> None:
    """Two runs into one folder at once: one saw the other's probe file and refused the folder
    (a failure seen only under load, tests/test_hostile_outputs.py)."""
    from transitsim.base.atomic import PROBE_PREFIX
    from transitsim.base.outfolder import check_output_folder

    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.csv").write_text("x\n")
    (out / f"{PROBE_PREFIX}abc123").write_text("")
    assert check_output_folder(out, {"summary.csv"}) == out
    (out / "summary.csv").unlink()
    (out / "summary.csv").mkdir()  # a folder under an output's name is still someone else's
    with pytest.raises(TransitsimError, match="holds files that are not transitsim outputs"):
        check_output_folder(out, {"summary.csv"})
