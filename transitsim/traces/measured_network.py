"""The network a profiled job ran on, as measured by its profile: a network YAML that `replay`
takes (issue 42, item 4; `traces import --profile ... --write-network FILE`).

What a profile measures of the network is how long the step waited on communication: the mean
exposed communication of the imported template. The file is one switch with the job's workers
and a host link whose rate makes the ring all-reduce of the step's payload take exactly that
long (2 (P-1)/P x payload x 8 / exposed; no latency, no length, no forwarding delay), so that
`replay --network FILE --overlap none` gives compute + exposed + optimiser, the measured step.
It is an effective figure, not the fabric's: every collective the step waited on (broadcasts,
all-to-alls, a slow peer inside an NCCL kernel) is folded into the one exchange replay models.
What it is for: the starting point of "and on a network k times faster or slower" (`--set
host_link.rate=...`), from the step the job really took.
"""

from pathlib import Path
from typing import Any

import yaml

from transitsim.base.atomic import write_text_atomic
from transitsim.base.errors import TransitsimError, escaped_line


def measured_network(meta: dict[str, Any]) -> dict[str, Any]:
    """The network mapping for an imported trace's metadata (one line when none can be made)."""
    template = meta["profile"]["template"]
    workers, payload = int(meta["workers"]), int(template["payload_bytes"])
    exposed = float(template["exposed_s"])
    if template["collective"] != "all_reduce":
        raise TransitsimError(
            f"--write-network fits an all-reduce exchange; this run's is {template['collective']}"
        )
    if workers < 2 or exposed <= 0 or payload <= 0:
        raise TransitsimError(
            "--write-network: no exposed communication to fit (one worker, nothing exposed, or "
            "no payload): any network replays this step"
        )
    rate_bps = 2 * (workers - 1) / workers * payload * 8 / exposed
    return {
        "name": f"measured-{meta['name']}"[:80],
        "description": (
            f"effective network of {meta['name']}: ring all-reduce of {payload:,} B over "
            f"{workers} workers in the measured {exposed * 1e3:.6g} ms of exposed communication"
        ),
        "topology": "switch",
        "workers": workers,
        "host_link": {"rate": f"{rate_bps / 1e9:.9g} Gb/s", "length": "0 m", "latency": "0 s"},
        "switch": {"forwarding_latency": "0 s"},
    }


def write_measured_network(path: Path | str, meta: dict[str, Any]) -> Path:
    """Write the measured network as YAML (atomically), with a comment saying how to use it."""
    mapping = measured_network(meta)
    source = escaped_line(str(meta.get("source_log")))[:200]  # a file name may hold a newline
    header = (
        f"# Written by `transitsim traces import --write-network` from {source}.\n"
        "# Replay with --overlap none to reproduce the profiled step (the exposed time is\n"
        "# measured; the overlap already happened). An effective rate, not the fabric's: every\n"
        "# collective the step waited on is folded into the gradient all-reduce.\n"
    )
    return write_text_atomic(path, header + yaml.safe_dump(mapping, sort_keys=False))
