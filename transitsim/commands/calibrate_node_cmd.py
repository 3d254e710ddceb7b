"""`transitsim calibrate node FILE -o NET.yaml`: fit the node (NICs, NVLink) to one nccl-tests
table, print each row beside the prediction, the held-out figures and alpha-beta's, and write a
network that scales with `--set workers=N` (calibrate/node_fit.py, docs/calibration.md)."""

import sys
from pathlib import Path

import typer

from transitsim import __version__
from transitsim.base.atomic import check_writable_file, write_text_atomic
from transitsim.base.errors import TransitsimError
from transitsim.calibrate.accuracy import accuracy
from transitsim.calibrate.nccl_tests import read_nccl_tests
from transitsim.calibrate.node_fit import calibrate_node, node_yaml
from transitsim.network.nccl_tuner import GPUS


def _pair(errors) -> str:
    return "-" if errors is None else f"{errors.worst * 100:.1f} % / {errors.median * 100:.1f} %"


def node_command(
    file: Path = typer.Argument(..., metavar="FILE", help="one nccl-tests output"),
    output: Path = typer.Option(..., "--output", "-o", help="the network YAML to write"),
    gpus_per_node: int | None = typer.Option(
        None, "--gpus-per-node", help="GPUs a node (default: the Rank lines' ranks a host, else 1)"
    ),
    gpu: str = typer.Option("hopper", "--gpu", help=f"NCCL's GPU generation: {', '.join(GPUS)}"),
    cpu: str = typer.Option("intel", "--cpu", help="the hosts' CPU vendor: intel or amd"),
    collective: str | None = typer.Option(
        None, "--collective", help="for a file that does not name its test"
    ),
    ranks: int | None = typer.Option(None, "--ranks", help="for a file without Rank lines"),
    no_holdout: bool = typer.Option(False, "--no-holdout", help="skip the held-out refit"),
    name: str | None = typer.Option(None, "--name", help="the network's name"),
) -> int:
    """Fit the node (NIC and NVLink rates and latencies) to an nccl-tests table; write it."""
    if gpu not in GPUS:
        raise TransitsimError(f"--gpu must be one of {', '.join(GPUS)}, got {gpu!r}")
    if cpu not in ("intel", "amd"):
        raise TransitsimError(f"--cpu must be intel or amd, got {cpu!r}")
    check_writable_file(output, "network file")
    if file.exists() and output.exists() and file.resolve() == output.resolve():
        raise TransitsimError(f"-o {output}: is the table read; give another file")
    table = read_nccl_tests(file, collective and collective.replace("-", "_"), ranks)
    options = {"gpus_per_node": gpus_per_node, "gpu": gpu, "cpu": cpu}
    final = calibrate_node(table, **options)

    def refit(sizes: list[int]):
        try:
            return calibrate_node(table, holdout=sizes, **options)
        except TransitsimError:
            return None

    found = accuracy(final, None if no_holdout else refit, table.collective, table.ranks)
    print(f"{'size':>12}  {'measured us':>12}  {'predicted us':>12}  {'error':>8}  ran")
    for point, predicted in zip(final.points, final.predicted_s, strict=True):
        error = predicted / point.measured_s - 1
        print(
            f"{point.row.size_bytes:>12}  {point.measured_s * 1e6:>12.1f}  "
            f"{predicted * 1e6:>12.1f}  {error * 100:>+7.1f}%  {point.role}"
        )
    values = ", ".join(
        f"{k} {v / 1e9:.4g} Gb/s" if k.endswith("bps") else f"{k} {v * 1e6:.4g} us"
        for k, v in final.values.items()
    )
    print(f"node: {final.nodes} node(s) x {final.gpus_per_node} GPU(s); fitted {values}")
    print(
        f"fitted {_pair(found.fitted)} (worst / median); held out {_pair(found.held_out)}; "
        f"alpha-beta fitted {_pair(found.alpha_beta_fitted)}, held out "
        f"{_pair(found.alpha_beta_held_out)}"
    )
    command = f"transitsim calibrate node (transitsim {__version__})"
    write_text_atomic(output, node_yaml(final, name or f"node-{file.stem}", command))
    print(f"wrote {output}: scale with --set workers=N", file=sys.stderr)
    return 0
