"""What a run's numbers rest on, in sentences: the question it asks and what it assumes.

The report shows these beside the results (not only on stderr): the compute model and where its
seconds come from (GPU, peak, MFU, or the trace's own timing and the devices it was measured
on), the model size replayed (and any extrapolation factor), and how often the loss was
evaluated, which bounds how precisely steps-to-loss are known.
"""

from pathlib import Path

import numpy as np

from transitsim.replay.compute import ComputeModel
from transitsim.traces.format import Trace


def scenario_question(path: Path | None, description: str = "") -> str:
    """The "Question: ..." paragraph of a scenario file's opening comment block, else its
    description (the shipped scenarios each open with one)."""
    if path is None or not Path(path).is_file():
        return description
    lines = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    found: list[str] = []
    for line in lines:
        if not found and line.startswith("Question:"):
            found.append(line[len("Question:") :].strip())
        elif found:
            if not line:
                break
            found.append(line)
    question = " ".join(found) or description
    return question[:1].upper() + question[1:]


def _devices(traces: list[Trace]) -> str:
    counts: dict[str, int] = {}
    for trace in traces:
        device = (trace.meta.get("hardware") or {}).get("device") or "an unrecorded device"
        counts[str(device)] = counts.get(str(device), 0) + 1
    return ", ".join(f"{device} ({count} run(s))" for device, count in counts.items())


def compute_assumption(compute: ComputeModel, traces: list[Trace]) -> str:
    """The compute model in one sentence, with the numbers it uses."""
    if compute.kind == "flops":
        return (
            f"compute: FLOP model, 6 x parameters x tokens per worker step on a GPU of "
            f"{compute.peak_flops / 1e12:,.4g} TFLOP/s peak at {compute.mfu:.0%} MFU; "
            "compression and update keep their measured ratio to forward+backward"
        )
    timing = sorted({str(t.meta.get("timing")) for t in traces if t.meta.get("timing")})
    how = f" ({'; '.join(timing)})" if timing else ""
    measured = f"each trace's own measured step time{how}, as measured on {_devices(traces)}"
    if compute.kind == "scaled":
        return f"compute: {measured}, times {compute.factor:g}"
    return f"compute: {measured}"


def scale_assumption(scale_params: int | None, traces: list[Trace]) -> str:
    sizes = sorted({int(t.meta["n_params"]) for t in traces})
    own = ", ".join(f"{n:,}" for n in sizes)
    if scale_params is None or sizes == [scale_params]:
        return f"model size: each trace's own ({own} parameters); scale factor 1 (no extrapolation)"
    factors = ", ".join(f"{scale_params / n:,.4g}" for n in sizes)
    return (
        f"model size: extrapolated to {scale_params:,} parameters from {own} (scale factor "
        f"{factors}): bytes and compute scaled, loss per step kept from the trace"
    )


def evaluation_assumption(traces: list[Trace]) -> str:
    """How often each trace evaluated its validation loss: steps-to-loss are known to that."""
    gaps: set[int] = set()
    for trace in traces:
        steps = trace.steps.loc[trace.steps["val_loss"].notna(), "step"].to_numpy(np.int64)
        if len(steps) >= 2:
            gaps.add(int(np.median(np.diff(steps))))
    if not gaps:
        return "evaluation: too few evaluated steps to say how often the loss was measured"
    every = ", ".join(f"{g:,}" for g in sorted(gaps))
    return (
        f"evaluation granularity: validation loss every {every} steps, so a seed's steps to "
        "a target are where its loss crossed it, interpolated between the evaluation above and "
        "the first at or below, and known only to within them (the intervals say so)"
    )


def assumptions(
    compute: ComputeModel, scale_params: int | None, traces: list[Trace], workers: list[int]
) -> list[str]:
    """The run's assumptions, one sentence each, for the report and the API."""
    items = [
        compute_assumption(compute, traces),
        scale_assumption(scale_params, traces),
        evaluation_assumption(traces),
    ]
    trained = sorted({t.workers for t in traces})
    if set(workers) - set(trained):
        items.append(
            f"workers: trained with {', '.join(map(str, trained))}, replayed on "
            f"{', '.join(f'{w:,}' for w in sorted(set(workers)))}: loss per step kept "
            "(extrapolated)"
        )
    items.append(
        "time to loss = steps the trace needed (training, measured) x seconds each step takes on "
        "the network (simulated); a target not reached by every seed counts as not reached"
    )
    return items
