"""What transitsim predicts for one row of a measured table, on the network being calibrated.

The calibrated network is flat: every rank is a host with one link (both ways) to a switch.
With `--topology switch` all ranks hang off one switch, so a message crosses two links; with
`leaf_spine` the ranks of each host of the table (its `Rank ... on HOST` lines) share a leaf,
and a message to another host crosses four (host, leaf, spine, leaf, host). The spine links are
not fitted: they are sized non-blocking (all the leaf's host links together), so that they do
not change the fit, and are there to be changed (`--set spine_link.rate=...`) to ask what a
thinner network between the hosts would do. The physical parameters, per size regime:

- `payload_bps`: what one rank's link carries per second (the line rate x efficiency); in a flat
  network this is each rank's share of everything that carries its traffic (NVLink and NICs).
- `latency_s`: each link's fixed latency.
- `line_bps`: the line rate, when the user gives it (`--line-rate`): the efficiency is then
  payload / line; otherwise the link is given the payload rate at efficiency 1.

The time of each collective is transitsim's own (network/exchange.py `simulate_exchange`):
all_reduce as `ring_allreduce` (or a tree, `--algo`), all_gather as `ring_allgather` of each
rank's part (size / ranks), reduce_scatter as `ring_allgather` of size / ranks too: a ring
reduce-scatter moves the same chunks in the same N - 1 steps, and transitsim does not charge for
the additions. transitsim has no broadcast or all-to-all schedule; for those two the prediction
is the closed form written here (NCCL's pipelined ring broadcast: N - 1 steps of latency and the
buffer once at the payload rate; all-to-all: one step of latency and (N - 1)/N of the buffer
through each rank's link).

A two-level fabric fitted link by link (NVLink inside a node, NICs between) is not offered:
transitsim's rings are single-channel (NCCL runs a ring per NIC; issue 24's NCCL mode), so the
NIC rate such a fit returns would be the whole node's, not one NIC's.

On these uniform networks the time is affine in the latency and in 1 / payload rate, so the fit
(calibrate/fit.py) needs two transitsim runs per row; the printed predictions are transitsim's
on the final network, not the affine shortcut.
"""

from dataclasses import dataclass

from transitsim.base.errors import TransitsimError
from transitsim.network import Exchange, LinkSpec, NetworkSpec, SwitchSpec, simulate_exchange
from transitsim.network.limits import MAX_WORKERS

# transitsim's collective for each nccl-tests one (the first is the default; --algo picks)
ALGOS = {
    "all_reduce": ("ring_allreduce", "double_binary_tree", "tree"),
    "all_gather": ("ring_allgather",),
    "reduce_scatter": ("ring_allgather",),
    "broadcast": ("closed_form_ring_broadcast",),
    "alltoall": ("closed_form_switch_alltoall",),
}
PROBE_BPS = 1e11  # reference payload rate and latency of the two runs per row
PROBE_LATENCY_S = 1e-6
TOPOLOGIES = ("switch", "leaf_spine")


@dataclass(frozen=True)
class Link:
    """The calibrated link of every rank (see the module doc)."""

    payload_bps: float
    latency_s: float
    line_bps: float | None = None

    @property
    def rate_bps(self) -> float:
        return self.line_bps if self.line_bps is not None else self.payload_bps

    @property
    def efficiency(self) -> float:
        return self.payload_bps / self.rate_bps


@dataclass(frozen=True)
class Shape:
    """Where the ranks sit: all on one switch, or `per_host` to a leaf (leaf_spine)."""

    topology: str
    ranks: int
    per_host: int

    @property
    def hosts(self) -> int:
        return self.ranks // self.per_host if self.topology == "leaf_spine" else 1

    def message_links(self, crosses_hosts: bool) -> int:
        return 4 if crosses_hosts and self.hosts > 1 else 2


def check_algo(collective: str, algo: str | None) -> str:
    """The transitsim collective that models `collective` (default, or the one asked for)."""
    choices = ALGOS[collective]
    if algo is None:
        return choices[0]
    if algo not in choices:
        raise TransitsimError(
            f"--algo {algo.replace('_', '-')}: {collective} is modelled by "
            f"{', '.join(c.replace('_', '-') for c in choices)}"
        )
    return algo


def link_spec(link: Link, ports: int = 1) -> LinkSpec:
    """The link as transitsim's LinkSpec; `ports` links' worth of rate in one (a spine uplink)."""
    return LinkSpec(link.rate_bps * ports, latency_s=link.latency_s, efficiency=link.efficiency)


def flat_network(shape: Shape, link: Link, name: str = "calibrated") -> NetworkSpec:
    """The calibrated network of `shape` (see the module doc)."""
    if not 2 <= shape.ranks <= MAX_WORKERS:
        raise TransitsimError(f"{shape.ranks:,} ranks: a calibrated network has 2..{MAX_WORKERS:,}")
    if shape.topology == "switch":
        return NetworkSpec(name, "switch", shape.ranks, link_spec(link), switch=SwitchSpec())
    return NetworkSpec(
        name,
        "leaf_spine",
        shape.ranks,
        link_spec(link),
        switch=SwitchSpec(),
        hosts_per_rack=shape.per_host,
        spine_link=link_spec(link, shape.per_host),
    )


def exchange_for(collective: str, algo: str, ranks: int, size_bytes: int) -> Exchange:
    """The transitsim exchange of one nccl-tests row (sizes as nccl-tests prints them)."""
    if collective == "all_reduce":
        return Exchange(algo, int(size_bytes))
    return Exchange("ring_allgather", round(size_bytes / ranks))  # all_gather, reduce_scatter


def predict_s(collective: str, algo: str, shape: Shape, size_bytes: int, link: Link) -> float:
    """transitsim's time for one row on the calibrated network of `link` (see the module doc)."""
    ranks = shape.ranks
    if collective == "broadcast":  # a chain through the ranks, host by host
        links = 2 * (ranks - 1) + (shape.message_links(True) - 2) * (shape.hosts - 1)
        return links * link.latency_s + 8.0 * size_bytes / link.payload_bps
    if collective == "alltoall":
        share = (ranks - 1) / ranks * size_bytes
        return shape.message_links(True) * link.latency_s + 8.0 * share / link.payload_bps
    network = flat_network(shape, link)
    exchange = exchange_for(collective, algo, ranks, size_bytes)
    return simulate_exchange(network, exchange).time_s


def coefficients(collective: str, algo: str, shape: Shape, size_bytes: int) -> tuple[float, float]:
    """(c_latency, c_bandwidth): time = c_latency x latency_s + c_bandwidth / payload_bps,
    read off two transitsim runs (exact on these networks, where time is affine in both)."""
    base = predict_s(collective, algo, shape, size_bytes, Link(PROBE_BPS, 0.0))
    probe = predict_s(collective, algo, shape, size_bytes, Link(PROBE_BPS, PROBE_LATENCY_S))
    return (probe - base) / PROBE_LATENCY_S, base * PROBE_BPS
