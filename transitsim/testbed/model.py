"""The measured points replayed by transitsim: the testbed as a NetworkSpec, a fit, predictions.

The equivalent network is one switch with every host link at the tbf rate (one site), or two
datacentres (`topology: datacentres`, two switches) joined by a WAN link at the WAN's tbf rate
(two sites). Its parameters, all from the same run:

- `efficiency` (measured, not fitted): payload bytes the ranks sent / bytes tbf counted on their
  uplinks, per rate. TCP/IPv4/Ethernet framing at MTU 1500 (1448 payload in 1514 counted bytes)
  plus the ACKs and gloo's own headers and rendezvous notices that share the link. The WAN link
  gets the same share (the same TCP flows cross it).
- `latency_s` (measured, not fitted): a quarter of the TCP round trip between two hosts of one
  site (a round trip crosses four links); the WAN link's latency is half of what the round
  trip across the WAN adds to that ((rtt_wan - rtt) / 2, at least 0).
- the endpoint (fitted, TWO parameters per configuration, on TWO message sizes, shared by every
  collective of that configuration): `HostSpec(per_message_s, rate_bps, ranks_per_host)`,
  LogGP's o and G. All ranks share this machine's CPUs and kernel, so ranks_per_host is the
  number of ranks: one endpoint of rate_bps, each direction, shared max-min by every rank's
  flows. o is the cost of one gloo transfer (a segment of the all-reduce ring, a half-block of
  the all-gather ring, a point-to-point transfer of the hierarchical one); a transitsim message
  carries `segments_per_message` of them, so per_message_s = o x that count. For each candidate
  rate the best o is a linear least squares (the time is affine in o); the rate is searched on
  a log scale (and "none", infinite). The legacy fit (`fit="alpha"`: one per-transfer alpha on
  the links, on one size) is kept, to reproduce the committed comparison of the old table.
- start offsets (measured): when each rank left the barrier, given to the simulator as start_s.
- the all-gather rendezvous (derived from gloo's code, not fitted): gloo's tcp transport sends a
  buffer only once the receiver's "recv ready" notice has arrived, and gloo/allgather.cc posts
  each send *before* its recv. The last rank out of the barrier finds its right neighbour's
  notice waiting, so its first half-block goes at once and its own notice queues behind it; its
  left neighbour's first transfer therefore starts one half-block time late (at the rate of
  the late rank's first hop: across the WAN when its right neighbour is in the other site).
  The simulator gets that rank's start delayed accordingly (at P = 2 this alone makes the
  time 3 half-blocks instead of 2, as measured).

Everything else (the ring's steps and bytes) is transitsim's ring_allreduce / ring_allgather /
hierarchical, which carry the bytes gloo's rings carry (see gloo_algos).
"""

import json
import math
import statistics
from dataclasses import dataclass

import numpy as np
import pandas as pd

from transitsim.base.errors import TransitsimError
from transitsim.network import Exchange, LinkSpec, NetworkSpec, simulate_exchange
from transitsim.network.spec import HostSpec
from transitsim.testbed import gloo_algos

CALIBRATION_BYTES = 1 << 20  # the legacy alpha fit's one size
CALIBRATION_SIZES = (64 << 10, 4 << 20)  # the endpoint fit's two sizes
ALPHA_PROBE_S = 1e-3
LOAD_LIMIT = 1.5  # 1-minute load average above which a run does not begin quiet
RATE_GRID_BPS = tuple(10 ** (6 + k / 4) for k in range(21))  # 1 Mb/s .. 100 Gb/s
GROUP = ["rate_bps", "sites", "wan_rate_bps"]  # one configuration: one fit


@dataclass(frozen=True)
class Endpoint:
    """The fitted endpoint: seconds per gloo transfer and the shared rate (inf: none)."""

    per_transfer_s: float = 0.0
    rate_bps: float = math.inf


def _get(row: pd.Series, name: str, default: float) -> float:
    value = row.get(name, default)
    return default if value is None or value != value else float(value)


def testbed_network(
    workers: int,
    rate_bps: float,
    efficiency: float,
    latency_s: float,
    overhead_s: float,
    *,
    sites: int = 1,
    wan_rate_bps: float = 0.0,
    wan_latency_s: float = 0.0,
    host: HostSpec | None = None,
) -> NetworkSpec:
    """Hosts on one switch, each host link (both ways) at the shaped rate; with two sites, two
    datacentres joined by one WAN link (each way) at the WAN's rate."""
    link = LinkSpec(rate_bps, latency_s=latency_s, overhead_s=overhead_s, efficiency=efficiency)
    if sites == 1:
        return NetworkSpec("testbed", "switch", workers, link, host=host)
    wan = LinkSpec(wan_rate_bps, latency_s=wan_latency_s, efficiency=efficiency)
    return NetworkSpec("testbed", "datacentres", workers, link, datacentres=sites, wan_link=wan,
                       host=host)  # fmt: skip


def wan_latency_s(rtt_s: float, rtt_wan_s: float) -> float:
    """The WAN link's latency: half of what the round trip across the WAN adds, at least 0."""
    return max(0.0, (rtt_wan_s - rtt_s) / 2)


def point_network(row: pd.Series, alpha_s: float, endpoint: Endpoint | None) -> NetworkSpec:
    """The NetworkSpec one measured point is replayed on."""
    workers, nbytes = int(row["workers"]), int(row["bytes"])
    segments = gloo_algos.segments_per_message(row["collective"], nbytes, workers)
    host = None
    if endpoint is not None:
        host = HostSpec(endpoint.per_transfer_s * segments, endpoint.rate_bps, workers)
    rtt = float(row["rtt_s"])
    return testbed_network(
        workers,
        float(row["rate_bps"]),
        float(row["qdisc_efficiency"]),
        rtt / 4,
        alpha_s * segments / 2,  # a message crosses two links (host -> switch -> host)
        sites=int(_get(row, "sites", 1)),
        wan_rate_bps=_get(row, "wan_rate_bps", 0.0),
        wan_latency_s=wan_latency_s(rtt, _get(row, "rtt_wan_s", 0.0)),
        host=host,
    )


def simulate_point(row: pd.Series, alpha_s: float = 0.0, endpoint: Endpoint | None = None) -> float:
    """transitsim's time for one measured point, with a per-transfer link overhead alpha_s
    (legacy) and/or the endpoint."""
    nbytes = int(row["bytes"])
    network = point_network(row, alpha_s, endpoint)
    exchange = Exchange(gloo_algos.transitsim_algo(row["collective"]), nbytes)
    start = np.array(json.loads(row["start_offsets_s"]), dtype=float)
    if row["collective"] == "all_gather":
        start = rendezvous_starts(start, nbytes, first_hop_bps(network, start))
    return simulate_exchange(network, exchange, start_s=start).time_s


def first_hop_bps(network: NetworkSpec, start_s: np.ndarray) -> float:
    """Payload rate of the late rank's first half-block: to its right neighbour, across the WAN
    when the two are in different sites (ranks are split in order: the first half in site 0)."""
    late, workers = int(np.argmax(start_s)), len(start_s)
    right = (late + 1) % workers
    crosses = network.datacentres > 1 and (late >= workers // 2) != (right >= workers // 2)
    if crosses and network.wan_link is not None:
        return min(network.host_link.payload_bps, network.wan_link.payload_bps)
    return network.host_link.payload_bps


def rendezvous_starts(start_s: np.ndarray, nbytes: int, payload_bps: float) -> np.ndarray:
    """gloo all-gather: the last rank's left neighbour waits one half-block for its notice."""
    start = start_s.copy()
    late = int(np.argmax(start))
    left = (late - 1) % len(start)
    start[left] = max(start[left], start[late] + (nbytes / 2) * 8 / payload_bps)
    return start


def _affine_fit(rows: pd.DataFrame, simulate) -> tuple[float, float]:
    """(c >= 0, sum of squared relative errors): the least-squares c over `rows`, where
    simulate(row, c), transitsim's time, is affine in c (probed at 0 and ALPHA_PROBE_S)."""
    measured = rows["median_s"].to_numpy()
    base = np.array([simulate(r, 0.0) for _, r in rows.iterrows()])
    probe = np.array([simulate(r, ALPHA_PROBE_S) for _, r in rows.iterrows()])
    x, y = (probe - base) / ALPHA_PROBE_S / measured, (measured - base) / measured
    norm = float(np.dot(x, x))
    c = max(0.0, float(np.dot(x, y)) / norm) if norm > 0 else 0.0
    return c, float(np.sum((y - c * x) ** 2))


def fit_alpha(rows: pd.DataFrame) -> float:
    """Least-squares alpha on relative error over `rows` (time is affine in alpha), >= 0."""
    return _affine_fit(rows, simulate_point)[0]


def _fit_o(rows: pd.DataFrame, rate_bps: float) -> tuple[float, float]:
    """(o, sum of squared relative errors): the best per-transfer cost at this endpoint rate."""
    return _affine_fit(rows, lambda row, o: simulate_point(row, 0.0, Endpoint(o, rate_bps)))


def fit_endpoint(rows: pd.DataFrame) -> Endpoint:
    """The endpoint (o, rate) minimising the squared relative error over `rows`: o by least
    squares for each rate, the rate over RATE_GRID_BPS and none, then refined by golden section
    in log rate around the best grid rate."""
    scores = {rate: _fit_o(rows, rate) for rate in (math.inf, *RATE_GRID_BPS)}
    best = min(scores, key=lambda r: scores[r][1])
    if math.isfinite(best):
        low, high = math.log(best) - math.log(10) / 4, math.log(best) + math.log(10) / 4
        golden = (math.sqrt(5) - 1) / 2
        for _ in range(16):
            a, b = high - golden * (high - low), low + golden * (high - low)
            fa, fb = _fit_o(rows, math.exp(a)), _fit_o(rows, math.exp(b))
            scores[math.exp(a)], scores[math.exp(b)] = fa, fb
            if fa[1] < fb[1]:
                high = b
            else:
                low = a
        best = min(scores, key=lambda r: scores[r][1])
    return Endpoint(scores[best][0], best)


def _label(rate: float, sites: int, wan: float) -> str:
    return f"{rate:g} b/s" + (f", {sites} sites, WAN {wan:g} b/s" if sites > 1 else "")


def compare(
    measured: pd.DataFrame,
    calibration_sizes: tuple[int, ...] = CALIBRATION_SIZES,
    fit: str = "endpoint",
) -> pd.DataFrame:
    """Every measured point beside transitsim's prediction. Per configuration (rate, sites, WAN
    rate): the endpoint fitted on the points of the (at most two) calibration sizes, or with
    fit="alpha" the legacy alpha on one size; those rows are marked `fitted`. `measured` is a
    table tables.check_measured accepted (the commands check it; this trusts it)."""
    if fit not in ("endpoint", "alpha"):
        raise TransitsimError(f"testbed: --fit expects endpoint or alpha, got {fit!r}")
    sizes = tuple(int(b) for b in calibration_sizes)
    if not 1 <= len(sizes) <= (1 if fit == "alpha" else 2):
        raise TransitsimError(
            f"testbed: --calibrate takes {'one size' if fit == 'alpha' else 'one or two sizes'}"
        )
    measured = measured.assign(
        sites=measured.get("sites", 1), wan_rate_bps=measured.get("wan_rate_bps", 0.0)
    )
    out = []
    for (rate, sites, wan), group in measured.groupby(GROUP, sort=True):
        calib = group[group["bytes"].isin(sizes)]
        missing = [b for b in sizes if b not in set(calib["bytes"])]
        if missing:
            raise TransitsimError(
                f"testbed: no {missing[0]}-byte point at {_label(rate, sites, wan)} to fit on "
                "(--calibrate names sizes the table has at every rate)"
            )
        alpha, endpoint = 0.0, None
        if fit == "alpha":
            alpha = fit_alpha(calib)
        else:
            endpoint = fit_endpoint(calib)
        for _, row in group.iterrows():
            simulated = simulate_point(row, alpha, endpoint)
            if not (math.isfinite(simulated) and simulated > 0):
                raise TransitsimError(
                    f"testbed: the simulation of {row['collective']} of {int(row['bytes'])} B on "
                    f"{int(row['workers'])} workers at {rate:g} b/s gave {simulated!r} s"
                )
            out.append(
                {
                    **row.to_dict(),
                    "alpha_s": alpha,
                    "host_per_transfer_s": endpoint.per_transfer_s if endpoint else 0.0,
                    "host_rate_bps": endpoint.rate_bps if endpoint else math.inf,
                    "host_fitted": endpoint is not None,
                    "latency_s": float(row["rtt_s"]) / 4,
                    "simulated_s": simulated,
                    "rel_error": (simulated - row["median_s"]) / row["median_s"],
                    "fitted": int(row["bytes"]) in sizes,
                }
            )
    frame = pd.DataFrame(out)
    order = ["sites", "rate_bps", "wan_rate_bps", "layout", "collective", "workers", "bytes"]
    order = [c for c in order if c in frame.columns]
    return frame.sort_values(order, kind="stable").reset_index(drop=True)


def load_counts(table: pd.DataFrame) -> dict:
    """How quiet the machine was. The issue's rule is the 1-minute load average before the run
    starts (`loadavg_1m_at_start`, at most LOAD_LIMIT); a point's own load average (at its start
    or end) also counts the run's busy ranks, so it is reported, not judged. What judges a
    point is `foreign_running`: threads of other processes running or runnable at its start or
    end (0 on a quiet machine). Tables from before these columns have no load recorded."""
    nan = pd.Series(math.nan, index=table.index)
    start = table.get("load_start", nan).astype(float)
    end = table.get("load_end", nan).astype(float)
    before = table.get("loadavg_1m_at_start", nan).astype(float)
    foreign = table.get("foreign_running", nan).astype(float)
    unknown = start.isna() & end.isna() & foreign.isna()
    loaded = (before.fillna(0) > LOAD_LIMIT) & ~unknown
    busy = foreign.fillna(0) > 0
    return {"points_loaded": int(loaded.sum()), "points_foreign": int(busy.sum()),
            "points_load_unknown": int(unknown.sum()), "load_limit": LOAD_LIMIT,
            "point_load_max": float(pd.concat([start, end]).max())}  # fmt: skip


def summary(table: pd.DataFrame) -> dict:
    """Median and worst |relative error| over the predicted (not fitted) points, and all."""
    predicted = table[~table["fitted"]]
    errors = predicted["rel_error"].abs()
    return {
        "points": int(len(table)),
        "predicted_points": int(len(predicted)),
        "median_abs_error": float(statistics.median(errors)) if len(errors) else float("nan"),
        "worst_abs_error": float(errors.max()) if len(errors) else float("nan"),
        "median_abs_error_all": float(table["rel_error"].abs().median()),
        **load_counts(table),
    }
