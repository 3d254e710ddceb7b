"""Fit the *node*, not one opaque network: `calibrate nccl-tests --model node` (issue 44 item 4).

The network is a rail-optimised cluster (network/fabrics/rail.py) of the table's nodes, G GPUs a
node on their NVLink switch, GPU g's NIC on rail g, in NCCL mode with NCCL's own tuner and its
protocols' defaults (network/nccl_tuner.py, spec.NCCL_DEFAULTS). What is fitted is the node's
hardware, up to four values:

- the NIC's payload rate and its latency per link (where the table spans two nodes or more);
- the NVLink's payload rate each way and its latency per link (where a node holds two GPUs or
  more).

Everything else (protocols, channels, NCCL's choice of algorithm and protocol) is NCCL's. So the
network written scales: `--set nodes=N` (or `workers` = N x gpus_per_node) is the same cluster on
more nodes, each NIC, NVLink and NCCL's tuner as before. The fit is least squares on the log of
the relative error over rows of at least `min_size` (Levenberg-Marquardt on the values'
logarithms, the Jacobian by finite differences of engine runs): four numbers at most.
"""

import re
from dataclasses import dataclass, field

import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.calibrate.fit import PLACES, Point, fit_points
from transitsim.calibrate.model import exchange_for
from transitsim.calibrate.nccl_tests import Table
from transitsim.network import NetworkSpec, simulate_exchange
from transitsim.network.spec import LinkSpec, NcclSpec, SwitchSpec

NODE_MIN_SIZE_BYTES = 64 << 10
NODE_CHANNELS = 16
_ITERATIONS = 8
_STARTS = (0.5, 1.0, 2.0)
_STEP = 0.02


@dataclass
class NodeFit:
    """The fitted node of one table: the values, every row's prediction, and the roles."""

    table: Table
    gpus_per_node: int
    gpu: str
    cpu: str
    channels: int
    values: dict[str, float]  # nic_bps, nic_latency_s, nvlink_bps, nvlink_latency_s (those fitted)
    points: list[Point]
    min_size: int = NODE_MIN_SIZE_BYTES
    predicted_s: list[float] = field(default_factory=list)
    chosen: list[str] = field(default_factory=list)

    @property
    def parameters(self) -> int:
        return len(self.values)

    @property
    def nodes(self) -> int:
        return self.table.ranks // self.gpus_per_node

    def network(self, name: str = "calibrated-node", workers: int | None = None) -> NetworkSpec:
        """The fitted cluster; `workers` another number of GPUs (whole nodes) on the same nodes."""
        return node_network(
            workers or self.table.ranks,
            self.gpus_per_node,
            self.values,
            self.gpu,
            self.cpu,
            self.channels,
            name,
        )

    def worst(self, role: str) -> float | None:
        errors = self._errors(role)
        return max(errors) if errors else None

    def median(self, role: str) -> float | None:
        errors = self._errors(role)
        return float(np.median(errors)) if errors else None

    def _errors(self, role: str) -> list[float]:
        return [
            abs(predicted / p.measured_s - 1)
            for p, predicted in zip(self.points, self.predicted_s, strict=True)
            if p.role == role and p.row.size_bytes >= self.min_size
        ]


def node_network(
    workers: int,
    gpus_per_node: int,
    values: dict[str, float],
    gpu: str,
    cpu: str,
    channels: int = NODE_CHANNELS,
    name: str = "calibrated-node",
) -> NetworkSpec:
    """A rail-optimised cluster of `workers` GPUs, `gpus_per_node` a node, with these values (a
    value not given: a rate too high to bind, no latency)."""
    nic = LinkSpec(values.get("nic_bps", 1e15), latency_s=values.get("nic_latency_s", 0.0))
    nvlink = None
    if gpus_per_node > 1:
        nvlink = LinkSpec(
            values.get("nvlink_bps", 1e15), latency_s=values.get("nvlink_latency_s", 0.0)
        )
    return NetworkSpec(
        name,
        "rail_optimised",
        workers,
        nic,
        gpus_per_node=gpus_per_node,
        nvlink=nvlink,
        switch=SwitchSpec(),
        nccl=NcclSpec(channels=channels, algorithm="auto", gpu=gpu, cpu=cpu),
    )


def _predict(fit: NodeFit, values: dict[str, float], points: list[Point]) -> list[float]:
    network = node_network(
        fit.table.ranks, fit.gpus_per_node, values, fit.gpu, fit.cpu, fit.channels
    )
    out = []
    for point in points:
        exchange = exchange_for(fit.table.collective, "ring_allreduce", fit.table.ranks,
                                point.row.size_bytes)  # fmt: skip
        out.append(simulate_exchange(network, exchange).time_s)
    return out


def _residuals(fit: NodeFit, values: dict[str, float], points: list[Point]) -> np.ndarray:
    measured = np.array([p.measured_s for p in points])
    return np.log(np.array(_predict(fit, values, points)) / measured)


def _solve(fit: NodeFit, values: dict[str, float], points: list[Point]) -> dict[str, float]:
    """Levenberg-Marquardt on log(predicted / measured) over the values' logarithms: each step's
    Jacobian by finite differences (2 % a value), a step at most a factor e a value."""
    keys = list(values)
    x = np.log(np.array([values[k] for k in keys]))

    def at(v: np.ndarray) -> dict[str, float]:
        return dict(zip(keys, np.exp(v), strict=True))

    r = _residuals(fit, at(x), points)
    damping = 1e-2
    for _ in range(_ITERATIONS):
        jac = np.empty((len(r), len(x)))
        for j in range(len(x)):
            moved = x.copy()
            moved[j] += _STEP
            jac[:, j] = (_residuals(fit, at(moved), points) - r) / _STEP
        normal, grad = jac.T @ jac, jac.T @ r
        while damping <= 1e6:
            scaled = normal + damping * np.diag(np.diag(normal) + 1e-9)
            step = np.clip(-np.linalg.solve(scaled, grad), -1.0, 1.0)
            trial = _residuals(fit, at(x + step), points)
            if trial @ trial < r @ r:
                x, r, damping = x + step, trial, max(damping / 3, 1e-6)
                break
            damping *= 10
        else:
            break
    return at(x)


def _start(table: Table, gpus_per_node: int, points: list[Point]) -> dict[str, float]:
    """First guesses: the largest row's bus bandwidth as the NIC's share (one NIC a GPU) or the
    NVLink's (one node; on several, twice it: where the NVLink starts too fast to bind, the
    search cannot feel it and never brings it down), 1 us latencies."""
    largest = max(points, key=lambda p: p.row.size_bytes)
    busbw_bps = largest.row.busbw_gbps * 8e9 or 1e9
    nodes = table.ranks // gpus_per_node
    values = {}
    if nodes > 1:
        values["nic_bps"] = busbw_bps / gpus_per_node
        values["nic_latency_s"] = 1e-6
    if gpus_per_node > 1:
        values["nvlink_bps"] = busbw_bps if nodes == 1 else 2 * busbw_bps
        values["nvlink_latency_s"] = 0.5e-6
    return values


def calibrate_node(
    table: Table,
    *,
    gpus_per_node: int | None = None,
    gpu: str = "hopper",
    cpu: str = "intel",
    place: str = "out",
    min_size: int = NODE_MIN_SIZE_BYTES,
    holdout: list[int] | None = None,
    channels: int = NODE_CHANNELS,
) -> NodeFit:
    """Fit the node of one table (the module doc). gpus_per_node: from the table's Rank lines
    where it has them (every host the same), else given, else 1."""
    if table.collective not in ("all_reduce", "all_gather", "reduce_scatter"):
        raise TransitsimError(f"--model node: {table.collective} is not timed by a schedule")
    if place not in PLACES:
        raise TransitsimError(f"--place must be one of {', '.join(PLACES)}, got {place!r}")
    g = gpus_per_node or gpus_per_host(table) or 1
    if g < 1 or table.ranks % g:
        raise TransitsimError(f"--gpus-per-node {g} does not divide the {table.ranks} ranks")
    points = fit_points([table], place, min_size, holdout or [])
    fitted = [p for p in points if p.role == "fit"]
    if len(fitted) < 2:
        raise TransitsimError(f"--model node: {len(fitted)} row(s) of at least {min_size:,} B")
    fit = NodeFit(table, g, gpu, cpu, channels, {}, points, min_size)
    best = None
    for scale in _STARTS:  # the NIC's (or the NVLink's) first guess, halved and doubled too
        start = {
            k: v * scale if k.endswith("bps") else v for k, v in _start(table, g, fitted).items()
        }
        values = _solve(fit, start, fitted)
        cost = float(np.sum(_residuals(fit, values, fitted) ** 2))
        if best is None or cost < best[0]:
            best = (cost, values)
    assert best is not None
    fit.values = values = best[1]
    fit.predicted_s = _predict(fit, values, points)
    return fit


# A GPU's name as the Rank lines print it -> NCCL's generation, its compCapIndex by compute
# capability (src/graph/tuning.cc: 7.x Volta's, 8.x Ampere's (Ada's 8.9 too), 9.0 Hopper's,
# 10.x Blackwell's), by the model names NVIDIA's GPUs carry.
GENERATIONS = (
    ("blackwell", re.compile(r"\bG?B(100|200|300)\b", re.I)),
    ("hopper", re.compile(r"\bG?H(100|200|800|20)\b", re.I)),
    (
        "ampere",
        re.compile(r"\bA(100|800|40|30|16|10G?|2)\b|\bRTX (A\d{4}|[34]0\d0)|\bL40?S?\b", re.I),
    ),
    ("volta", re.compile(r"\bV100\b|\bTitan V\b|\bT4\b|\bRTX 20\d0", re.I)),
)


def gpu_generation(names: set[str]) -> str | None:
    """NCCL's GPU generation of the GPUs named, where every name gives the same one."""
    found = {
        next((gen for gen, pattern in GENERATIONS if pattern.search(name)), None) for name in names
    }
    return found.pop() if len(found) == 1 else None


def gpus_per_host(table: Table) -> int | None:
    """The GPUs a host holds, where the Rank lines say and every host holds as many."""
    counts = set(table.ranks_per_host.values())
    return counts.pop() if len(counts) == 1 else None


def node_yaml(fit: NodeFit, name: str, command: str) -> str:
    """The fitted cluster as a network file: a scenario-style mapping, its values in comments."""
    import yaml

    net = fit.network(name)
    mapping: dict = {
        "name": name,
        "description": f"{fit.table.collective} calibrated node ({fit.gpus_per_node} GPU(s) a "
        f"node, {fit.nodes} node(s)): scale with --set nodes=N",
        "topology": "rail_optimised",
        "workers": net.workers,
        "gpus_per_node": fit.gpus_per_node,
        "host_link": {
            "rate": f"{net.host_link.rate_bps / 1e9:.9g} Gb/s",
            "latency": f"{net.host_link.latency_s * 1e6:.9g} us",
        },
        "switch": {"forwarding_latency": "0 s"},
        "nccl": {"channels": fit.channels, "algorithm": "auto", "gpu": fit.gpu, "cpu": fit.cpu},
    }
    if net.nvlink is not None:
        mapping["nvlink"] = {
            "rate": f"{net.nvlink.rate_bps / 1e9:.9g} Gb/s",
            "latency": f"{net.nvlink.latency_s * 1e6:.9g} us",
        }
    worst, median = fit.worst("fit"), fit.median("fit")
    lines = [
        f"# Calibrated by `{command}` (--model node): the node, not one opaque network.",
        f"#   {fit.table.source}: {fit.table.ranks} ranks = {fit.nodes} node(s) x "
        f"{fit.gpus_per_node} GPU(s)",
        f"# Fitted ({', '.join(fit.values)}) on rows of at least {fit.min_size:,} B: worst "
        f"|error| {(worst or 0) * 100:.1f} %, median {(median or 0) * 100:.1f} %.",
        "# NCCL's tuner and protocol defaults otherwise; `--set nodes=N` is N nodes (`workers` "
        "N x gpus_per_node).",
    ]
    body = yaml.safe_dump(mapping, sort_keys=False, default_flow_style=False, width=100)
    return "\n".join(lines) + "\n" + body
