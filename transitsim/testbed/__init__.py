"""A real network to hold the simulator against: namespaces, a bridge, tc tbf, gloo over TCP.

netns.py builds and tears down the testbed (root, iproute2); worker.py is the torch.distributed
rank run inside each host namespace (the only module here that imports torch); measure.py runs
the grid; gloo_algos.py says which algorithm gloo runs; model.py replays each point through
transitsim and fits the one free parameter; plot.py draws the comparison. ttl_run.py trains on
the testbed (each variant's compute run unshaped, then the shaped runs), ttl_compute.py takes
each step's compute from the compute run, ttl_network.py calibrates the replayed network (the
one place the endpoint fit lives), ttl_model.py predicts the runs' time to loss, ttl_table.py
prints it with the exchange's own error and the variants' order. Commands:
`transitsim testbed run|compare|down|ttl|ttl-compare`; write-up: docs/testbed.md.
"""

import math


def rate_label(rate_bps: float) -> str:
    """A tbf rate as the testbed's tables and plots print it: "50 Mb/s", "1 Gb/s"."""
    return f"{rate_bps / 1e9:g} Gb/s" if rate_bps >= 1e9 else f"{rate_bps / 1e6:g} Mb/s"


def size_label(nbytes: int) -> str:
    """A payload as the tables print it: "64 KiB", "1 MiB", "1,000 B"."""
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes:,} B"


def percent(value: float, signed: bool = False) -> str:
    """A share as the tables print it ("5.6%"), "–" where there is none (no predicted point)."""
    if value != value:  # NaN
        return "–"
    return f"{value:+.1%}" if signed else f"{value:.1%}"


def json_ready(value: object) -> object:
    """`value` with every NaN and infinity as null: summary files are strict JSON."""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
