"""Hostile `calibrate nccl-tests` input (issue 45): an option that applies to none of the fits is
refused, not ignored, and a row no real run measures (hours for one collective, more bandwidth
than any link) is refused naming its line, never fitted."""

import pytest
from cli_run import assert_refused, run_cli
from nccl_fixtures import GH200_2X4

ROW = "1048576        262144     float     sum      -1    157.9    6.64   11.62"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "regimes", "--channels", "4"], "--channels applies to --model nccl only"),
        (["--model", "regimes", "--max-protocols", "1"], "--max-protocols applies to --model nccl"),
        (["--model", "nccl", "--max-regimes", "3"], "--max-regimes applies to --model regimes"),
        (["--max-regimes", "3"], "--max-regimes applies to --model regimes only, and all_reduce"),
        (["--model", "regimes", "--max-regimes", "0"], "--max-regimes must lie in 1..3"),
    ],
)
def test_an_option_that_applies_to_no_fit_is_refused(tmp_path, extra, message) -> None:
    """Regression (issue 45): `--channels` without the NCCL mode was ignored without a word."""
    table = GH200_2X4.write(tmp_path)
    out = tmp_path / "net.yaml"
    argv = ["calibrate", "nccl-tests", str(table), "-o", str(out), "--no-holdout", *extra]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr, out)
    assert message in stderr


def test_the_options_of_the_chosen_model_still_apply(tmp_path) -> None:
    table = GH200_2X4.write(tmp_path)
    out = tmp_path / "net.yaml"
    argv = ["calibrate", "nccl-tests", str(table), "-o", str(out), "--no-holdout", "-q"]
    code, _, stderr = run_cli([*argv, "--channels", "4", "--max-protocols", "2"])
    assert code == 0, stderr
    assert "channels: 4" in out.read_text()
    code, _, stderr = run_cli([*argv, "--model", "regimes", "--max-regimes", "1"])
    assert code == 0, stderr


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (ROW.replace("157.9    6.64   11.62", "1e+300    0.00    0.00"), "time 1e+300 us is more"),
        (ROW.replace("6.64   11.62", "6.64   5e+07"), "busbw 5e+07 GB/s is more than any link"),
        (ROW.replace("157.9    6.64", "1e-06    1e+06"), "algbw 1e+06 GB/s is more than any"),
    ],
)
def test_an_implausible_row_is_refused_naming_its_line(tmp_path, row: str, message: str) -> None:
    """Regression (issue 45): a row of 1e300 us was fitted."""
    text = GH200_2X4.text()
    assert ROW in text
    table = tmp_path / "t.txt"
    table.write_text(text.replace(ROW, row))
    line = text.splitlines().index(next(x for x in text.splitlines() if ROW in x)) + 1
    out = tmp_path / "net.yaml"
    argv = ["calibrate", "nccl-tests", str(table), "-o", str(out), "--no-holdout"]
    code, _, stderr = run_cli(argv)
    assert_refused(argv, code, stderr, out)
    assert f"t.txt:{line}: out-of-place " in stderr and message in stderr
