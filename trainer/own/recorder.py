"""Record any training loop as a transitsim trace (issue 23, item 4; hardened in issue 45).

    recorder = TraceRecorder("runs/mine.parquet", workers=world, variant="A", model=model)
    for step in ...:
        ...                                          # forward, backward, exchange, update
        recorder.step(loss=loss.item(), payload_bytes=bytes_sent,
                      compute_s=fwd_bwd_seconds, exchange_s=exchange_seconds)
    recorder.close()                                 # rank 0 writes it, atomically

Each `step` is one row: the loss (and a validation loss when evaluated), the bytes one worker
put on the wire, the measured forward+backward seconds (`compute_s`), exchange seconds
(`comm_s`), compression and optimiser seconds. Every value is checked as it arrives, so one bad
value is refused at its own step (the rows before it stay good) rather than spoiling the trace
at `close`. The trace is rewritten on disk as the run goes (status "incomplete"): a killed
process loses only the steps since the last save. `close` writes it "complete". The file is
the format `transitsim replay` reads; on a torch.distributed job only rank 0 writes.
"""

import math
import numbers
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist

from trainer.own.errors import OwnTypeError, OwnValueError
from transitsim.base.errors import TransitsimError
from transitsim.traces.format import (
    MAX_STEP_BYTES,
    MAX_STEP_SECONDS,
    VARIANTS,
    validate_meta,
    write_trace,
)

COLLECTIVES = {"A": "all_reduce", "E'": "reduce_at_switch"}  # the others all-gather
MAX_STEP = 2**62
FLUSH_EVERY = 100  # save the trace every this many rows ...
FLUSH_S = 60.0  # ... or this many seconds, whichever comes first ...
SAVE_SHARE = 0.05  # ... but never spend more than this share of the loop's time saving


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _brief(value: object) -> str:
    """The value as a message shows it: its repr, cut short (an int past Python's 4,300 digits
    has none)."""
    try:
        return f"{value!r:.60}"
    except ValueError:
        return f"an int of {value.bit_length():,} bits"  # type: ignore[attr-defined]


def _shown(value: object) -> str:
    return f"{_brief(value)} ({type(value).__name__})"


def _number(name: str, value: object, wanted: str) -> int | float:
    """A Python int or float from an int, a float, a numpy scalar or a one-element tensor or
    array; anything else is an OwnTypeError naming the argument."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    elif isinstance(value, np.ndarray | np.generic) and value.size == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise OwnTypeError(f"TraceRecorder.step: {name} must be {wanted}, got {_shown(value)}")
    if isinstance(value, numbers.Integral):
        return int(value)
    try:
        return float(value)
    except (OverflowError, ValueError):
        raise OwnValueError(
            f"TraceRecorder.step: {name} must be {wanted}, got {_brief(value)}"
        ) from None


def _as_float(number: int | float) -> float:
    try:
        return float(number)
    except OverflowError:  # an int beyond any float
        return math.inf if number > 0 else -math.inf


def _count(name: str, value: object, low: int, high: int) -> int:
    """A whole number in [low, high]: 2.0 is 2, 2.5 is refused (never truncated)."""
    wanted = f"a whole number in [{low:,}, {high:,}]"
    number = _number(name, value, wanted)
    whole = isinstance(number, int) or number.is_integer()
    if not whole or not low <= number <= high:
        raise OwnValueError(f"TraceRecorder.step: {name} must be {wanted}, got {_brief(value)}")
    return int(number)


def _finite(name: str, value: object, high: float = math.inf, unit: str = "") -> float:
    """A finite number in [0, high] (seconds, a learning rate)."""
    bound = f"in [0, {high:,}]{unit}" if math.isfinite(high) else ">= 0"
    wanted = f"a finite number {bound}"
    number = _as_float(_number(name, value, wanted))
    if not (math.isfinite(number) and 0 <= number <= high):
        raise OwnValueError(f"TraceRecorder.step: {name} must be {wanted}, got {_brief(value)}")
    return number


def _loss(name: str, value: object, missing: float) -> float:
    """A loss >= 0; NaN stands for `missing` (a diverged training loss: inf; a validation loss
    not evaluated: NaN), inf for a diverged run."""
    wanted = "a number >= 0 (nan or inf: diverged)"
    number = _as_float(_number(name, value, wanted))
    if math.isnan(number):
        return missing
    if number < 0:
        raise OwnValueError(f"TraceRecorder.step: {name} must be {wanted}, got {_brief(value)}")
    return number


class TraceRecorder:
    """Rows of a user's own run, saved as one trace as it goes and on `close` (or when a `with`
    block is left)."""

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
        flush_every: int | None = FLUSH_EVERY,
        flush_s: float | None = FLUSH_S,
    ) -> None:
        """workers: data-parallel workers of the run; variant: the design's letter (A dense,
        B top-k, C/F bands, E optics, ...); model or n_params: its size (dense bytes default
        to its parameters' bytes); optimizer: the loop's (a dense run is labelled "A dense
        all-reduce (NAME)", not the design's "A AdamW"). flush_every / flush_s: save the trace
        every this many rows or seconds, whichever first (None: not by that measure; both None:
        only on close)."""
        if variant not in VARIANTS:
            raise TransitsimError(f"TraceRecorder: variant {variant!r} is not one of {VARIANTS}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise TransitsimError(f"TraceRecorder: workers must be a positive integer: {workers!r}")
        if model is not None:
            params = list(model.parameters())
            n_params = n_params or sum(p.numel() for p in params)
            dense = sum(p.numel() * p.element_size() for p in params)
            dense_bytes_per_step = dense_bytes_per_step or dense
        if not n_params:
            raise TransitsimError("TraceRecorder: give the model or n_params (its size)")
        for what, value in (("n_params", n_params), ("dense_bytes_per_step", dense_bytes_per_step)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise OwnValueError(f"TraceRecorder: {what} must be a whole number, got {value!r}")
        if flush_every is not None and not _is_positive_int(flush_every):
            raise OwnValueError("TraceRecorder: flush_every must be a positive integer or None")
        if flush_s is not None and not (isinstance(flush_s, int | float) and flush_s > 0):
            raise OwnValueError(
                "TraceRecorder: flush_s must be a positive number of seconds or None"
            )
        self.path = Path(path)
        self.variant = variant
        self.meta: dict[str, Any] = {
            "name": name or self.path.stem,
            "variant": variant,
            "variant_params": dict(variant_params or {}),
            "seed": seed,
            "workers": workers,
            "n_params": n_params,
            "dense_bytes_per_step": dense_bytes_per_step or 4 * n_params,
            "rows": "every_step",
            "origin": "trainer",
            "status": "incomplete",
            "timing": "measured: recorded by trainer.own.TraceRecorder in the user's loop",
            "versions": {"torch": torch.__version__},
            "notes": list(notes or []),
        }
        if variant == "A" or optimizer is not None:  # a user's run: its optimiser, "" unknown
            self.meta["optimizer"] = str(optimizer or "")
        try:  # what a trace's metadata cannot hold is refused now, not at the first save
            validate_meta(self.meta, self.path)
        except TransitsimError as exc:
            raise OwnValueError(f"TraceRecorder: {exc}") from None
        self.flush_every, self.flush_s = flush_every, flush_s
        self.rows: list[dict[str, Any]] = []
        self.saved_rows = 0  # rows on disk (what a kill -9 now would leave)
        self.saves = 0
        self.save_s = self.last_save_s = 0.0  # seconds spent saving: all, the last save
        self.clock: Callable[[], float] = time.monotonic  # the policy's seconds (tests replace it)
        self.write: Callable[[str], None] = self._write  # the save itself (tests replace it)
        self._saved_at = 0.0
        self._closed = False

    @property
    def saved_step(self) -> int | None:
        """The last step on disk: what a kill -9 now would keep (None: nothing yet)."""
        return self.rows[self.saved_rows - 1]["step"] if self.saved_rows else None

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
        """One optimiser step: its loss, the bytes one worker sent, the measured seconds.
        `step` defaults to the previous one + 1; steps may skip (a row every 50 steps)."""
        if self._closed:
            raise TransitsimError("TraceRecorder.step after close")
        previous = self.rows[-1]["step"] if self.rows else 0
        number = previous + 1 if step is None else _count("step", step, 1, MAX_STEP)
        if number <= previous:
            raise OwnValueError(f"TraceRecorder.step: step {number} after step {previous}")
        seconds = {
            key: _finite(key, value, MAX_STEP_SECONDS, " s")
            for key, value in (
                ("compute_s", compute_s),
                ("exchange_s", exchange_s),
                ("compress_s", compress_s),
                ("update_s", update_s),
            )
        }
        row = {
            "step": number,
            "train_loss": _loss("loss", loss, missing=math.inf),
            "val_loss": math.nan if val_loss is None else _loss("val_loss", val_loss, math.nan),
            "lr": _finite("lr", lr),
            "payload_bytes": _count("payload_bytes", payload_bytes, 0, MAX_STEP_BYTES),
            "collective": COLLECTIVES.get(self.variant, "all_gather"),
            "reducible": self.variant != "B",  # top-k positions differ between workers
            "compute_s": seconds["compute_s"],
            "compress_s": seconds["compress_s"],
            "update_s": seconds["update_s"],
            "comm_s": seconds["exchange_s"],
            "wall_s": sum(seconds.values())
            if wall_s is None
            else _finite("wall_s", wall_s, MAX_STEP_SECONDS, " s"),
            "end_unix_s": time.time(),
        }
        if row["wall_s"] > MAX_STEP_SECONDS:
            raise OwnValueError(
                f"TraceRecorder.step: the step's seconds add up to more than {MAX_STEP_SECONDS:,}"
            )
        self.rows.append(row)
        if self._save_due():
            self._save("incomplete")

    def _writes(self) -> bool:
        """Whether this process writes the file (rank 0 of a torch.distributed job)."""
        return not (dist.is_available() and dist.is_initialized() and dist.get_rank() != 0)

    def _save_due(self) -> bool:
        """The first row at once (a path that cannot be written fails now, not at close), then
        every `flush_every` rows or `flush_s` seconds, whichever first, but at most one save
        per 1 / SAVE_SHARE times the last save's duration."""
        if (self.flush_every is None and self.flush_s is None) or not self._writes():
            return False
        if self.saved_rows == 0:
            return True
        since = self.clock() - self._saved_at
        if since < self.last_save_s / SAVE_SHARE:
            return False
        by_rows = (
            self.flush_every is not None and len(self.rows) - self.saved_rows >= self.flush_every
        )
        return by_rows or (self.flush_s is not None and since >= self.flush_s)

    def _save(self, status: str) -> None:
        """Write the rows so far as the trace, with `status` (timed for the save policy)."""
        started = self.clock()
        self.write(status)
        self._saved_at = self.clock()
        self.last_save_s = self._saved_at - started
        self.save_s += self.last_save_s
        self.saved_rows = len(self.rows)
        self.saves += 1

    def _write(self, status: str) -> None:
        steps = [row["step"] for row in self.rows]
        every = steps == list(range(1, len(steps) + 1))
        meta = {
            **self.meta,
            "status": status,
            "rows": "every_step" if every else "evaluated_steps",
            "payload_bytes_per_step": self.rows[-1]["payload_bytes"],
        }
        write_trace(self.path, pd.DataFrame(self.rows), meta, durable=True)

    def close(self, *, complete: bool = True) -> Path | None:
        """Write the trace (rank 0 of a torch.distributed job; every process otherwise)."""
        self._closed = True
        if not self._writes():
            return None
        if not self.rows:
            raise TransitsimError("TraceRecorder.close: no step was recorded")
        self._save("complete" if complete else "incomplete")
        return self.path

    def __enter__(self) -> "TraceRecorder":
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, _tb: object) -> None:
        """Save on the way out. With an exception in flight, save what there is as
        "incomplete" and let the caller's exception propagate: a failed save is added to it
        as a note, never raised in its place."""
        if self._closed or not self.rows:
            self._closed = True
            return
        if error is None:
            self.close()
            return
        try:
            self.close(complete=False)
        except Exception as exc:  # noqa: BLE001 - the caller's exception is the one to see
            kept = (
                f"steps up to {self.saved_step} saved before"
                if self.saved_rows
                else "nothing saved"
            )
            error.add_note(f"TraceRecorder could not save {self.path} ({exc}); {kept}")
