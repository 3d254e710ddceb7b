"""`transitsim calibrate nccl-tests|testbed`: what a user runs and what it prints and writes; the
network file it writes is taken by `collective -n` and `replay --network`; malformed input is
refused with one line, exit 2, nothing written.

The command is run on made-up tables in nccl-tests' layout (tests/nccl_fixtures.py: transitsim's
model on known links, jittered), so every test runs without the real files; the one test of the
figures docs/calibration.md quotes reads the real 2 x DGX A100 table (../shared/nccl-tests/more/,
BSD-3): it fails where ../shared is there without it, and skips only without ../shared."""

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from cli_run import assert_refused, run_cli
from nccl_fixtures import GH200_2X4, H100_2X8, MIB, nccl_fixture
from test_calibrate_synthetic import model_times, nccl_text

from transitsim.calibrate import Link

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces/published/tinystories-gpu/tinystories-adamw-lr0.003-s0.parquet"
MEASURED = ROOT / "docs/testbed/previous/measured.parquet"


def printed_row(stdout: str, size: str) -> list[str]:
    """The cells of the printed table's row for `size` (e.g. "8 GiB")."""
    (line,) = [line for line in stdout.splitlines() if line.startswith(f"│ {size} ")]
    return [cell.strip() for cell in line.strip("│").split("│")]


def us(cell: str) -> float:
    return float(cell.replace(",", ""))


def collective_us(network: Path, size: str, *settings: str) -> float:
    """`collective -n network` on one ring all-reduce of `size`: its time, microseconds."""
    argv = ["collective", "-n", str(network), *settings, "--algo", "ring-allreduce"]
    code, stdout, stderr = run_cli([*argv, "--bytes", size, "--json"])
    assert code == 0, stderr
    return json.loads(stdout)["time_s"] * 1e6


def test_nccl_tests_prints_the_table_beside_the_prediction_and_writes_a_network(
    tmp_path: Path,
) -> None:
    source, out = H100_2X8.write(tmp_path), tmp_path / "h100.yaml"
    argv = ["calibrate", "nccl-tests", str(source), "-o", str(out), "--holdout", "256 MiB"]
    code, stdout, stderr = run_cli([*argv, "--model", "regimes"])
    assert code == 0, stderr
    assert "│ 8 GiB   │ fitted" in stdout and "│ 256 MiB │ held out" in stdout
    assert "│ 512 KiB │ below --min-size" in stdout
    assert "regime 2: 32 MiB .. 8 GiB (8 rows)" in stdout  # where the table's links change
    worst = re.search(r"13 fitted, worst \|error\| ([\d.]+) % \(within 10 %\)", stdout)
    assert worst and float(worst[1]) <= 2.0  # the model's own times, jittered by 1 %
    held = re.search(r"held out 256 MiB: predicted ([\d,.]+) us, measured ([\d,.]+) us", stdout)
    assert held and us(held[2]) == H100_2X8.printed_us(256 * MIB)
    assert us(held[1]) == pytest.approx(H100_2X8.model_us(256 * MIB), rel=0.02)
    assert f"wrote {out}" in stderr
    network = yaml.safe_load(out.read_text())
    assert network["workers"] == 16 and network["topology"] == "switch"
    rate = float(network["host_link"]["rate"].split()[0]) * 1e9
    assert rate == pytest.approx(H100_2X8.links[32 * MIB].payload_bps, rel=0.02)
    # the file, as `collective -n` reads it, gives the prediction printed for 8 GiB
    row = printed_row(stdout, "8 GiB")
    assert us(row[3]) == H100_2X8.printed_us(8 << 30)
    assert collective_us(out, "8 GiB") == pytest.approx(us(row[4]), abs=0.06)
    code, stdout, stderr = run_cli(["replay", str(TRACE), "--network", str(out)])
    assert code == 0, stderr
    assert "calibrated-h100-2x8-all_reduce" in stdout  # piped tables are not wrapped


def test_the_dgx_a100_figures_docs_calibration_md_quotes(tmp_path: Path) -> None:
    """The real table (licensed, in ../shared/nccl-tests/more/): the figures the docs print
    are the command's, and its printout is the docs' block, line for line."""
    dgx = nccl_fixture("more/deepops-2xdgxa100-ib-all_reduce.txt")
    out = tmp_path / "dgx.yaml"
    argv = ["calibrate", "nccl-tests", str(dgx), "-o", str(out), "--model", "regimes"]
    code, stdout, stderr = run_cli([*argv, "--holdout", "256 MiB"])
    assert code == 0, stderr
    assert "regime 2: 32 MiB .. 4 GiB (7 rows)" in stdout
    assert "worst |error| 2.9 % (within 10 %)" in stdout
    assert "held out 256 MiB: predicted 2,940.7 us, measured 2,924.5 us, error +0.6 %" in stdout
    assert collective_us(out, "4 GiB") == pytest.approx(43907.9, abs=0.06)
    doc = (Path(__file__).resolve().parents[1] / "docs" / "calibration.md").read_text()
    for line in stdout.splitlines():
        if line.startswith(("regime ", "rows of", "held out", "  regimes", "  alpha-beta")):
            assert line in doc, line


def test_json_and_payload_choose_what_is_printed_and_written(tmp_path: Path) -> None:
    source, out = GH200_2X4.write(tmp_path), tmp_path / "gh200.yaml"
    argv = ["calibrate", "nccl-tests", str(source), "-o", str(out), "--json", "--payload", "2 MiB"]
    code, stdout, stderr = run_cli([*argv, "--model", "regimes"])
    assert code == 0, stderr
    (document,) = json.loads(stdout)
    assert document["ranks"] == 8 and len(document["regimes"]) == 2
    small = document["regimes"][0]
    assert (small["first_bytes"], small["last_bytes"]) == (MIB, 4 * MIB)
    assert small["payload_bps"] == pytest.approx(GH200_2X4.links[0].payload_bps, rel=0.03)
    rate = yaml.safe_load(out.read_text())["host_link"]["rate"]
    assert float(rate.split()[0]) * 1e9 == pytest.approx(small["payload_bps"], rel=1e-8)
    rows = {row["size_bytes"]: row for row in document["rows"]}
    assert rows[128 * MIB]["measured_us"] == GH200_2X4.printed_us(128 * MIB)
    assert abs(rows[128 * MIB]["error"]) <= 0.10


def test_place_in_fits_the_in_place_columns(tmp_path: Path) -> None:
    source = GH200_2X4.write(tmp_path)
    rows = {}
    for place in ("out", "in"):
        argv = ["calibrate", "nccl-tests", str(source), "-o", str(tmp_path / f"{place}.yaml")]
        code, stdout, stderr = run_cli([*argv, "--json", "--place", place])
        assert code == 0, stderr
        (document,) = json.loads(stdout)
        rows[place] = {row["size_bytes"]: row["measured_us"] for row in document["rows"]}
    for size in GH200_2X4.sizes:
        for place in ("out", "in"):
            assert rows[place][size] == GH200_2X4.printed_us(size, place)
    assert rows["in"] != rows["out"]  # the columns differ: each was read from its own


def test_line_rate_splits_the_rate_into_line_and_efficiency(tmp_path: Path) -> None:
    source, out = GH200_2X4.write(tmp_path), tmp_path / "gh200.yaml"
    code, _, stderr = run_cli(
        ["calibrate", "nccl-tests", str(source), "-o", str(out), "--line-rate", "1.6 Tb/s", "-q"]
    )
    assert code == 0, stderr
    link = yaml.safe_load(out.read_text())["host_link"]
    assert link["rate"] == "1600 Gb/s"
    expected = GH200_2X4.links[8 * MIB].payload_bps / 1.6e12
    assert link["efficiency"] == pytest.approx(expected, rel=0.03)
    too_low = tmp_path / "low.yaml"
    code, _, stderr = run_cli(
        ["calibrate", "nccl-tests", str(source), "-o", str(too_low), "--line-rate", "100 Gb/s"]
    )
    assert_refused(["--line-rate"], code, stderr)
    assert "exceeds --line-rate" in stderr and not too_low.exists()


def test_several_collectives_each_fit_and_use_picks_the_file(tmp_path: Path) -> None:
    gather = tmp_path / "gather.log"
    gather.write_text(
        nccl_text("all_gather", 16, model_times("all_gather", 16, {0: Link(2e11, 3e-6)}))
    )
    out = tmp_path / "net.yaml"
    argv = ["calibrate", "nccl-tests", str(H100_2X8.write(tmp_path)), str(gather), "-o", str(out)]
    code, stdout, stderr = run_cli([*argv, "--use", "all-gather"])
    assert code == 0, stderr
    assert "all_gather as transitsim's ring_allgather" in stdout
    assert "all_reduce as transitsim's ring_allreduce" in stdout
    rate = yaml.safe_load(out.read_text())["host_link"]["rate"]
    assert float(rate.split()[0]) == pytest.approx(200, rel=0.01)
    code, _, stderr = run_cli([*argv, "--use", "broadcast"])
    assert_refused(argv, code, stderr)


def test_testbed_table_calibrates_the_same_way(tmp_path: Path) -> None:
    out = tmp_path / "tb.yaml"
    code, _, stderr = run_cli(["calibrate", "testbed", str(MEASURED), "-o", str(out)])
    assert_refused(["calibrate", "testbed"], code, stderr)
    assert "give --rate" in stderr and not out.exists()
    argv = ["calibrate", "testbed", str(MEASURED), "-o", str(out), "--rate", "200 Mb/s"]
    code, stdout, stderr = run_cli([*argv, "--workers", "4"])
    assert code == 0, stderr
    assert "4 ranks" in stdout and "(within 10 %)" in stdout
    network = yaml.safe_load(out.read_text())
    assert network["workers"] == 4
    assert 100 < float(network["host_link"]["rate"].split()[0]) * 1e3 < 200  # Mb/s, under tbf
    code, _, stderr = run_cli([*argv, "--workers", "3"])
    assert_refused(argv, code, stderr)


_COLUMNS = "size count type redop root time algbw busbw #wrong time algbw busbw #wrong"
_ROW = "{:>12} {:>13}     float     sum      -1 {:>8} {:>7} {:>7}       0 {} {} {}       0"
ROWS = "\n".join(
    [
        "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5",
        "#  Rank  0 Group  0 Pid   1 on a device  0 [0x01] GPU",
        "#  Rank  1 Group  0 Pid   2 on b device  0 [0x01] GPU",
        "#       " + _COLUMNS.replace(" ", "    "),
        _ROW.format(1048576, 262144, "339.61", "3.09", "3.09", "335.85", "3.12", "3.12"),
        _ROW.format(2097152, 524288, "355.53", "5.90", "5.90", "361.77", "5.80", "5.80"),
        _ROW.format(4194304, 1048576, "476.28", "8.81", "8.81", "471.14", "8.90", "8.90"),
        "# Avg bus bandwidth    : 5.9",
        "",
    ]
)
MALFORMED = {  # case -> (file text, what the one line must say)
    "empty": ("", "empty file"),
    "blank lines": ("\n\n   \n", "empty file"),
    "no table": (
        "\n".join(line for line in ROWS.splitlines() if "size" not in line and "sum" not in line),
        "no column header ('size count type ... busbw') and no rows",
    ),
    "a broadcast without Rank lines": (
        "$ broadcast_perf -b 1M\n" + "\n".join(r for r in ROWS.splitlines() if "Rank" not in r),
        "broadcast's busbw = algbw says nothing of the rank count; give --ranks N",
    ),
    "a row of no known layout": (
        "\n".join(line for line in ROWS.splitlines() if "size" not in line).replace(
            "     sum      -1 ", "     sum  -1  -1  -1 "
        ),
        ":5: no column header, and a row of 15 fields is not a layout nccl-tests prints",
    ),
    "truncated row": (
        ROWS.replace("361.77 5.80 5.80       0", "361.77 5.8"),
        ":7: truncated or malformed row (11 fields, the header has 13)",
    ),
    "text in a numeric column": (ROWS.replace("476.28", "476.2B"), ":8: time '476.2B' is not"),
    "text for the size": (
        ROWS.replace("     2097152 ", "     2O97152 "),
        ":7: size '2O97152' is not a whole number",
    ),
    "time against algbw": (ROWS.replace("355.53", "155.53"), ":7: algbw 5.9 GB/s disagrees"),
    "negative time": (ROWS.replace("339.61", "-339.61"), ":6: time '-339.61' is not a finite"),
    "a number beyond float": (ROWS.replace("339.61", "1e999"), ":6: time '1e999' is not a fin"),
    "no rows": (
        "\n".join(line for line in ROWS.splitlines() if "float" not in line),
        "the table has no rows",
    ),
    "two runs": (ROWS + ROWS, "holds 2 nccl-tests runs"),
    "a rank twice": (ROWS.replace("Rank  1 Group", "Rank  0 Group"), "rank 0 listed twice"),
    "unknown type": (ROWS.replace("float", "quad", 1), ":6: unknown data type 'quad'"),
    "names two tests": ("$ all_reduce_perf; all_gather_perf\n" + ROWS, "names several tests"),
    "wrong collective": (
        "$ all_gather_perf -b 1M\n" + ROWS,
        "busbw / algbw = 1, but all_gather on 2 ranks has factor 0.5",
    ),
}
UNNAMED = ("empty", "blank lines", "names two tests", "wrong collective",
           "a broadcast without Rank lines")  # fmt: skip


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_nccl_tests_files_are_refused_with_one_line(case: str, tmp_path: Path) -> None:
    source = tmp_path / "table.txt"
    text, reason = MALFORMED[case]
    source.write_text(text if case in UNNAMED else "$ all_reduce_perf -b 1M\n" + text)
    out = tmp_path / "net.yaml"
    code, stdout, stderr = run_cli(["calibrate", "nccl-tests", str(source), "-o", str(out)])
    assert_refused([case], code, stderr)
    assert not out.exists() and not stdout
    assert f"{source}" in stderr and reason in stderr, stderr


def test_the_malformed_cases_are_refused_only_for_what_they_break(tmp_path: Path) -> None:
    """The unbroken table, named as all_reduce, is accepted: each case above fails on its own
    defect, not on the base table. So are the parts real logs often lack: the '# nThread'
    header, the column header (the layout is the rows'), the Rank lines (2 ranks: the factor,
    or --ranks), all three at once."""
    source = tmp_path / "table.txt"
    lines = ROWS.splitlines()
    variants = {
        "whole": lines,
        "no nThread header": [line for line in lines if "nThread" not in line],
        "no column header": [line for line in lines if "size" not in line],
        "no Rank lines": [line for line in lines if "Rank" not in line],
        "rows alone": [line for line in lines if "float" in line],
    }
    for name, kept in variants.items():
        source.write_text("$ all_reduce_perf -b 1M -e 4M\n" + "\n".join(kept) + "\n")
        for extra in ([], ["--ranks", "2"]):
            argv = ["calibrate", "nccl-tests", str(source), "-o", str(tmp_path / "n"), *extra]
            code, stdout, stderr = run_cli(argv)
            assert code == 0, (name, stderr)
            assert "2 ranks" in stdout, name
    code, _, stderr = run_cli([*argv[:-1], "3"])  # rows alone: --ranks against the factor
    assert_refused(["--ranks 3"], code, stderr)
    assert "busbw / algbw = 1, but all_reduce on 3 ranks has factor 1.333" in stderr


def _special(kind: str, tmp_path: Path) -> Path:
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "huge":
        with path.open("wb") as handle:
            handle.truncate((64 << 20) + 2)  # sparse: 64 MiB of NULs and then some
    elif kind == "binary":
        path.write_bytes(b"# nThread 1 nGpus 1 minBytes 8 maxBytes 8\x00\xff\xfe")
    elif kind == "not utf-8":
        path.write_bytes(b"# nThread 1 nGpus 1 \xff\xfe\n")
    elif kind == "folder":
        path.mkdir()
    return path  # "missing": nothing made


SPECIAL = {
    "fifo": "not a regular file",
    "huge": "more than 67,108,864 bytes",
    "binary": "binary data",
    "not utf-8": "not UTF-8 text",
    "folder": "is a folder",
    "missing": "no such file",
}


@pytest.mark.parametrize("kind", sorted(SPECIAL))
def test_files_that_are_not_text_tables_are_refused(kind: str, tmp_path: Path) -> None:
    source = _special(kind, tmp_path)
    out = tmp_path / "net.yaml"
    code, _, stderr = run_cli(["calibrate", "nccl-tests", str(source), "-o", str(out)])
    assert_refused([kind], code, stderr)
    assert SPECIAL[kind] in stderr and not out.exists()


def test_bad_options_are_refused_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "net.yaml"
    base = ["calibrate", "nccl-tests", str(GH200_2X4.write(tmp_path)), "-o"]
    for extra in (
        ["--holdout", "3 MiB"],
        ["--max-regimes", "4"],
        ["--place", "sideways"],
        ["--algo", "hypercube"],
        ["--min-size", "1 GiB"],
        ["--payload", "lots"],
    ):
        code, _, stderr = run_cli([*base, str(out), *extra])
        assert_refused(extra, code, stderr)
        assert not out.exists()
    code, _, stderr = run_cli([*base, str(tmp_path)])  # a folder where the file goes
    assert_refused(["-o folder"], code, stderr)


def test_leaf_spine_writes_a_spine_to_ask_what_if_of(tmp_path: Path) -> None:
    out = tmp_path / "h100.yaml"
    source = H100_2X8.write(tmp_path)
    argv = ["calibrate", "nccl-tests", str(source), "-o", str(out), "--topology", "leaf-spine"]
    code, stdout, stderr = run_cli([*argv, "--model", "regimes", "-q"])
    assert code == 0, stderr
    line = re.search(r"regime 2: .* latency ([\d.]+) us per link \(([\d.]+) us per message "
                     r"between hosts\)", stdout)  # fmt: skip
    assert line and float(line[2]) == pytest.approx(4 * float(line[1]), rel=1e-3)  # 4 links
    network = yaml.safe_load(out.read_text())
    assert network["topology"] == "leaf_spine" and network["hosts_per_rack"] == 8
    host, spine = (float(network[k]["rate"].split()[0]) for k in ("host_link", "spine_link"))
    assert spine == pytest.approx(8 * host, rel=1e-8)  # non-blocking, not fitted
    fitted = collective_us(out, "8 GiB")
    assert fitted == pytest.approx(us(printed_row(stdout, "8 GiB")[4]), abs=0.06)
    assert fitted == pytest.approx(H100_2X8.printed_us(8 << 30), rel=0.02)  # the row, fitted
    thinner = collective_us(out, "8 GiB", "--set", 'spine_link.rate="400 Gb/s"')
    assert thinner > 5 * fitted  # a thinner inter-node network: what the spine is there for


def test_the_network_file_goes_into_a_scenario_as_it_is(tmp_path: Path) -> None:
    out = tmp_path / "gh200.yaml"
    source = GH200_2X4.write(tmp_path)
    code, _, stderr = run_cli(["calibrate", "nccl-tests", str(source), "-o", str(out), "-q"])
    assert code == 0, stderr
    scenario = {
        "name": "calibrated",
        "traces": [str(TRACE)],
        "networks": [yaml.safe_load(out.read_text())],
        "targets": [3.3],
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    code, stdout, stderr = run_cli(["validate", str(path)])
    assert code == 0, stderr + stdout


def test_csv_is_one_table_and_the_input_is_never_the_output(tmp_path: Path) -> None:
    source = GH200_2X4.write(tmp_path)
    original = source.read_bytes()
    argv = ["calibrate", "nccl-tests", str(source), "-o", str(tmp_path / "n.yaml"), "--csv"]
    code, stdout, stderr = run_cli([*argv, "--model", "regimes"])
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert lines[0].startswith("collective,ranks,size_bytes,role,regime,measured_us")
    assert len(lines) == 1 + len(GH200_2X4.sizes) == 1 + 25
    assert lines[-1].startswith("all_reduce,8,134217728,fit,2,")
    assert float(lines[-1].split(",")[5]) == GH200_2X4.printed_us(128 * MIB)
    code, _, stderr = run_cli(["calibrate", "nccl-tests", str(source), "-o", str(source)])
    assert_refused(["-o input"], code, stderr)
    assert source.read_bytes() == original


def test_a_testbed_table_that_is_not_one_is_refused(tmp_path: Path) -> None:
    import pandas as pd

    measured = pd.read_parquet(MEASURED)
    cases = {
        "text.parquet": None,
        "columns.parquet": measured.drop(columns=["median_s"]),
        "negative.parquet": measured.assign(median_s=-measured["median_s"]),
        "collective.parquet": measured.assign(collective="broadcast"),
    }
    reasons = {
        "text.parquet": "not a Parquet table",
        "columns.parquet": "no column median_s",
        "negative.parquet": "median_s",
        "collective.parquet": "collective 'broadcast'",
    }
    for name, frame in cases.items():
        path = tmp_path / name
        if frame is None:
            path.write_text(GH200_2X4.text())
        else:
            frame.to_parquet(path)
        out = tmp_path / "net.yaml"
        code, _, stderr = run_cli(["calibrate", "testbed", str(path), "-o", str(out)])
        assert_refused([name], code, stderr)
        assert reasons[name] in stderr and not out.exists(), stderr
