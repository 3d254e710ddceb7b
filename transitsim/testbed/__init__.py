"""A real network to hold the simulator against: namespaces, a bridge, tc tbf, gloo over TCP.

netns.py builds and tears down the testbed (root, iproute2); worker.py is the torch.distributed
rank run inside each host namespace (the only module here that imports torch); measure.py runs
the grid; gloo_algos.py says which algorithm gloo runs; model.py replays each point through
transitsim and fits the one free parameter; plot.py draws the comparison. ttl_run.py trains on
the testbed, ttl_model.py predicts the runs' time to loss, ttl_table.py prints it. Commands:
`transitsim testbed run|compare|down|ttl|ttl-compare`; write-up: docs/testbed.md.
"""


def rate_label(rate_bps: float) -> str:
    """A tbf rate as the testbed's tables and plots print it: "50 Mb/s", "1 Gb/s"."""
    return f"{rate_bps / 1e9:g} Gb/s" if rate_bps >= 1e9 else f"{rate_bps / 1e6:g} Mb/s"
