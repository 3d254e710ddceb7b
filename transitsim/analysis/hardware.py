"""Seeds of one configuration that ran on different GPUs: a note, and a mark on its name.

A configuration's seeds are taken as draws of one run; when one seed ran on an L4 and the others
on A100s, their spread is the hardware's as well as the seeds' (issue 43: the published top-k
runs). The trace's metadata says which device ran it (hardware.device); here each such
configuration gets a mark after its label, which the verdict, the tables and the report then
carry, and a note that says which devices.
"""

from collections import Counter
from collections.abc import Iterable

from transitsim.traces.format import Trace

MARK = " †"  # after a label: its seeds ran on different hardware


def device(trace: Trace) -> str | None:
    """The device a trace ran on, as its metadata names it (None when it does not)."""
    hardware = trace.meta.get("hardware") or {}
    found = hardware.get("device") if isinstance(hardware, dict) else None
    return str(found) if found else None


def mixed_devices(traces: Iterable[Trace]) -> dict[str, Counter]:
    """Per configuration whose seeds name two or more devices: how many seeds ran on each."""
    found: dict[str, Counter] = {}
    for trace in traces:
        name = device(trace)
        if name is not None:
            found.setdefault(trace.config_name, Counter())[name] += 1
    return {config: counts for config, counts in found.items() if len(counts) > 1}


def marked_labels(labels: dict[str, str], traces: Iterable[Trace]) -> tuple[dict[str, str], list]:
    """The labels with MARK after each configuration whose seeds ran on different devices, and
    one note per such configuration."""
    mixed = mixed_devices(traces)
    marked = dict(labels)
    notes = []
    for config, counts in mixed.items():
        label = labels.get(config, config)
        marked[config] = label + MARK
        devices = ", ".join(f"{name} x{count}" for name, count in counts.most_common())
        notes.append(
            f"{label}{MARK}: its seeds ran on different hardware ({devices}), so their spread "
            "(and its interval) is the hardware's as well as the seeds'"
        )
    return marked, notes
