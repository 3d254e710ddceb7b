"""Issue 44 item 1, a proposal measured: links that serve transfers in a fixed order, not max-min.

The engine shares every resource max-min at every instant, and that is not monotone: delaying one
transfer can take it out of a share and let the one on the critical path go faster
(`bench_monotone.py --dense`: 150 falls on one switch). This script times the same schedules
under another rule, to show what adopting it would change before anyone rewrites the engine:

- every resource serves the transfers that cross it one after another, in the schedule's
  message order (a fixed order: a transfer waits for the earlier ones even if they are late);
- a transfer starts when it is ready (as in the DES) and every resource of its hop has served
  the transfers before it; it moves at its hop's rate alone; resource r is then taken for
  bits x weight_r / capacity_r (a faster link than the hop's rate frees sooner, so a 400 Gb/s
  uplink carries four 100 Gb/s transfers at once);
- pre and post delays, store-and-forward holds, JOINs and start times as in the DES; the double
  binary tree's spacing the least of the same candidates, timed under this rule.

Each finish is then a longest path over sums of durations that grow with bytes, latency, a
start and a falling rate, so no finish can fall (the walks below check it). In NCCL mode the
channel of NCCL's choice is timed so (its choice is NCCL's tuner's, not a time's). Not in the
package: no faults or backgrounds here; the engine is unchanged.

    .venv/bin/python benchmarks/bench_ordered_sharing.py [--seeds 10]

Prints, per collective on plain networks, the DES (max-min) time and this rule's, their ratio;
the same ratio for steps with straggling ranks;
the dgx-a100x2 preset's errors against its real table (../shared/nccl-tests) under each rule;
then the violation count of this rule over the dense walks and the random sweep of
tests/monotone_cases.py, with the wall time and load.
"""

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from monotone_cases import dense_network, dense_walks, split_falls, walk  # noqa: E402

from transitsim.calibrate.nccl_tests import read_nccl_tests  # noqa: E402
from transitsim.network import Exchange, LinkSpec, NetworkSpec, simulate_exchange  # noqa: E402
from transitsim.network.des.engine import assign_paths  # noqa: E402
from transitsim.network.exchange import build_schedule, fabric_for, transform_weights  # noqa: E402
from transitsim.network.fabric import Fabric, Weights  # noqa: E402
from transitsim.network.fabrics.nodes import tree_nodes  # noqa: E402
from transitsim.network.fast.trees.plan import spacing_candidates  # noqa: E402
from transitsim.network.nccl import nccl_choice  # noqa: E402
from transitsim.network.schedules.dag import Schedule  # noqa: E402
from transitsim.network.schedules.trees import tree_chunks, tree_layout  # noqa: E402
from transitsim.network.spec import COLLECTIVE_ALGOS  # noqa: E402
from transitsim.scenario import network_preset  # noqa: E402

AXES = ("bytes", "latency", "rate", "late")


def ordered_finish(fabric: Fabric, schedule: Schedule, weights: Weights, start: np.ndarray):
    """Each worker's finish under the fixed-order rule (the module doc)."""
    path_ids, paths = assign_paths(fabric, schedule, weights)
    capacity = fabric.capacities()
    workers = schedule.workers
    free = np.zeros(len(schedule))
    arrive = np.zeros(len(schedule))
    served = np.full(len(capacity), -np.inf)  # when each resource has served its transfers so far
    bits = schedule.nbytes * 8.0
    for m in range(len(schedule)):
        deps = schedule.deps(m)
        assert not len(deps) or deps.max() < m, "a dependency after its message"
        t = max((arrive[d] for d in deps), default=-np.inf)
        src = int(schedule.src[m])
        if src < workers:
            t = max(t, start[src])
        if schedule.after[m] >= 0:
            t = max(t, free[schedule.after[m]])
        if path_ids[m] < 0:  # a JOIN
            free[m] = arrive[m] = t
            continue
        for h, hop in enumerate(paths[path_ids[m]].hops):
            t += hop.pre_s
            t = max([t] + [served[r] for r in hop.resources])
            for r, w in zip(hop.resources, hop.weights, strict=True):
                served[r] = t + bits[m] * w / capacity[r] if capacity[r] > 0 else np.inf
            t += bits[m] / hop.rate_bps if hop.rate_bps < np.inf else 0.0
            if h == 0:
                free[m] = t
            t += hop.post_for(bits[m])
        arrive[m] = t
    finish = np.array(start, dtype=float)
    for m in np.flatnonzero(schedule.counts).tolist():
        d = int(schedule.dst[m])
        finish[d] = max(finish[d], arrive[m])
    return finish


def ordered_time(network: NetworkSpec, exchange: Exchange, start: np.ndarray) -> float:
    """When the last worker holds the result, under the fixed-order rule."""
    fabric = fabric_for(network)
    weights = transform_weights(network, exchange)
    if exchange.algo != "double_binary_tree" or network.workers < 3:
        return float(ordered_finish(fabric, build_schedule(fabric, exchange), weights, start).max())
    pre = exchange.transform_at == "pluggable"
    nodes = tree_nodes(network)
    best, best_s = None, np.inf
    for k in spacing_candidates(tree_chunks(exchange.payload_bytes / 2)):
        layout = tree_layout(exchange.algo, network.workers, exchange.payload_bytes, pre, k, nodes)
        zero = np.zeros(network.workers)
        time_s = float(ordered_finish(fabric, layout[0], weights, zero).max())
        if time_s < best_s * (1 - 1e-9):
            best, best_s = layout[0], time_s
    return float(ordered_finish(fabric, best, weights, start).max())


def ordered_point(network: NetworkSpec, exchange: Exchange, start: np.ndarray) -> tuple:
    """(time, NCCL mode's choice or None) of one walk point under the fixed order: in NCCL mode
    the one channel of NCCL's choice (network/nccl.py), plus NCCL's base latency."""
    if network.nccl is None or exchange.transform_at is not None:
        return ordered_time(network, exchange, start), None
    choice = nccl_choice(network, exchange, lambda n, e: simulate_exchange(n, e).time_s)
    time_s = ordered_time(choice.network, choice.exchange, start) + choice.base_s
    return time_s, (choice.algo, choice.protocol, choice.channels)


def ordered_at(point: tuple) -> float:
    """A walk point's time under the fixed order (`ordered_point`)."""
    return ordered_point(*point)[0]


def figures() -> None:
    print("| collective | network | payload | max-min (DES) | fixed order | ratio |")
    print("|---|---|---|---|---|---|")
    for algo in ("ring_allreduce", "ring_allgather", "tree", "double_binary_tree", "hierarchical"):
        for workers, payload in ((8, 4_000_000), (6, 8 << 20), (16, 1 << 20)):
            network = dense_network(algo, workers // 2 if algo == "hierarchical" else workers)
            network = dataclasses.replace(network, host_link=LinkSpec(100e9, latency_s=5e-6))
            exchange = Exchange(algo, payload)
            start = np.zeros(network.workers)
            des = float(simulate_exchange(network, exchange, method="des").finish_s.max())
            ordered = ordered_time(network, exchange, start)
            print(
                f"| {algo} | {network.topology}, {network.workers} ranks, 100 Gb/s, 5 us "
                f"| {payload:,} B | {des * 1e6:,.1f} us | {ordered * 1e6:,.1f} us "
                f"| {ordered / des:.3f} |"
            )


def stragglers(draws: int = 20) -> None:
    """What the rule does to a straggling step, where its not being work-conserving could cost:
    16 ranks, 4 MiB, each rank starting exponentially late (mean 50 us), the time from the last
    start to the last finish under each rule."""
    rng = np.random.default_rng(44)
    print(f"stragglers: 16 ranks, 4 MiB, starts exponential (mean 50 us), {draws} draws:")
    for algo in ("ring_allreduce", "tree", "double_binary_tree", "hierarchical"):
        network = dense_network(algo, 8 if algo == "hierarchical" else 16)
        network = dataclasses.replace(network, host_link=LinkSpec(100e9, latency_s=2e-6))
        exchange = Exchange(algo, 4 << 20)
        ratios = []
        for _ in range(draws):
            start = rng.exponential(50e-6, network.workers)
            max_min = simulate_exchange(network, exchange, start_s=start).finish_s.max()
            ordered = ordered_time(network, exchange, start)
            ratios.append((ordered - start.max()) / (max_min - start.max()))
        print(
            f"   {algo:<19} fixed order / max-min after the last start: mean "
            f"{np.mean(ratios):.3f} (min {np.min(ratios):.3f}, max {np.max(ratios):.3f})"
        )


def preset_errors(folder: Path) -> None:
    """The 2 x DGX A100 preset against its real table (bench_presets.py) under both rules: NCCL
    mode's choice is NCCL's tuner's either way; its one channel is timed by each rule."""
    table = read_nccl_tests(folder / "more/deepops-2xdgxa100-ib-all_reduce.txt", "all_reduce")
    network = network_preset("dgx-a100x2")
    errors: dict[str, list[tuple[int, float]]] = {"max-min": [], "fixed order": []}
    for row in table.rows:
        exchange = Exchange("ring_allreduce", row.size_bytes)
        max_min = simulate_exchange(network, exchange).time_s
        choice = nccl_choice(network, exchange, lambda n, e: simulate_exchange(n, e).time_s)
        zero = np.zeros(choice.network.workers)
        ordered = ordered_time(choice.network, choice.exchange, zero) + choice.base_s
        errors["max-min"].append((row.size_bytes, max_min / row.time_s - 1))
        errors["fixed order"].append((row.size_bytes, ordered / row.time_s - 1))
    print(
        "dgx-a100x2 against the DeepOps 2 x DGX A100 table (targets 15 % from 1 MiB, 30 % below):"
    )
    for rule, found in errors.items():
        parts = []
        for big, target in ((True, 0.15), (False, 0.30)):
            rows = [(size, e) for size, e in found if (size >= 1 << 20) == big]
            missed = [size for size, e in rows if abs(e) > target]
            worst = max(abs(e) for _, e in rows)
            parts.append(
                f"{'>=' if big else '<'} 1 MiB worst {worst:.1%}, {len(missed)} of {len(rows)} "
                f"rows missed ({', '.join(f'{size:,}' for size in missed)})"
            )
        print(f"   {rule}: " + "; ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="random networks per axis")
    parser.add_argument("--first", type=int, default=100, help="the first seed")
    args = parser.parse_args()
    print(f"cpu count {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}")
    began = time.perf_counter()
    figures()
    stragglers()
    preset_errors(Path(__file__).resolve().parents[2] / "shared" / "nccl-tests")
    walks = points = bad = 0
    for algo, axis, label, points_ in dense_walks():
        times = [ordered_point(*point) for point in points_]
        walks, points = walks + 1, points + len(times)
        for i, before, after in split_falls(points_, times, ordered_at)[0]:
            bad += 1
            print(f"   fall: {algo} {axis} ({label}) point {i}: {before:.9g} s -> {after:.9g}")
    print(f"dense walks: {walks} walks, {points} points, {bad} violations under the fixed order")
    walks = points = bad = switched = 0
    for algo in COLLECTIVE_ALGOS:
        for axis in AXES:
            for seed in range(args.first, args.first + args.seeds):
                rng = np.random.default_rng([seed, len(algo), AXES.index(axis), 44])
                walked = walk(rng, algo, axis, small=False)
                timed = [ordered_point(*point) for point in walked]
                walks, points = walks + 1, points + len(timed)
                found, switches = split_falls(walked, timed, ordered_at)
                switched += len(switches)
                for i, before, after in found:
                    bad += 1
                    where = f"{algo} {axis} seed {seed} point {i}"
                    print(f"   fall: {where}: {before:.9g} s -> {after:.9g}")
    print(
        f"random sweep (seeds {args.first}-{args.first + args.seeds - 1}): {walks} walks, "
        f"{points} points, {bad} violations under the fixed order; {switched} falls where NCCL "
        "mode's choice changed (not counted)"
    )
    print(f"wall {time.perf_counter() - began:.1f} s; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
