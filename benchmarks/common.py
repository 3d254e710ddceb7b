"""What the network benchmarks share: their networks, synthetic traces and a wall-clock timer."""

import time
from pathlib import Path

import numpy as np
import pandas as pd

from transitsim.network import LinkSpec, NetworkSpec, SwitchSpec
from transitsim.traces.format import Trace, read_trace, write_trace

DENSE = 31_666_944  # the dense BF16 delta of the worked 15.8 M parameter model
N_PARAMS = DENSE // 2


def two_datacentres(workers: int, wan_bps: float) -> NetworkSpec:
    """Hosts at 200 Gb/s on a switch per site, 2 sites 1,000 km apart on one WAN link."""
    return NetworkSpec(
        f"2dc-{workers}",
        "datacentres",
        workers,
        LinkSpec(200e9, length_m=3),
        switch=SwitchSpec(forwarding_latency_s=500e-9),
        datacentres=2,
        wan_link=LinkSpec(wan_bps, length_m=1e6),
    )


def one_switch(workers: int, aggregator: bool = False, name: str = "") -> NetworkSpec:
    """Hosts at 200 Gb/s on one switch (that sums, with `aggregator`)."""
    return NetworkSpec(
        name or f"sw-{workers}",
        "switch",
        workers,
        LinkSpec(200e9, length_m=3),
        switch=SwitchSpec(forwarding_latency_s=500e-9, aggregator=aggregator),
    )


def synthetic_trace(
    folder: Path,
    variant: str,
    payload_bytes: int,
    collective: str,
    steps: int,
    reducible: bool,
    tag: str = "bench",
) -> Trace:
    """A trainer-style 8-worker trace: one row per step, loss falling, evaluated every 100."""
    step = np.arange(1, steps + 1)
    loss = 3.0 + 2.0 * np.exp(-step / 800.0)
    frame = pd.DataFrame(
        {
            "step": step,
            "train_loss": loss,
            "val_loss": np.where(step % 100 == 0, loss + 0.02, np.nan),
            "lr": 1e-3,
            "payload_bytes": payload_bytes,
            "collective": collective,
            "reducible": reducible,
            "compute_s": 0.030,
            "compress_s": 0.0 if variant == "A" else 0.004,
        }
    )
    meta = {
        "name": f"{variant}-{tag}-s0",
        "variant": variant,
        "seed": 0,
        "workers": 8,
        "n_params": N_PARAMS,
        "dense_bytes_per_step": DENSE,
        "rows": "every_step",
        "origin": "trainer",
        "status": "complete",
    }
    return read_trace(write_trace(folder / f"{meta['name']}.parquet", frame, meta))


def first_steps(trace: Trace, count: int) -> Trace:
    return Trace(meta=trace.meta, steps=trace.steps.iloc[:count].reset_index(drop=True))


def timed(function):
    """(what function() returns, wall seconds it took)."""
    began = time.perf_counter()
    result = function()
    return result, time.perf_counter() - began
