"""The network a `testbed ttl` run is replayed on: calibrated per rate, built per exchange.

This is the one place the calibration lives. `calibrate_rate` turns one rate's calibration
points into a `Calibrated` network; `network_for` turns that into the NetworkSpec one exchange
is replayed on. The endpoint is issue 25's host stage, fitted as `testbed compare` fits it
(`model.fit_endpoint`): o per gloo transfer and one shared rate for all ranks of this machine,
on the all-reduce and all-gather of the two calibration sizes (64 KiB and 4 MiB) among the same
hosts, just before training. A folder from before (its calibration has only the 1 MiB points)
is replayed as it was made: the legacy per-transfer alpha on the links.
"""

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from transitsim.network import Exchange, NetworkSpec, simulate_exchange
from transitsim.network.spec import HostSpec
from transitsim.testbed import gloo_algos
from transitsim.testbed.model import (
    CALIBRATION_BYTES,
    CALIBRATION_SIZES,
    first_hop_bps,
    fit_alpha,
    fit_endpoint,
    rendezvous_starts,
    testbed_network,
    wan_latency_s,
)

GLOO_COLLECTIVE = {"all_reduce": "all_reduce", "reduce_at_switch": "all_reduce",
                   "all_gather": "all_gather"}  # fmt: skip


@dataclass(frozen=True)
class Calibrated:
    """One rate's network: measured payload share and latency, and the endpoint's cost."""

    efficiency: float  # payload bytes / bytes tbf counted (measured)
    latency_s: float  # a quarter of the kernel's round trip (measured)
    alpha_s: float = 0.0  # fitted cost of one gloo transfer, on the links (legacy folders)
    # the endpoint as a host stage (issue 25 item 2), when fitted: per_message_s is the cost of
    # ONE gloo transfer (network_for scales it by the transfers a message carries)
    host: HostSpec | None = None
    sites: int = 1  # 2: the hosts split over two datacentres joined by the WAN below
    wan_rate_bps: float = 0.0  # the WAN's tbf rate (sites=2)
    wan_latency_s: float = 0.0  # half of what the round trip across the WAN adds (measured)

    def columns(self) -> dict[str, float]:
        """The parameters as the table's `net_*` columns (NaN where there is no host stage)."""
        host = self.host
        return {
            "net_efficiency": self.efficiency,
            "net_latency_s": self.latency_s,
            "net_alpha_s": self.alpha_s,
            "net_host_per_transfer_s": host.per_message_s if host else math.nan,
            "net_host_rate_bps": host.rate_bps if host else math.nan,
            "net_sites": self.sites,
            "net_wan_rate_bps": self.wan_rate_bps,
            "net_wan_latency_s": self.wan_latency_s,
        }


def calibrate_rate(group: pd.DataFrame) -> Calibrated:
    """One rate's calibration points (`ttl_run.calibrate`) -> its network: the endpoint fitted
    on the two calibration sizes where the points have both, else (a folder from before) the
    legacy alpha on the 1 MiB ones."""
    efficiency = float(group["qdisc_efficiency"].mean())
    rtt = float(group["rtt_s"].iloc[0])
    sites = int(group["sites"].iloc[0]) if "sites" in group.columns else 1
    wan = {}
    if sites == 2:  # the same WAN as `testbed compare` models for a 2-site point
        rtt_wan = float(group["rtt_wan_s"].iloc[0])
        wan = dict(sites=2, wan_rate_bps=float(group["wan_rate_bps"].iloc[0]),
                   wan_latency_s=wan_latency_s(rtt, rtt_wan))  # fmt: skip
    if set(CALIBRATION_SIZES) <= set(group["bytes"].astype(int)):
        endpoint = fit_endpoint(group[group["bytes"].isin(CALIBRATION_SIZES)])
        workers = int(group["workers"].iloc[0])
        host = HostSpec(endpoint.per_transfer_s, endpoint.rate_bps, workers)
        return Calibrated(efficiency, rtt / 4, 0.0, host, **wan)
    fitted = group[group["bytes"] == CALIBRATION_BYTES]
    return Calibrated(efficiency, rtt / 4, fit_alpha(fitted if len(fitted) else group), **wan)


def calibrate(calibration: pd.DataFrame) -> dict[float, Calibrated]:
    """Per rate, the calibrated network."""
    return {
        float(rate): calibrate_rate(group)
        for rate, group in calibration.groupby("rate_bps", sort=True)
    }


def network_for(
    net: Calibrated,
    workers: int,
    rate_bps: float,
    collective: str,
    payload: int,
    *,
    alpha: bool = True,
    fixed_costs: bool = True,
) -> NetworkSpec:
    """The testbed as the NetworkSpec one `collective` of `payload` bytes is replayed on.

    alpha False: the bytes over the line rate and the host stage only (no per-transfer alpha).
    fixed_costs False: the bytes alone (no latency, no alpha, no host stage's per-message cost),
    for a transfer whose fixed costs were measured elsewhere."""
    transfers = gloo_algos.segments_per_message(GLOO_COLLECTIVE[collective], payload, workers)
    charged = alpha and fixed_costs
    network = testbed_network(
        workers,
        rate_bps,
        net.efficiency,
        net.latency_s if fixed_costs else 0.0,
        net.alpha_s * transfers / 2 if charged else 0.0,  # a message crosses two links
        sites=net.sites,
        wan_rate_bps=net.wan_rate_bps,
        wan_latency_s=net.wan_latency_s if fixed_costs else 0.0,
    )
    host = net.host
    if host is not None:
        host = replace(host, per_message_s=host.per_message_s * transfers if fixed_costs else 0.0)
    return replace(network, host=host)


def simulate_bytes(net: Calibrated, workers: int, rate_bps: float, collective: str,
                   payload: int) -> float:  # fmt: skip
    """Seconds `payload` bytes per rank take through `collective` at `rate_bps`, bytes only."""
    network = network_for(net, workers, rate_bps, collective, payload, fixed_costs=False)
    algo = gloo_algos.transitsim_algo(GLOO_COLLECTIVE[collective])
    return simulate_exchange(network, Exchange(algo, payload)).time_s


def rendezvous_s(network: NetworkSpec, collective: str, payload: int) -> float:
    """What gloo's all-gather rendezvous adds to one replayed exchange of `payload` bytes per
    rank (0 for the all-reduces): the ranks enter together after the loss gather, and the last
    one's left neighbour still starts a half-block late (`model.rendezvous_starts`, derived
    from gloo's code, which `testbed compare` charges every measured all-gather). The replay
    starts every rank together; this is the difference, simulated."""
    if GLOO_COLLECTIVE[collective] != "all_gather" or payload <= 0:
        return 0.0
    exchange = Exchange(gloo_algos.transitsim_algo("all_gather"), payload)
    together = np.zeros(network.workers)
    late = rendezvous_starts(together, payload, first_hop_bps(network, together))
    with_rendezvous = simulate_exchange(network, exchange, start_s=late).time_s
    return max(0.0, with_rendezvous - simulate_exchange(network, exchange).time_s)
