"""Issue 44 item 4: the node calibration (`transitsim calibrate node`, calibrate/node_fit.py) on
every real nccl-tests table, and what a fit on N nodes predicts for more.

    python benchmarks/bench_node_calibration.py [FOLDER]

Per file (FOLDER: ../shared/nccl-tests beside the checkout), one markdown row: the node assumed
(GPUs a node, NCCL's GPU generation and CPU vendor, from the file's SOURCES.txt where the file
does not say), the values fitted, the fit's worst / median |error| on its rows of at least 64 KiB
and on every second size held out, and alpha-beta's; issue 42's targets (10 % / 3 % fitted,
15 % / 5 % held out). Then the scaling check the issue names: the node fitted on the 2x1 Alps
GH200 table, given the 2x4 table's 4 GPUs a node (NVLink as below), predicting the 2x4 table.
docs/calibration.md quotes this output.
"""

import sys
from pathlib import Path

from transitsim.calibrate.accuracy import accuracy
from transitsim.calibrate.model import exchange_for
from transitsim.calibrate.nccl_tests import read_nccl_tests
from transitsim.calibrate.node_fit import NODE_MIN_SIZE_BYTES, calibrate_node, node_network
from transitsim.network import simulate_exchange

sys.path.insert(0, str(Path(__file__).resolve().parent))  # table_main.py, beside this script
from table_main import table_main  # noqa: E402

# file: (GPUs a node, GPU generation, CPU vendor, collective) where the file does not say
NODES = {
    "alps-2x1-gh200-all_reduce.txt": (1, "hopper", "intel", None),
    "alps-2x4-gh200-all_reduce.txt": (4, "hopper", "intel", None),
    "awsome-2xp4de-a100-efa-all_reduce.txt": (8, "ampere", "intel", None),
    "awsome-2xp5-h100-efa-eks-all_reduce-excerpt.txt": (8, "hopper", "amd", None),
    "awsome-p5-awsbatch-8rank-all_reduce.txt": (8, "hopper", "amd", None),
    "deepops-2xdgx1-v100-roce-all_reduce.txt": (8, "volta", "intel", None),
    "deepops-2xdgxa100-ib-all_reduce.txt": (8, "ampere", "amd", None),
    "gcp-a3high-2x8-h100-tcpx-all_gather.txt": (8, "hopper", "intel", "all_gather"),
}
# an Alps node's 4 GH200 are joined pairwise by 6 NVLink 4 links (25 GB/s each way each): what a
# ring between two of them crosses, each way
ALPS_NVLINK_BPS = 150e9 * 8


def _pair(errors) -> str:
    return "-" if errors is None else f"{errors.worst * 100:.1f} % / {errors.median * 100:.1f} %"


def _values(values: dict[str, float]) -> str:
    return ", ".join(
        f"{k.removesuffix('_bps')} {v / 8e9:.3g} GB/s" if k.endswith("bps")
        else f"{k.removesuffix('_s')} {v * 1e6:.3g} us"
        for k, v in values.items()
    )  # fmt: skip


def row(path: Path, folder: Path) -> str:
    g, gpu, cpu, collective = NODES[path.name]
    table = read_nccl_tests(path, collective)
    options = {"gpus_per_node": g, "gpu": gpu, "cpu": cpu}
    final = calibrate_node(table, **options)
    found = accuracy(
        final, lambda sizes: calibrate_node(table, holdout=sizes, **options), table.collective,
        table.ranks,
    )  # fmt: skip
    fitted, held = found.fitted, found.held_out
    met = (
        fitted.worst <= 0.10 and fitted.median <= 0.03
        and held is not None and held.worst <= 0.15 and held.median <= 0.05
    )  # fmt: skip
    return (
        f"| `{path.relative_to(folder).as_posix()}` | {table.ranks // g} x {g} {gpu}/{cpu} "
        f"| {_values(final.values)} | {_pair(fitted)} | {_pair(held)} "
        f"| {_pair(found.alpha_beta_fitted)} | {_pair(found.alpha_beta_held_out)} "
        f"| {'met' if met else 'not met'} |"
    )


def scaling_lines(folder: Path) -> list[str]:
    """The node fitted on 2x1 predicting 2x4 (the rows of at least 64 KiB)."""
    small = read_nccl_tests(folder / "alps-2x1-gh200-all_reduce.txt")
    big = read_nccl_tests(folder / "alps-2x4-gh200-all_reduce.txt")
    fit = calibrate_node(small, gpus_per_node=1)
    values = {**fit.values, "nvlink_bps": ALPS_NVLINK_BPS}
    network = node_network(big.ranks, 4, values, fit.gpu, fit.cpu)
    out = [
        f"2x1 -> 2x4: node fitted on `alps-2x1-gh200-all_reduce.txt` ({_values(fit.values)}), "
        f"nvlink {ALPS_NVLINK_BPS / 8e9:g} GB/s, predicting `alps-2x4-gh200-all_reduce.txt`:",
        "",
        "| size | measured (us) | predicted (us) | error | ran |",
        "|---|---|---|---|---|",
    ]
    errors = []
    for r in big.rows:
        if r.size_bytes < NODE_MIN_SIZE_BYTES:
            continue
        exchange = exchange_for("all_reduce", "ring_allreduce", big.ranks, r.size_bytes)
        result = simulate_exchange(network, exchange)
        error = result.time_s / r.time_s - 1
        errors.append(abs(error))
        out.append(
            f"| {r.size_bytes:,} | {r.time_s * 1e6:,.1f} | {result.time_s * 1e6:,.1f} "
            f"| {error * 100:+.1f} % | {result.algo}/{result.protocol} |"
        )
    errors.sort()
    out += [
        "",
        f"worst |error| {errors[-1] * 100:.1f} %, median {errors[len(errors) // 2] * 100:.1f} %",
    ]
    return out


def table_lines(folder: Path) -> list[str]:
    header = (
        "| file | nodes x GPUs | fitted | fitted worst / median | held out worst / median "
        "| alpha-beta fitted | alpha-beta held out | targets |"
    )
    lines = [header, "|" + "---|" * 8]
    files = sorted([*folder.glob("*.txt"), *folder.glob("more/*.txt")])
    for path in files:
        if path.name in NODES:
            lines.append(row(path, folder))
    return [*lines, "", *scaling_lines(folder)]


def main(argv: list[str]) -> int:
    return table_main("bench_node_calibration", table_lines, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
