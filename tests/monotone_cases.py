"""Monotone physics (issue 44): more bytes, more latency, a lower rate or a later rank never
make an exchange finish sooner. Shared by tests/test_network_monotone.py (a small sweep) and
benchmarks/bench_monotone.py (a larger one): random networks of every fabric and collective,
each walked along one axis, each point timed on the DES and on "auto" (the fast path where
it is exact).

A walk is a list of (network, exchange, start) in order of "more"; a violation is a point that
finishes (its last worker, on the clock of the start times) sooner than the point before it
by more than rounding, where the same choice of algorithm and protocol would not have (a fall
at NCCL's tuner's switch is counted apart: `classify`).
"""

import dataclasses

import numpy as np

from transitsim.network import (
    COLLECTIVE_ALGOS,
    Exchange,
    HostSpec,
    LinkSpec,
    NetworkSpec,
    SwitchSpec,
    simulate_exchange,
)
from transitsim.network.spec import NCCL_PROTOCOLS, NcclSpec

AXES = ("bytes", "latency", "rate", "late")
KIB = 1024
TOLERANCE = 1e-9  # relative: float sums in another order, never a model's choice

# sizes where a schedule changes shape: the tree's 64 KiB chunks and their 64-chunk cap (a
# tree's share, so x2 for the double binary tree), the switch sum's 4 KiB pieces, NCCL's
# channel floors (512 x 8, 640 x 8, 512 x 64 bytes a channel) and its chunk sizes
BOUNDARIES = (
    4 * KIB,
    32 * KIB,
    64 * KIB,
    128 * KIB,
    5 * KIB * 4,
    32 * KIB * 4,
    64 * 64 * KIB,
    2 * 64 * 64 * KIB,
)


def _link(rng: np.random.Generator) -> LinkSpec:
    return LinkSpec(
        float(rng.choice([25e9, 100e9, 400e9])),
        latency_s=float(rng.choice([0.0, 1e-6, 5e-6])),
        overhead_s=float(rng.choice([0.0, 2e-7])),
    )


def random_network(rng: np.random.Generator, algo: str, small: bool) -> NetworkSpec:
    """A random network `algo` runs on: one switch, leaf-spine, datacentres (1-2 WAN links),
    a rail-optimised cluster; sometimes hosts shared by ranks, sometimes NCCL mode."""
    top = 5 if small else 9
    topology = "datacentres" if algo == "hierarchical" else None
    topology = topology or str(rng.choice(["switch", "switch", "leaf_spine", "datacentres"]))
    if algo != "switch_sum" and rng.random() < 0.15:
        topology = "rail_optimised"
    switch = SwitchSpec(
        forwarding_latency_s=float(rng.choice([0.0, 5e-7])),
        store_and_forward=bool(rng.random() < 0.2),
        aggregator=algo == "switch_sum" or topology == "rail_optimised",
        agg_slots=int(rng.choice([0, 2])) if algo == "switch_sum" else 0,
    )
    if topology == "rail_optimised":
        network = NetworkSpec(
            "rail",
            "rail_optimised",
            4 * int(rng.integers(1, 3)),
            _link(rng),
            switch=switch,
            hosts_per_rack=2,
            spine_link=_link(rng),
            gpus_per_node=2,
            nvlink=LinkSpec(float(rng.choice([400e9, 2400e9])), latency_s=5e-7),
        )
    elif topology == "datacentres":
        count = {"hierarchical": 2, "switch_sum": 1}.get(algo) or int(rng.integers(1, 3))
        network = NetworkSpec(
            "dc",
            "datacentres",
            count * int(rng.integers(1, top // 2 + 1)),
            _link(rng),
            switch=switch,
            datacentres=count,
            wan_link=LinkSpec(
                float(rng.choice([10e9, 100e9])), length_m=float(rng.choice([0, 1e5]))
            ),
            wan_links=int(rng.choice([1, 1, 2])),
        )
    elif topology == "leaf_spine":
        network = NetworkSpec(
            "ls",
            "leaf_spine",
            int(rng.integers(2, top)),
            _link(rng),
            switch=switch,
            hosts_per_rack=int(rng.integers(1, 4)),
            spine_link=_link(rng),
        )
    else:
        network = NetworkSpec("sw", "switch", int(rng.integers(2, top)), _link(rng), switch=switch)
    if rng.random() < 0.2 and network.workers % 2 == 0:
        host = HostSpec(float(rng.choice([0.0, 1e-6])), float(rng.choice([50e9, 200e9])), 2)
        network = dataclasses.replace(network, host=host)
    if rng.random() < 0.25:
        protocol = str(rng.choice(["ll", "ll128", "simple", "auto"]))
        nccl = NcclSpec(protocol=protocol, channels=int(rng.choice([1, 2, 4])))
        network = dataclasses.replace(network, nccl=nccl)
    return network


def _sizes(rng: np.random.Generator, workers: int, small: bool) -> list[int]:
    """Payloads on both sides of the boundaries and of multiples of the worker count."""
    bounds = [b for b in BOUNDARIES if not small or b <= 2 * 64 * KIB]
    picked = [int(b) for b in rng.choice(bounds, size=2, replace=False)]
    sizes = {1, 777, workers * 1000, workers * 1000 + 1}
    for b in picked:
        sizes.update((b - 1, b, b + 1, b + workers - b % workers))
    return sorted(s for s in sizes if s > 0)


def _with_link(network: NetworkSpec, **changes: float) -> NetworkSpec:
    """The network with every link of its kind changed: hosts' links (and the NVLink ports)."""
    host_link = dataclasses.replace(network.host_link, **changes)
    return dataclasses.replace(network, host_link=host_link)


def walk(rng: np.random.Generator, algo: str, axis: str, small: bool) -> list[tuple]:
    """One random network walked along `axis`: [(network, exchange, start), ...], "more" last."""
    network = random_network(rng, algo, small)
    workers = network.workers
    sizes = _sizes(rng, workers, small)
    payload = int(rng.choice(sizes))
    start = np.zeros(workers)
    if rng.random() < 0.3:
        start = rng.choice([0.0, 1e-6, 2e-5], size=workers)
    if axis == "bytes":
        return [(network, Exchange(algo, s), start) for s in sizes]
    if axis == "latency":
        latencies = (0.0, 1e-6, 2e-6, 3e-6, 5e-6, 2e-5)
        exchange = Exchange(algo, payload)
        return [(_with_link(network, latency_s=x), exchange, start) for x in latencies]
    if axis == "rate":
        rate = network.host_link.rate_bps
        rates = (rate * 4, rate * 2, rate, rate / 2, rate / 3)
        return [(_with_link(network, rate_bps=r), Exchange(algo, payload), start) for r in rates]
    rank = int(rng.integers(workers))
    points = []
    for late in (0.0, 1e-6, 1e-5, 1e-4):
        moved = start.copy()
        moved[rank] += late
        points.append((network, Exchange(algo, payload), moved))
    return points


def run(point: tuple, method: str):
    network, exchange, start = point
    return simulate_exchange(network, exchange, start_s=start, method=method)


def finish(point: tuple, method: str) -> float:
    """When the last worker holds the result."""
    return float(np.max(run(point, method).finish_s))


def pinned(point: tuple, algo: str, protocol: str) -> tuple:
    """The point with NCCL mode's choice fixed to (algo, protocol): no tuner."""
    network, exchange, start = point
    nccl = dataclasses.replace(network.nccl, protocol=protocol, protocols=(protocol,))
    nccl = dataclasses.replace(nccl, algorithm=None, thresholds=())
    moved = dataclasses.replace(exchange, algo=algo)
    return dataclasses.replace(network, nccl=nccl), moved, start


def with_channels(point: tuple, channels: int) -> tuple:
    """The point with NCCL mode's channel count fixed (no floor: every channel runs)."""
    network, exchange, start = point
    nccl = network.nccl
    floors = {p: dataclasses.replace(nccl.spec(p), channel_bytes=0) for p in NCCL_PROTOCOLS}
    nccl = dataclasses.replace(nccl, channels=channels, **floors)
    return dataclasses.replace(network, nccl=nccl), exchange, start


def choice_of(point: tuple, result) -> tuple | None:
    """NCCL mode's choice for a point, (algorithm, protocol, channels); None without the mode."""
    if point[0].nccl is None:
        return None
    return result.algo, result.protocol, result.channels


def classify(points: list[tuple], method: str) -> tuple[list[tuple], list[tuple]]:
    """(violations, switches) of the engine's times on `method` (`split_falls`)."""
    results = [run(p, method) for p in points]
    timed = [
        (float(np.max(r.finish_s)), choice_of(p, r)) for p, r in zip(points, results, strict=True)
    ]
    return split_falls(points, timed, lambda point: finish(point, method))


def split_falls(
    points: list[tuple], timed: list[tuple], time_of
) -> tuple[list[tuple], list[tuple]]:
    """(violations, switches): each (index, before, after) where a point finishes sooner than
    the one before it by more than rounding. `timed`: each point's (time, NCCL mode's choice or
    None); `time_of` times a point the same way. A fall where NCCL's tuner chose another
    algorithm or protocol, or NCCL mode another channel count (NCCL drops channels below a floor
    of bytes a channel), and the later point run with the earlier choice does not fall, is a
    switch: NCCL's choice moved (its cost model and its channel rule, not the engine's time), as
    NCCL's own times do in real tables (deepops 2x DGX A100: 512 KiB 135.2 us, 1 MiB 120.1 us),
    and no physics fell. Every other fall is a violation of monotone physics."""
    violations, switches = [], []
    for i in range(1, len(timed)):
        (was, before), (now, after) = timed[i - 1], timed[i]
        floor = was - TOLERANCE * max(abs(was), 1e-12)
        if now >= floor:
            continue
        earlier = []  # the later point with one of NCCL's earlier choices
        if before is not None and after is not None:
            if points[i][0].nccl.tuner == "nccl" and before[:2] != after[:2]:
                earlier.append(pinned(points[i], *before[:2]))
            if before[2] != after[2]:
                earlier.append(with_channels(points[i], before[2]))
        fall = (i, was, now)
        if any(time_of(point) >= floor for point in earlier):
            switches.append(fall)
        else:
            violations.append(fall)
    return violations, switches


def violations(points: list[tuple], method: str) -> list[tuple[int, float, float]]:
    """(index, before, after) wherever physics made a point finish sooner than the one before
    it (a tuner's switch, see `classify`, is not one)."""
    return classify(points, method)[0]


DENSE_LATENCIES = tuple(x * 0.25e-6 for x in range(25))  # 0 to 6 us
DENSE_LATE = tuple(x * 2e-6 for x in range(21))  # 0 to 40 us


def dense_network(algo: str, workers: int) -> NetworkSpec:
    """The plainest network `algo` runs on: one switch of 100 Gb/s links (two datacentres for
    the hierarchical all-reduce, a summing switch for the switch sum)."""
    link = LinkSpec(100e9)
    if algo == "hierarchical":
        wan = LinkSpec(100e9, latency_s=1e-5)
        return NetworkSpec("dc", "datacentres", 2 * workers, link, datacentres=2, wan_link=wan)
    switch = SwitchSpec(aggregator=algo == "switch_sum")
    return NetworkSpec("sw", "switch", workers, link, switch=switch)


def dense_walks(algos=COLLECTIVE_ALGOS):
    """Fine walks on the plainest networks, where the random sweep's six latencies step over
    most falls: latency 0-6 us in 0.25 us steps, and one rank (the last) 0-40 us late in 2 us
    steps, for 4, 6 and 8 ranks at 1 and 8 MiB. Yields (algo, axis, label, points)."""
    for algo in algos:
        for workers in (4, 6, 8):
            network = dense_network(algo, workers)
            for payload in (1 << 20, 8 << 20):
                exchange = Exchange(algo, payload)
                label = f"{network.workers} ranks, {payload >> 20} MiB"
                start = np.zeros(network.workers)
                points = [
                    (_with_link(network, latency_s=x), exchange, start) for x in DENSE_LATENCIES
                ]
                yield algo, "latency", label, points
                late = []
                for x in DENSE_LATE:
                    moved = start.copy()
                    moved[-1] = x
                    late.append((_with_link(network, latency_s=1e-6), exchange, moved))
                yield algo, "late", label, late


def sweep(seeds: range, small: bool, methods=("auto", "des"), algos=COLLECTIVE_ALGOS):
    """Every collective x axis x seed: yields (algo, axis, seed, method, points, violations,
    switches)."""
    for algo in algos:
        for axis in AXES:
            for seed in seeds:
                rng = np.random.default_rng([seed, len(algo), AXES.index(axis), 44])
                points = walk(rng, algo, axis, small)
                for method in methods:
                    yield algo, axis, seed, method, points, *classify(points, method)
