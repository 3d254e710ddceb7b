"""Local SGD laid out by site: a replica per datacentre, each site a data-parallel group.

A local-SGD trace (H, H-s, L) recorded with as many replicas as the network has datacentres is
replayed on all of the network's workers, `per_site` of them in each datacentre (`replicas:
site`). Each site is then one replica trained data-parallel: its workers split the replica's
batch, so one worker computes 1/per_site of the replica's forward+backward, and every step they
all-reduce the dense gradient (A's bytes: the trace's `dense_bytes_per_step`) over the site's
own LAN before the inner update. That exchange is simulated by the network engine on the site
as a network of its own (its hosts, host links, switch and endpoints; `site_network`), the
sites in parallel, each on its own links, and the step waits for the slowest site.

The outer sync then crosses the WAN on the whole network, as in the per-worker layout:
H and H-s all-reduce their payload hierarchically (reduce-scatter inside each site, one
all-reduce of each shard across, all-gather inside). Every worker of a site already holds the
site's pseudo-gradient, so the reduce-scatter inside the site is not needed: it is counted
anyway (an overcount of (per_site - 1) / per_site of the payload on each host link, said in
the notes). L's sparse messages differ between sites but not inside one, so each worker
all-gathers a 1/per_site slice of its site's message (the ring leaves every worker with every
site's whole message); the flat ring carries (workers - 1) slices on each WAN direction where
the sites' messages alone would do (pessimistic, said in the notes).

With `overlap: buckets` the intra-site all-reduce overlaps backward in DDP buckets, as A's does;
the outer sync starts after the inner update, so it never overlaps backward (H-s's fragments
still overlap the next inner steps: streaming.py).
"""

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from transitsim.base.errors import TransitsimError
from transitsim.network import Exchange
from transitsim.network.spec import NetworkSpec
from transitsim.network.topology import worker_groups
from transitsim.network.varying import change_times
from transitsim.replay.overlap import overlap_plan
from transitsim.replay.step import OVERLAP_FIGURES, Outcome, Run, clean_outcome, segment_figures
from transitsim.traces.format import Trace

REPLICAS = ("worker", "site")
# collectives a forced choice may give the intra-site all-reduce (one site: no hierarchy)
SITE_ALGOS = ("ring_allreduce", "switch_sum", "tree", "double_binary_tree")
# the per-step figures the intra-site exchange adds to a timeline row
SITE_FIGURES = ("transform_s", "wire_s", "wait_s", *OVERLAP_FIGURES)
_NODE = re.compile(r"^(h|dc)(\d+)$")


def trace_replicas(trace: Trace) -> int | None:
    """The replica count a local-SGD trace was trained with (None: not a local-SGD trace)."""
    replicas = (trace.meta.get("local_sgd") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
        return None
    return replicas


def replicas_for(trace: Trace, asked: str) -> str:
    """The layout a replay asked for `asked` replicas ("worker" or "site") gives this trace: a
    replica per site applies to local-SGD traces, and the others are replayed as trained."""
    return asked if trace_replicas(trace) is not None else "worker"


def check_site_layout(trace: Trace, network: NetworkSpec) -> None:
    """Raise TransitsimError (one line) where `replicas: site` cannot place the trace's replicas
    one to a datacentre of `network`."""
    replicas = trace_replicas(trace)
    if replicas is None:
        raise TransitsimError(
            f"replicas 'site': {trace.name} (variant {trace.variant}) is not a local-SGD trace "
            "with metadata local_sgd.replicas; only H, H-s and L place a replica on each site"
        )
    if network.topology != "datacentres" or network.datacentres < 2:
        raise TransitsimError(
            f"replicas 'site': network {network.name!r} has no datacentres (topology "
            f"{network.topology}, {network.datacentres} datacentre(s)); a replica per site needs "
            "topology datacentres with one datacentre per replica"
        )
    if replicas != network.datacentres:
        raise TransitsimError(
            f"replicas 'site': {trace.name} has {replicas} replicas but network "
            f"{network.name!r} has {network.datacentres} datacentres; record one with "
            f"--set workers={network.datacentres} (docs/local-sgd.md) or use replicas 'worker'"
        )
    if network.workers % network.datacentres:
        raise TransitsimError(
            f"replicas 'site': network {network.name!r} splits {network.workers} workers "
            f"unevenly over {network.datacentres} datacentres; each site must hold as many"
        )
    per_site = network.workers // network.datacentres
    per_host = network.host.ranks_per_host if network.host is not None else 1
    if per_site % per_host:
        raise TransitsimError(
            f"replicas 'site': network {network.name!r} puts {per_host} ranks on a host, which "
            f"does not divide the {per_site} workers of a site (a host would span two sites)"
        )


def site_network(network: NetworkSpec, site: int) -> NetworkSpec:
    """Datacentre `site` of `network` as a network of its own: its hosts renumbered from 0 on
    switch dc0, the same host links, switch and endpoints, its own link overrides kept."""
    members = worker_groups(network)[site]
    first = members[0]
    overrides = {}
    for key, spec in network.link_overrides.items():
        renamed = _site_key(key, site, first, len(members))
        if renamed is not None:
            overrides[renamed] = spec
    return dataclasses.replace(
        network,
        name=f"{network.name} site {site}",
        workers=len(members),
        datacentres=1,
        wan_link=None,
        wan_links=1,
        collective=None,
        link_overrides=overrides,
    )


def _site_key(key: str, site: int, first: int, count: int) -> str | None:
    """A link-override name of the whole network as the site's network names it (None: the link
    is not the site's, e.g. the WAN or another site's host)."""
    arrow = "<->" if "<->" in key else "->"
    ends = key.split("#")[0].split(arrow)
    renamed = []
    for end in ends:
        match = _NODE.match(end)
        if match is None:
            return None
        kind, number = match[1], int(match[2])
        if kind == "dc":
            if number != site:
                return None
            renamed.append("dc0")
        elif first <= number < first + count:
            renamed.append(f"h{number - first}")
        else:
            return None
    return arrow.join(renamed)


def _global_link(name: str, site: int, first: int, first_host: int) -> str:
    """A site network's resource name as the whole network names it."""
    name = re.sub(r"\bh(\d+)\b", lambda m: f"h{int(m[1]) + first}", name)
    name = re.sub(r"\bhost(\d+)\b", lambda m: f"host{int(m[1]) + first_host}", name)
    return re.sub(r"\bdc0\b", f"dc{site}", name)


@dataclass
class SiteExchange:
    """The intra-site all-reduce of one run: each site's network, how it is timed, its caches."""

    network: NetworkSpec
    dense_bytes: int  # the step's dense gradient (A's payload), scaled to the replayed model
    algo: str
    runs: list[Run]  # one per distinct site network
    site_run: list[int]  # per site: its index in runs
    # per row: the slowest site's outcome and its figures; per outcome, the steps it stood for
    figures: dict[str, np.ndarray] = field(default_factory=dict)
    wire_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    uses: dict[tuple[int, int], tuple[Outcome, int]] = field(default_factory=dict)
    kept: list[Outcome] = field(default_factory=list)  # outcomes whose ids the run's uses hold

    @property
    def per_site(self) -> int:
        return self.network.workers // self.network.datacentres

    def exposed_per_row(self, compute_s: list[float], interval: list[int]) -> list[float]:
        """Per row, the seconds the intra-site all-reduce adds after compute (the slowest
        site's; with overlap what backward did not hide), each distinct compute timed once."""
        exchange = Exchange(algo=self.algo, payload_bytes=self.dense_bytes)
        count = len(compute_s)
        self.figures = {name: np.zeros(count) for name in SITE_FIGURES}
        self.wire_bytes = np.zeros(count)
        exposed = np.zeros(count)
        known: dict[float, tuple[list[Outcome], Any]] = {}
        for row in range(count):
            key = compute_s[row]
            if key not in known:
                compute_w = np.full(self.per_site, compute_s[row])
                outcomes = [
                    clean_outcome(run, exchange, compute_w, 0.0, cacheable=True)
                    for run in self.runs
                ]
                slowest = max(outcomes, key=lambda outcome: outcome.finish_s)
                known[key] = (outcomes, segment_figures(slowest, 1, compute_w, 0.0, 0.0))
            outcomes, segment = known[key]
            for name in SITE_FIGURES:
                self.figures[name][row] = getattr(segment, name)
            self.wire_bytes[row] = segment.wire_bytes
            exposed[row] = segment.exposed_s
            for site, index in enumerate(self.site_run):
                outcome = outcomes[index]
                previous = self.uses.get((site, id(outcome)))
                used = interval[row] + (previous[1] if previous else 0)
                self.uses[(site, id(outcome))] = (outcome, used)
        return exposed.tolist()

    def add_to_rows(self, rows: dict[str, Any], compress_s: list[float]) -> None:
        """Move the intra-site exchange from the compression it rode in (so every stepping path
        put it before the outer exchange) to the exchange's own columns, and count its bytes."""
        for name in SITE_FIGURES:
            rows[name] = np.asarray(rows[name], dtype=np.float64) + self.figures[name]
        rows["compress_s"] = compress_s
        interval = np.asarray(rows["interval_steps"], dtype=np.int64)
        rows["wire_bytes"] = np.asarray(rows["wire_bytes"], dtype=np.float64) + np.cumsum(
            interval * self.wire_bytes
        )
        rows["payload_bytes"] = np.asarray(rows["payload_bytes"], dtype=np.int64) + np.cumsum(
            interval * self.dense_bytes
        )

    def add_link_uses(self, uses: dict[int, tuple[Outcome, int]]) -> None:
        """Each site's link use, under the whole network's link names, into the run's uses
        (frames.run_link_stats sums them with the outer exchange's)."""
        if not uses:
            return
        links = next(iter(uses.values()))[0].link_stats[["link", "kind", "rate_bps"]]
        groups = worker_groups(self.network)
        per_host = self.network.host.ranks_per_host if self.network.host is not None else 1
        for (site, _), (outcome, count) in self.uses.items():
            first = groups[site][0]
            stats = outcome.link_stats
            names = [_global_link(str(n), site, first, first // per_host) for n in stats["link"]]
            mapped = pd.DataFrame(
                {
                    "busy_s": stats["busy_s"].to_numpy(dtype=np.float64),
                    "bytes": stats["bytes"].to_numpy(dtype=np.float64),
                },
                index=names,
            )
            frame = links.copy()
            frame["busy_s"] = mapped["busy_s"].reindex(frame["link"]).fillna(0.0).to_numpy()
            frame["bytes"] = mapped["bytes"].reindex(frame["link"]).fillna(0.0).to_numpy()
            copy = dataclasses.replace(outcome, link_stats=frame)
            uses[id(copy)] = (copy, count)
            self.kept.append(copy)  # alive, so that no other object takes its id

    def overlap_notes(self) -> list[str]:
        """What the sites' overlap plans said (e.g. a step replayed as one bucket)."""
        return [note for run in self.runs if run.overlap is not None for note in run.overlap.notes]


def site_exchange(
    trace: Trace,
    network: NetworkSpec,
    ratio: float,
    collective: str | None,
    method: str | None,
    overlap: str,
    bucket_bytes: int,
    faulted: bool,
    notes: list[str],
) -> SiteExchange:
    """The run's intra-site all-reduce (its networks, collective and overlap), with its notes;
    the layout already checked (check_site_layout, as replay checks its arguments)."""
    chosen = collective or network.collective
    algo = chosen if chosen in SITE_ALGOS else "ring_allreduce"
    if algo == "switch_sum" and not network.switch.aggregator:
        algo = "ring_allreduce"
    dense = int(round(trace.meta["dense_bytes_per_step"] * ratio))
    runs: list[Run] = []
    site_run: list[int] = []
    index_of: dict[str, int] = {}
    for site in range(network.datacentres):
        spec = site_network(network, site)
        key = repr(dataclasses.replace(spec, name=network.name))
        if key not in index_of:
            index_of[key] = len(runs)
            run = Run(network=spec, faults=[], method=method, reuse=True)
            if overlap == "buckets":
                run.overlap = overlap_plan(trace, spec, dense, True, bucket_bytes, notes)
            runs.append(run)
        site_run.append(index_of[key])
    per_site = network.workers // network.datacentres
    notes.append(
        f"replicas per site: a local-SGD trace's {network.datacentres} replicas are the "
        f"{network.datacentres} datacentres, {per_site} workers each; every step each site "
        f"all-reduces the dense gradient ({dense:,} bytes, {algo}) over its own LAN, the "
        f"sites in parallel, and a worker computes 1/{per_site} of the replica's batch"
    )
    notes.append(
        "replicas per site: the outer sync crosses the WAN on the whole network; an all-reduce "
        "(H, H-s) is hierarchical and counts a reduce-scatter inside each site that the site's "
        "workers, holding one pseudo-gradient, do not need (overcount on the LAN)"
    )
    if trace.meta.get("collective") == "all_gather" or (
        (trace.meta.get("local_sgd") or {}).get("collective") == "all_gather"
    ):
        notes.append(
            f"replicas per site: L's outer all-gather sends 1/{per_site} of the site's message "
            "from each worker around the whole ring, which crosses each WAN direction with "
            f"{network.workers - 1} slices where the other sites' messages would do "
            "(pessimistic)"
        )
    if overlap == "buckets":
        notes.append(
            "replicas per site: with overlap the intra-site all-reduce overlaps backward in "
            "buckets (as A's); the outer sync starts after the inner update, so it does not"
        )
    if faulted or any(change_times(run.network) for run in runs):
        notes.append(
            "replicas per site: link faults and background changes apply to the outer sync "
            "only; the intra-site all-reduce is timed on the site's links as they start"
        )
    return SiteExchange(network=network, dense_bytes=dense, algo=algo, runs=runs, site_run=site_run)
