"""nccl-tests tables made from transitsim's own model with known links: the parser reads back
what was printed, and the fit recovers the links it was made from (every collective, one and
two regimes). `nccl_text` prints a table as nccl-tests 2.x does; test_hostile_nccl uses it."""

import math

import pytest

from transitsim.base.errors import TransitsimError
from transitsim.calibrate import Link, calibrate, parse_nccl_tests
from transitsim.calibrate.model import Shape, predict_s
from transitsim.calibrate.nccl_tests import busbw_factor
from transitsim.network.bandwidth import bus_bandwidth_bps

SIZES = [1 << k for k in range(10, 31)]  # 1 KiB .. 1 GiB


def _time_text(us: float) -> str:
    """nccl-tests' time column: more decimals for short times."""
    if us < 100:
        return f"{us:.2f}"
    if us < 10000:
        return f"{us:.1f}"
    return f"{us:.0f}"


def nccl_text(
    collective: str,
    ranks: int,
    times_us: dict[int, float],
    *,
    hosts: int = 2,
    old: bool = False,
    tag: str = "",
    noise: bool = True,
) -> str:
    """A whole nccl-tests output (header, Rank lines, table, footer) for these sizes' times;
    `old` prints the pre-2.13 layout (no Group, no root column, `error` for #wrong)."""
    per_host = max(ranks // hosts, 1)
    lines = [
        f"$ mpirun -np {ranks} ./build/{collective}_perf -b 1K -e 1G -f 2 -g 1",
        f"# nThread 1 nGpus 1 minBytes {min(times_us)} maxBytes {max(times_us)} step: 2(factor) "
        "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for rank in range(ranks):
        group = "" if old else "Group  0 "
        lines.append(
            f"#  Rank {rank:2d} {group}Pid {1000 + rank:6d} on node-{rank // per_host:03d} "
            f"device {rank % per_host:2d} [0x{rank:02x}] NVIDIA H100 80GB HBM3"
        )
    if noise:
        lines.append("node-000:1000:1000 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>")
        lines.append("NCCL version 2.21.5+cuda12.4")
    lines.append("#")
    if old:
        lines.append(
            "#       size         count      type   redop     time   algbw   busbw  error"
            "     time   algbw   busbw  error"
        )
    else:
        lines.append(
            "#       size         count      type   redop    root     time   algbw   busbw "
            "#wrong     time   algbw   busbw #wrong"
        )
    lines.append("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)")
    redop = "sum" if collective in ("all_reduce", "reduce_scatter") else "none"
    factor = busbw_factor(collective, ranks)
    for index, (size, us) in enumerate(sorted(times_us.items())):
        text = _time_text(us)
        algbw = size / float(text) / 1e3
        busbw = algbw * factor
        fields = f"{text:>8} {algbw:7.2f} {busbw:7.2f}"
        wrong = "0e+00" if old else "0"
        root = "" if old else "    -1"
        row = f"{size:12d}  {size // 4:12d}     float  {redop:>6}{root} {fields} {wrong:>6}"
        lines.append(f"{row} {fields} {wrong:>6}")
        if noise and index == 2:
            lines.append("node-001:1001:1020 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] via NET")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 12.345 ", "#"]
    return "".join(f"{tag}{line}\n" for line in lines)


def model_times(collective: str, ranks: int, links: dict[int, Link]) -> dict[int, float]:
    """Microseconds per size from transitsim's prediction; links maps a size threshold (the
    smallest size it applies to) to the link used from there up."""
    out = {}
    for size in SIZES:
        link = links[max(t for t in links if t <= size)]
        shape = Shape("switch", ranks, ranks)
        out[size] = predict_s(collective, "ring_allreduce", shape, size, link) * 1e6
    return out


@pytest.mark.parametrize("old", [False, True])
def test_the_parser_reads_back_what_nccl_tests_prints(old: bool) -> None:
    times = model_times("all_reduce", 16, {0: Link(4e11, 3e-6)})
    table = parse_nccl_tests(nccl_text("all_reduce", 16, times, old=old), "synthetic")
    assert table.collective == "all_reduce" and table.ranks == 16
    assert table.ranks_per_host == {"node-000": 8, "node-001": 8}
    assert [r.size_bytes for r in table.rows] == SIZES
    for row in table.rows:
        assert row.time_s == pytest.approx(times[row.size_bytes] * 1e-6, rel=5e-3)
        assert row.in_time_s == pytest.approx(row.time_s)
    assert table.nccl_version == "2.21.5+cuda12.4"
    assert table.avg_busbw_gbps == pytest.approx(12.345)


def test_mpirun_tags_and_indentation_are_stripped() -> None:
    times = model_times("all_gather", 8, {0: Link(2e11, 2e-6)})
    text = nccl_text("all_gather", 8, times, tag="[1,0]<stdout>:")
    indented = "\n".join("    " + line for line in text.splitlines())
    for variant in (text, indented):
        table = parse_nccl_tests(variant, "tagged")
        assert table.collective == "all_gather" and len(table.rows) == len(SIZES)


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter",
                                        "broadcast", "alltoall"])  # fmt: skip
def test_the_fit_recovers_the_link_a_table_was_made_from(collective: str) -> None:
    link = Link(3.2e11, 4e-6)
    text = nccl_text(collective, 8, model_times(collective, 8, {0: link}))
    table = parse_nccl_tests(text, "synthetic")
    assert table.collective == collective
    fit = calibrate([table], max_regimes=1)
    (regime,) = fit.regimes
    assert regime.link.payload_bps == pytest.approx(link.payload_bps, rel=0.01)
    assert regime.link.latency_s == pytest.approx(link.latency_s, rel=0.05)
    assert fit.worst("fit") < 0.005


def test_a_protocol_switch_is_found_where_it_is() -> None:
    """Below 16 MiB a latency-cheap, slow link; from 16 MiB a fast one with more latency: two
    regimes, cut between 8 MiB and 16 MiB, each link recovered."""
    small, large = Link(1e11, 1e-6), Link(8e11, 2e-5)
    times = model_times("all_reduce", 16, {0: small, 16 << 20: large})
    fit = calibrate([parse_nccl_tests(nccl_text("all_reduce", 16, times), "two")])
    assert len(fit.regimes) == 2
    assert fit.regimes[0].last_bytes == 8 << 20 and fit.regimes[1].first_bytes == 16 << 20
    for regime, link in zip(fit.regimes, (small, large), strict=True):
        assert regime.link.payload_bps == pytest.approx(link.payload_bps, rel=0.01)
    assert fit.regimes[1].link.latency_s == pytest.approx(large.latency_s, rel=0.05)
    assert fit.worst("fit") < 0.01
    single = calibrate([parse_nccl_tests(nccl_text("all_reduce", 16, times), "two")],
                       max_regimes=1)  # fmt: skip
    assert single.worst("fit") > 0.10  # one α-β cannot hold both: why regimes exist


def test_busbw_factors_are_those_of_transitsim_network_bandwidth() -> None:
    for ranks in (2, 8, 16):
        time_s, payload = 1e-3, 1 << 20
        cases = [("all_reduce", "ring_allreduce", payload)]
        cases.append(("all_gather", "ring_allgather", payload // ranks))
        for collective, algo, data in cases:
            expected = bus_bandwidth_bps(algo, ranks, data, time_s) / 8e9
            algbw = payload / time_s / 1e9
            assert algbw * busbw_factor(collective, ranks) == pytest.approx(expected)
    assert math.isclose(busbw_factor("broadcast", 8), 1.0)


def test_leaf_spine_recovers_the_link_of_a_table_made_on_one() -> None:
    """Ranks on two hosts of 8: a message between hosts crosses four links, inside one two."""
    link, shape = Link(2.4e11, 5e-6), Shape("leaf_spine", 16, 8)
    times = {s: predict_s("all_reduce", "ring_allreduce", shape, s, link) * 1e6 for s in SIZES}
    table = parse_nccl_tests(nccl_text("all_reduce", 16, times), "leaf-spine")
    fit = calibrate([table], topology="leaf_spine", max_regimes=1)
    assert fit.shape == shape
    assert fit.regimes[0].link.payload_bps == pytest.approx(link.payload_bps, rel=0.01)
    assert fit.regimes[0].link.latency_s == pytest.approx(link.latency_s, rel=0.05)
    flat = calibrate([table], topology="switch", max_regimes=1)
    # on one switch two links carry what the ring's 2 cross-host steps (of 16) spent on four
    assert 1.05 * link.latency_s < flat.regimes[0].link.latency_s < 2 * link.latency_s


def test_leaf_spine_needs_the_hosts_of_the_rank_lines() -> None:
    times = model_times("all_reduce", 8, {0: Link(1e11, 1e-6)})
    one_host = parse_nccl_tests(nccl_text("all_reduce", 8, times, hosts=1), "one host")
    with pytest.raises(TransitsimError, match="needs the ranks on 2 or more hosts"):
        calibrate([one_host], topology="leaf_spine")
    with pytest.raises(TransitsimError, match="expected one of switch, leaf-spine"):
        calibrate([one_host], topology="fat_tree")


@pytest.mark.parametrize(
    ("collective", "ranks", "expected"),
    [
        ("all_reduce", 8, "all_reduce"),
        ("broadcast", 8, "broadcast"),
        ("reduce_scatter", 8, "reduce_scatter"),  # (n-1)/n and a reduction: only this one
        ("all_reduce", 2, "all_reduce"),  # factor 1 on 2 ranks: told apart by the redop
        ("broadcast", 2, "broadcast"),
    ],
)
def test_an_unnamed_table_is_told_by_its_busbw_factor(collective, ranks, expected) -> None:
    times = model_times(collective, ranks, {0: Link(3e11, 2e-6)})
    text = nccl_text(collective, ranks, times, hosts=1)
    unnamed = "\n".join(line for line in text.splitlines() if "_perf" not in line)
    table = parse_nccl_tests(unnamed, "unnamed")
    assert table.collective == expected
    assert any("inferred from busbw / algbw" in note for note in table.notes)


def test_an_unnamed_all_gather_is_not_guessed() -> None:
    times = model_times("all_gather", 8, {0: Link(3e11, 2e-6)})
    text = nccl_text("all_gather", 8, times, hosts=1)
    unnamed = "\n".join(line for line in text.splitlines() if "_perf" not in line)
    with pytest.raises(TransitsimError, match="fits all_gather and alltoall alike"):
        parse_nccl_tests(unnamed, "unnamed")
    assert parse_nccl_tests(unnamed, "named", "all_gather").collective == "all_gather"
