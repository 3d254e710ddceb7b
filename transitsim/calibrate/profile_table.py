"""The network a profiled job ran on, fitted to its own collectives (issue 42, item 4).

A Kineto trace times every gradient collective it ran: on a GPU its kernels (first start to last
end, device time), on a CPU the backend op. Those are rows of a measured table, as nccl-tests
writes one: (size, time). They are fitted the way `calibrate nccl-tests` fits a table, on
transitsim's own collective (the ring all-reduce, or ring all-gather, of the job's workers on one
switch, calibrate/model.py): two physical parameters, the link's payload rate and its latency,
by least squares on the relative error (latency >= 0). `traces import --profile` writes the
result beside the trace as `measured.yaml`, so that

    transitsim replay TRACE_DIR --network TRACE_DIR/measured.yaml --overlap buckets

replays the profiled run on the network it ran on (the buckets timed as the kernels were, placed
where backward made them ready), and a what-if (`--set host_link.rate=...`, a preset) starts
from a replay that reproduced the run.

What a kernel's time holds is more than the wire: an NCCL kernel starts when its rank launches
it and ends when every rank has taken part, so the wait for the last rank to arrive, and any
slowdown from compute running beside it, is in the fitted latency and rate. They are the job's
effective figures, not the fabric's datasheet.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from transitsim.base.atomic import write_text_atomic
from transitsim.base.errors import TransitsimError, escaped_line
from transitsim.calibrate.model import Link, Shape, coefficients
from transitsim.calibrate.network_file import network_dict, rate_text, time_text

FITTED = {"all_reduce": "ring_allreduce", "all_gather": "ring_allgather"}


@dataclass(frozen=True)
class ProfileFit:
    """The fitted link and how well it reproduces the rows it was fitted to."""

    collective: str
    ranks: int
    link: Link
    rows: int  # collectives timed
    sizes: int  # distinct sizes among them
    worst: float  # worst |relative error| over the rows' per-size medians
    network: dict[str, Any]


def profile_rows(meta: dict[str, Any]) -> tuple[str, list[tuple[int, float]]]:
    """(collective, [(nccl-tests size in bytes, seconds)]) of the trace's gradient collectives
    as the import timed them (meta["profile"]["steps"][i]["collectives"][j]["run_s"])."""
    profile = meta.get("profile") or {}
    kind = (profile.get("template") or {}).get("collective", "all_reduce")
    ranks = int(meta.get("workers", 0))
    rows = []
    for step in profile.get("steps", []):
        for item in step.get("collectives", []):
            size, seconds = item.get("bytes"), item.get("run_s")
            if item.get("kind") != kind or not size or not seconds or seconds <= 0:
                continue
            rows.append((int(size) * (ranks if kind == "all_gather" else 1), float(seconds)))
    return kind, rows


def fit_profile(meta: dict[str, Any]) -> ProfileFit:
    """The trace's measured network (one line, TransitsimError, when it has none to fit)."""
    kind, rows = profile_rows(meta)
    ranks = int(meta.get("workers", 0))
    if kind not in FITTED:
        raise TransitsimError(f"the measured network fits an all-reduce or all-gather, not {kind}")
    if ranks < 2 or not rows:
        raise TransitsimError(
            "no measured network: the profile times no gradient collective between 2 or more "
            "workers (one worker, or no readable size or time)"
        )
    shape = Shape("switch", ranks, 1)
    sizes = sorted({size for size, _ in rows})
    medians = {s: float(np.median([t for size, t in rows if size == s])) for s in sizes}
    terms = {s: coefficients(kind, FITTED[kind], shape, s) for s in sizes}
    times = np.array([medians[s] for s in sizes])
    design = np.array([terms[s] for s in sizes]) / times[:, None]  # [c_L, c_B] / t
    latency, inverse = 0.0, 0.0
    if len(sizes) > 1:
        (latency, inverse), *_ = np.linalg.lstsq(design, np.ones(len(sizes)), rcond=None)
    if len(sizes) == 1 or latency < 0 or inverse <= 0:  # one size says no latency: rate only
        column = design[:, 1]
        latency, inverse = 0.0, float(column.sum() / (column @ column))
    link = Link(payload_bps=1.0 / float(inverse), latency_s=float(latency))
    predicted = np.array([c_l * link.latency_s + c_b / link.payload_bps for c_l, c_b in
                          (terms[s] for s in sizes)])  # fmt: skip
    worst = float(np.max(np.abs(predicted / times - 1.0)))
    name = f"measured-{meta.get('name', 'run')}"[:80]
    description = (
        f"the network {meta.get('name', 'the run')} ran on, as its profile timed it: "
        f"{len(rows)} {kind.replace('_', '-')}s of {len(sizes)} size(s) fitted on one switch of "
        f"{ranks} workers (payload {rate_text(link.payload_bps)}, latency "
        f"{time_text(link.latency_s)} per link), worst |error| {worst:.1%}"
    )
    network = network_dict(link, shape, name, description)
    return ProfileFit(kind, ranks, link, len(rows), len(sizes), worst, network)


def write_profile_network(path: Path | str, meta: dict[str, Any]) -> tuple[Path, ProfileFit]:
    """Write the trace's measured network as YAML (atomically), with a comment saying how to
    replay on it."""
    fit = fit_profile(meta)
    source = escaped_line(str(meta.get("source_log")))[:200]  # a file name may hold a newline
    header = (
        f"# Written by `transitsim traces import --profile` from {source}:\n"
        f"# {fit.rows} gradient {fit.collective.replace('_', '-')}(s) timed on the device, fitted\n"
        "# like an nccl-tests table (calibrate/profile_table.py). Replay with --overlap buckets\n"
        "# to reproduce the profiled step. The job's effective figures: a kernel's time holds\n"
        "# the wait for the last rank and any slowdown from compute beside it.\n"
    )
    text = header + yaml.safe_dump(fit.network, sort_keys=False)
    return write_text_atomic(path, text), fit
