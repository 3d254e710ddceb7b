"""`transitsim collective`: figures printed, JSON that agrees with the library, clean errors."""

import json

import pytest

from transitsim.cli import main
from transitsim.network import Exchange, LinkSpec, NetworkSpec, closed_form_time_s


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(["collective", *argv])
    out, err = capsys.readouterr()
    return info.value.code, out, err


def test_collective_prints_time_closed_form_and_bytes(capsys):
    code, out, _ = _run(
        capsys,
        "--algo", "ring-allreduce",
        "--workers", "8",
        "--bytes", "31666944",
        "--bandwidth", "200 Gb/s",
        "--latency", "5 us",
    )  # fmt: skip
    assert code == 0
    assert "simulated time" in out and "closed form" in out
    assert "55,417,152" in out  # 2 (N-1)/N x 31,666,944 sent and received by every host


def test_collective_json_agrees_with_the_closed_form(capsys):
    code, out, _ = _run(
        capsys,
        "--algo", "hierarchical",
        "--workers", "8",
        "--bytes", "8 MB",
        "--bandwidth", "200 Gb/s",
        "--datacentres", "2",
        "--wan", "100 Gb/s",
        "--distance", "1000 km",
        "--json",
    )  # fmt: skip
    assert code == 0
    summary = json.loads(out)
    network = NetworkSpec(
        "x",
        "datacentres",
        8,
        LinkSpec(200e9),
        datacentres=2,
        wan_link=LinkSpec(100e9, length_m=1e6),
    )
    expected = closed_form_time_s(network, Exchange("hierarchical", 8_000_000))
    assert summary["time_s"] == pytest.approx(expected, rel=1e-9)
    assert summary["closed_form_s"] == pytest.approx(expected, rel=1e-12)
    assert len(summary["bytes_sent"]) == 8


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--algo", "ring", "--workers", "8", "--bytes", "1", "--bandwidth", "1 Gb/s"], "--algo"),
        (["--algo", "tree", "--workers", "8", "--bytes", "1", "--bandwidth", "200"], "rate"),
        (["--algo", "tree", "--workers", "0", "--bytes", "1", "--bandwidth", "1 Gb/s"], "workers"),
        (
            ["--algo", "tree", "--workers", "4", "--bytes", "1", "--bandwidth", "1 Gb/s",
             "--datacentres", "2"],
            "--wan",
        ),
    ],
)  # fmt: skip
def test_collective_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert message in err and err.count("\n") == 1


def _busbw_gb_s(capsys, *argv: str) -> float:
    code, out, err = _run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)["busbw_bps"] / 8e9


@pytest.mark.parametrize(
    ("preset", "algo", "published_gb_s"),
    [
        ("8xh100-nvlink", "ring-allreduce", 370.0),  # NCCL ring over NVLink 4
        ("8xh100-nvls", "ring-allreduce", 370.0),  # a ring passes the summing switch by
        ("8xh100-nvls", "switch-sum", 480.0),  # NVLink SHARP: summed in the NVSwitch
    ],
)
def test_nvlink_presets_reproduce_the_published_bus_bandwidth(capsys, preset, algo, published_gb_s):
    busbw = _busbw_gb_s(capsys, "--network", preset, "--algo", algo, "--bytes", "1 GiB")
    assert busbw == pytest.approx(published_gb_s, rel=0.02)


def test_bus_bandwidth_is_the_link_payload_rate_for_a_large_ring(capsys):
    busbw = _busbw_gb_s(
        capsys,
        "--algo", "ring-allreduce",
        "--workers", "4",
        "--bytes", "4 GB",
        "--bandwidth", "100 GB/s",
        "--efficiency", "0.5",
    )  # fmt: skip
    assert busbw == pytest.approx(50.0, rel=1e-9)  # no latency: exactly rate x efficiency


def test_collective_network_and_bandwidth_do_not_mix(capsys):
    code, _, err = _run(
        capsys, "--network", "8xh100-nvlink", "--bandwidth", "1 Gb/s", "--algo", "tree",
        "--bytes", "1",
    )  # fmt: skip
    assert code == 2 and "not both" in err
    code, _, err = _run(
        capsys, "--network", "8xh100-nvlink", "--workers", "4", "--algo", "tree", "--bytes", "1"
    )
    assert code == 2 and "disagrees" in err


SWEEP = ["--workers", "8", "--bandwidth", "100 Gb/s", "--latency", "5 us"]


def _table_rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line and not line.startswith("#")]


def test_a_size_sweep_prints_nccl_tests_columns(capsys):
    """-b 8 -e 1K -f 2, as nccl-tests takes them: eight sizes, its header and columns; count
    is size / 4 for float; busbw is algbw x 2(N-1)/N; the time is the ring's alpha-beta form."""
    code, out, err = _run(capsys, "--algo", "ring-allreduce", *SWEEP, "-b", "8", "-e", "1K")
    assert code == 0, err
    header = [line.split() for line in out.splitlines() if line.startswith("#")]
    assert ["#", "size", "count", "type", "redop", "time", "algbw", "busbw"] in header
    assert ["#", "(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)"] in header
    rows = _table_rows(out)
    assert [int(row[0]) for row in rows] == [8 * 2**k for k in range(8)]
    assert all(int(row[1]) == int(row[0]) // 4 and row[2:4] == ["float", "sum"] for row in rows)
    network = NetworkSpec("cli", "switch", 8, LinkSpec(100e9, latency_s=5e-6))
    for row in rows:
        closed = closed_form_time_s(network, Exchange("ring_allreduce", int(row[0])))
        shown = 0.05 if closed >= 100e-6 else 0.005  # nccl-tests: 1 decimal from 100 us, else 2
        assert float(row[4]) == pytest.approx(closed * 1e6, abs=shown + 1e-9)
    assert out.splitlines()[-1].startswith("# Avg bus bandwidth    : ")


def test_a_sweep_as_json_agrees_with_the_table_and_counts_an_all_gather_per_rank(capsys):
    argv = ["--algo", "ring-allgather", *SWEEP, "-b", "1K", "-e", "1M", "-f", "32", "-d", "half"]
    code, out, _ = _run(capsys, *argv, "--json")
    assert code == 0
    records = json.loads(out)
    assert [r["size_bytes"] for r in records] == [1024, 32768, 1048576]
    for record in records:  # an all-gather's size is its whole output: N x what a rank sends
        assert record["count"] * 2 * 8 == record["size_bytes"] == record["payload_bytes"] * 8
        assert record["redop"] == "none" and record["type"] == "half"
        assert record["busbw_GBps"] == pytest.approx(record["algbw_GBps"] * 7 / 8)
    code, table, _ = _run(capsys, *argv)
    rows = _table_rows(table)
    assert [float(row[6]) for row in rows] == [round(r["busbw_GBps"], 2) for r in records]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-b", "1K", "--bytes", "8"], "not both"),
        (["-b", "1M", "-e", "1K"], "below --minbytes"),
        (["-b", "8", "-e", "1K", "-f", "1"], "--stepfactor"),
        (["-b", "8", "-e", "4x"], "--maxbytes"),
        (["-b", "8", "-d", "float7"], "--datatype"),
        ([], "--bytes"),
    ],
)
def test_a_bad_sweep_is_one_line_and_exit_2(capsys, extra, message):
    code, _, err = _run(capsys, "--algo", "tree", *SWEEP, *extra)
    assert code == 2
    assert message in err and err.count("\n") == 1


def test_nccl_sizes_are_powers_of_1024_and_transitsim_sizes_are_as_written():
    from transitsim.commands.collective_cmd import parse_sweep_size

    assert parse_sweep_size("1G", "-e") == 2**30
    assert parse_sweep_size("128K", "-b") == 131072
    assert parse_sweep_size("8", "-b") == 8
    assert parse_sweep_size("32 MB", "-b") == 32_000_000


def test_slot_bytes_help_names_the_real_default(capsys, monkeypatch):
    """The default piece is one 4 KiB packet, not the whole payload (issue 24 item 4)."""
    from transitsim.network.spec import AGG_PIECE_BYTES

    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = _run(capsys, "--help")
    assert code == 0
    assert f"{AGG_PIECE_BYTES:,} B pieces" in out
    assert "whole payload" not in out
