"""Record any training loop as a transitsim trace (issue 23, item 4).

    recorder = TraceRecorder("runs/mine.parquet", workers=world, variant="A", model=model)
    for step in ...:
        ...                                          # forward, backward, exchange, update
        recorder.step(loss=loss.item(), payload_bytes=bytes_sent,
                      compute_s=fwd_bwd_seconds, exchange_s=exchange_seconds)
    recorder.close()                                 # rank 0 writes it, atomically

Each `step` is one row: the loss (and a validation loss when evaluated), the bytes one worker
put on the wire, the measured forward+backward seconds (`compute_s`), exchange seconds
(`comm_s`), compression and optimiser seconds. `close` validates and writes through
transitsim.traces.format, so the file is the format `transitsim replay` reads; on a
torch.distributed job only rank 0 writes (the others' `close` returns None).
"""

import math
import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.distributed as dist

from transitsim.base.errors import TransitsimError
from transitsim.traces.format import VARIANTS, write_trace

_COLLECTIVES = {"A": "all_reduce", "E'": "reduce_at_switch"}  # the others all-gather


def _seconds(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TransitsimError(f"TraceRecorder.step: {name} must be a finite number, got {value!r}")
    if value < 0:
        raise TransitsimError(f"TraceRecorder.step: {name} must not be negative, got {value!r}")
    return float(value)


class TraceRecorder:
    """Rows of a user's own run, written as one trace on `close` (or leaving a `with` block)."""

    def __init__(
        self,
        path: Path | str,
        *,
        workers: int,
        variant: str = "A",
        model: torch.nn.Module | None = None,
        n_params: int | None = None,
        name: str | None = None,
        seed: int = 0,
        variant_params: dict[str, Any] | None = None,
        dense_bytes_per_step: int | None = None,
        notes: list[str] | None = None,
        optimizer: str | None = None,
    ) -> None:
        """workers: data-parallel workers of the run; variant: the design's letter (A dense,
        B top-k, C/F bands, E optics, ...); model or n_params: its size (dense bytes default
        to its parameters' bytes); optimizer: the loop's (a dense run is labelled "A dense
        all-reduce (NAME)", not the design's "A AdamW")."""
        if variant not in VARIANTS:
            raise TransitsimError(f"TraceRecorder: variant {variant!r} is not one of {VARIANTS}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise TransitsimError(f"TraceRecorder: workers must be a positive integer: {workers!r}")
        if model is not None:
            params = list(model.parameters())
            n_params = n_params or sum(p.numel() for p in params)
            dense = sum(p.numel() * p.element_size() for p in params)
            dense_bytes_per_step = dense_bytes_per_step or dense
        if not n_params or n_params < 1:
            raise TransitsimError("TraceRecorder: give the model or n_params (its size)")
        self.path = Path(path)
        self.workers = workers
        self.variant = variant
        self.meta: dict[str, Any] = {
            "name": name or self.path.stem,
            "variant": variant,
            "variant_params": dict(variant_params or {}),
            "seed": seed,
            "workers": workers,
            "n_params": int(n_params),
            "dense_bytes_per_step": int(dense_bytes_per_step or 4 * n_params),
            "rows": "every_step",
            "origin": "trainer",
            "status": "incomplete",
            "timing": "measured: recorded by trainer.own.TraceRecorder in the user's loop",
            "versions": {"torch": torch.__version__},
            "notes": list(notes or []),
        }
        if variant == "A" or optimizer is not None:  # a user's run: its optimiser, "" unknown
            self.meta["optimizer"] = str(optimizer or "")
        self.rows: list[dict[str, Any]] = []
        self._closed = False

    def step(
        self,
        *,
        loss: float,
        payload_bytes: int,
        compute_s: float,
        exchange_s: float = 0.0,
        val_loss: float | None = None,
        lr: float = 0.0,
        compress_s: float = 0.0,
        update_s: float = 0.0,
        wall_s: float | None = None,
        step: int | None = None,
    ) -> None:
        """One optimiser step: its loss, the bytes one worker sent, the measured seconds."""
        if self._closed:
            raise TransitsimError("TraceRecorder.step after close")
        if (
            isinstance(payload_bytes, bool)
            or not isinstance(payload_bytes, int)
            or payload_bytes < 0
        ):
            raise TransitsimError(
                f"TraceRecorder.step: payload_bytes must be a byte count: {payload_bytes!r}"
            )
        number = step if step is not None else (self.rows[-1]["step"] + 1 if self.rows else 1)
        if self.rows and number <= self.rows[-1]["step"]:
            raise TransitsimError(
                f"TraceRecorder.step: step {number} after step {self.rows[-1]['step']}"
            )
        loss = float(loss)
        val = math.nan if val_loss is None else float(val_loss)
        compute, exchange = _seconds("compute_s", compute_s), _seconds("exchange_s", exchange_s)
        compress, update = _seconds("compress_s", compress_s), _seconds("update_s", update_s)
        self.rows.append(
            {
                "step": int(number),
                "train_loss": loss if math.isfinite(loss) else math.inf,
                "val_loss": val if math.isfinite(val) or math.isnan(val) else math.inf,
                "lr": _seconds("lr", lr),
                "payload_bytes": payload_bytes,
                "collective": _COLLECTIVES.get(self.variant, "all_gather"),
                "reducible": self.variant != "B",  # top-k positions differ between workers
                "compute_s": compute,
                "compress_s": compress,
                "update_s": update,
                "comm_s": exchange,
                "wall_s": _seconds("wall_s", wall_s)
                if wall_s is not None
                else compute + exchange + compress + update,
                "end_unix_s": time.time(),
            }
        )

    def close(self, *, complete: bool = True) -> Path | None:
        """Write the trace (rank 0 of a torch.distributed job; every process otherwise)."""
        self._closed = True
        if dist.is_available() and dist.is_initialized() and dist.get_rank() != 0:
            return None
        if not self.rows:
            raise TransitsimError("TraceRecorder.close: no step was recorded")
        meta = {**self.meta, "status": "complete" if complete else "incomplete"}
        meta["payload_bytes_per_step"] = int(self.rows[-1]["payload_bytes"])
        return write_trace(self.path, pd.DataFrame(self.rows), meta)

    def __enter__(self) -> "TraceRecorder":
        return self

    def __exit__(self, kind: type | None, *_: object) -> None:
        if not self._closed and self.rows:
            self.close(complete=kind is None)
