"""The measured points replayed by transitsim: the testbed as a NetworkSpec, a fit, predictions.

The equivalent network is one switch with every host link at the tbf rate. Its parameters, all
physical and all from the same run:

- `efficiency` (measured, not fitted): payload bytes the ranks sent / bytes tbf counted on their
  uplinks, per rate. TCP/IPv4/Ethernet framing at MTU 1500 (1448 payload in 1514 counted bytes)
  plus the ACKs and gloo's own headers and rendezvous notices that share the link.
- `latency_s` (measured, not fitted): a quarter of the TCP round trip between two hosts (a
  round trip crosses four links).
- `alpha_s` (fitted, ONE per rate, on ONE message size, shared by both collectives): the fixed
  cost of one gloo transfer (a segment of the all-reduce ring, a half-block of the all-gather
  ring) beyond its bytes: waking the rank and gloo's device thread on this shared machine, the
  "recv ready" round trip of gloo's rendezvous. Each transitsim ring message carries
  `segments_per_message` gloo transfers, so the link's per-message overhead is alpha x that
  count (half on each of the message's two links).
- start offsets (measured): when each rank left the barrier, given to the simulator as start_s.
- the all-gather rendezvous (derived from gloo's code, not fitted): gloo's tcp transport sends a
  buffer only once the receiver's "recv ready" notice has arrived, and gloo/allgather.cc posts
  each send *before* its recv. The last rank out of the barrier finds its right neighbour's
  notice waiting, so its first half-block goes at once and its own notice queues behind it; its
  left neighbour's first transfer therefore starts one half-block time late. The simulator
  gets that rank's start delayed accordingly (at P = 2 this alone makes the time 3 half-blocks
  instead of 2, as measured).

Everything else (the ring's steps and bytes) is transitsim's ring_allreduce / ring_allgather,
which carry the bytes gloo's rings carry (see gloo_algos).
"""

import json
import math
import statistics

import numpy as np
import pandas as pd

from transitsim.base.errors import TransitsimError
from transitsim.network import Exchange, LinkSpec, NetworkSpec, simulate_exchange
from transitsim.testbed import gloo_algos

CALIBRATION_BYTES = 1 << 20
ALPHA_PROBE_S = 1e-3


def testbed_network(
    workers: int, rate_bps: float, efficiency: float, latency_s: float, overhead_s: float
) -> NetworkSpec:
    """Hosts on one switch, each host link (both ways) at the shaped rate."""
    link = LinkSpec(rate_bps, latency_s=latency_s, overhead_s=overhead_s, efficiency=efficiency)
    return NetworkSpec("testbed", "switch", workers, link)


def simulate_point(row: pd.Series, alpha_s: float) -> float:
    """transitsim's time for one measured point, with a per-transfer overhead alpha_s."""
    workers, nbytes = int(row["workers"]), int(row["bytes"])
    per_message = alpha_s * gloo_algos.segments_per_message(row["collective"], nbytes, workers)
    network = testbed_network(
        workers,
        float(row["rate_bps"]),
        float(row["qdisc_efficiency"]),
        float(row["rtt_s"]) / 4,
        per_message / 2,  # a message crosses two links (host -> switch -> host)
    )
    exchange = Exchange(gloo_algos.transitsim_algo(row["collective"]), nbytes)
    start = np.array(json.loads(row["start_offsets_s"]), dtype=float)
    if row["collective"] == "all_gather":
        start = rendezvous_starts(start, nbytes, network.host_link.payload_bps)
    return simulate_exchange(network, exchange, start_s=start).time_s


def rendezvous_starts(start_s: np.ndarray, nbytes: int, payload_bps: float) -> np.ndarray:
    """gloo all-gather: the last rank's left neighbour waits one half-block for its notice."""
    start = start_s.copy()
    late = int(np.argmax(start))
    left = (late - 1) % len(start)
    start[left] = max(start[left], start[late] + (nbytes / 2) * 8 / payload_bps)
    return start


def fit_alpha(rows: pd.DataFrame) -> float:
    """Least-squares alpha on relative error over `rows` (time is affine in alpha), >= 0."""
    base = np.array([simulate_point(r, 0.0) for _, r in rows.iterrows()])
    probe = np.array([simulate_point(r, ALPHA_PROBE_S) for _, r in rows.iterrows()])
    slope = (probe - base) / ALPHA_PROBE_S
    measured = rows["median_s"].to_numpy()
    x, y = slope / measured, (measured - base) / measured
    norm = float(np.dot(x, x))
    return max(0.0, float(np.dot(x, y)) / norm) if norm > 0 else 0.0


def compare(measured: pd.DataFrame, calibration_bytes: int = CALIBRATION_BYTES) -> pd.DataFrame:
    """Every measured point beside transitsim's prediction; alpha fitted per rate on the
    calibration size only (those rows are marked `fitted`). `measured` is a table
    tables.check_measured accepted (the commands check it; this trusts it)."""
    out = []
    for rate, group in measured.groupby("rate_bps", sort=True):
        calib = group[group["bytes"] == calibration_bytes]
        if calib.empty:
            raise TransitsimError(
                f"testbed: no {calibration_bytes}-byte point at {rate:g} b/s to fit alpha on"
            )
        alpha = fit_alpha(calib)
        for _, row in group.iterrows():
            simulated = simulate_point(row, alpha)
            if not (math.isfinite(simulated) and simulated > 0):
                raise TransitsimError(
                    f"testbed: the simulation of {row['collective']} of {int(row['bytes'])} B on "
                    f"{int(row['workers'])} workers at {rate:g} b/s gave {simulated!r} s"
                )
            out.append(
                {
                    **row.to_dict(),
                    "alpha_s": alpha,
                    "latency_s": float(row["rtt_s"]) / 4,
                    "simulated_s": simulated,
                    "rel_error": (simulated - row["median_s"]) / row["median_s"],
                    "fitted": int(row["bytes"]) == calibration_bytes,
                }
            )
    frame = pd.DataFrame(out)
    order = ["rate_bps", "collective", "workers", "bytes"]
    return frame.sort_values(order, kind="stable").reset_index(drop=True)


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
    }
