"""What workers send each step, and the in-process exchange of the simulated backend.

A variant describes its exchange as `Message`s: per group of tensors, what every worker sends
(tensors with a leading local-worker axis) and how the receivers combine it ("gather": every
worker's tensors, stacked in worker order; "sum" or "mean": over all workers). The optimiser
code sees only the combined result, so it is the same on every backend: `LocalExchange` (all W
workers in this process, nothing crosses a wire) or the torch.distributed one in
trainer/distributed/, which runs the collectives. A new variant that builds Messages needs no
distributed code of its own.

`pack`/`unpack` give a message a compact wire form (top-k sends values and positions, not its
dense masked tensor); unpack(pack(x)) must rebuild x bit for bit. The local exchange skips them.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

COMBINES = ("gather", "sum", "mean")


@dataclass
class Message:
    """One group's tensors as every worker sends them, each shaped (local workers, ...)."""

    tensors: list[torch.Tensor]
    combine: str  # one of COMBINES
    pack: Callable[[list[torch.Tensor]], list[torch.Tensor]] | None = None
    unpack: Callable[[list[torch.Tensor]], list[torch.Tensor]] | None = None

    def __post_init__(self) -> None:
        if self.combine not in COMBINES:
            raise ValueError(f"combine must be one of {COMBINES}, got {self.combine!r}")


class Exchange(Protocol):
    """The exchange between all W workers; a process holds `local_workers` of them."""

    backend: str
    world: int  # processes
    rank: int
    workers: int  # W, all processes together
    local_workers: int
    offset: int  # global index of this process's first worker

    def exchange(self, messages: list[Message]) -> list[list[torch.Tensor]]:
        """Per message, its tensors combined over all W workers: "gather" -> (W, ...) in
        worker order; "sum"/"mean" -> the sum/mean over workers (no worker axis)."""
        ...

    def total(self, values: torch.Tensor) -> torch.Tensor:
        """A per-process quantity (a count, a partial sum) summed over all processes."""
        ...

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        """Small per-process figures (losses, timings), one list per process in rank order."""
        ...

    def take_comm(self) -> tuple[float, int]:
        """Seconds spent in the exchange and bytes this process sent since the last call."""
        ...

    def gather_object(self, obj: Any) -> list[Any] | None:
        """Every process's `obj` at process 0 (None elsewhere): checkpoint states."""
        ...

    def broadcast_object(self, obj: Any) -> Any:
        """Process 0's `obj` on every process: decisions and a resumed state."""
        ...


class LocalExchange:
    """The simulated backend: all W workers live in this process and share its memory."""

    backend = "simulated"
    world = 1
    rank = 0
    offset = 0

    def __init__(self, workers: int) -> None:
        self.workers = self.local_workers = workers

    def exchange(self, messages: list[Message]) -> list[list[torch.Tensor]]:
        return [[_combine_local(t, m.combine) for t in m.tensors] for m in messages]

    def total(self, values: torch.Tensor) -> torch.Tensor:
        return values

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        return [list(values)]

    def take_comm(self) -> tuple[float, int]:
        return 0.0, 0

    def gather_object(self, obj: Any) -> list[Any] | None:
        return [obj]

    def broadcast_object(self, obj: Any) -> Any:
        return obj


def _combine_local(tensor: torch.Tensor, combine: str) -> torch.Tensor:
    if combine == "gather":
        return tensor
    return tensor.sum(0) if combine == "sum" else tensor.mean(0)


def index_dtype(m: int) -> torch.dtype:
    """The smallest signed integer type that holds a position within a chunk of m."""
    return torch.int16 if m <= 2**15 else torch.int32


def sparse_wire(k: int, m: int) -> tuple[Callable, Callable]:
    """Top-k's wire form: (values, positions) of the k chosen per chunk, instead of the dense
    masked tensor and its mask; unpack scatters them back into zeros, bit for bit."""

    def pack(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        sent, chosen = tensors
        positions = chosen.reshape(-1, m).nonzero()[:, 1]
        if positions.numel() != chosen.numel() // m * k:
            raise ValueError(f"top-k mask does not choose exactly {k} per chunk")
        positions = positions.reshape(*sent.shape[:-1], k)
        return [sent.gather(-1, positions), positions.to(index_dtype(m))]

    def unpack(wire: list[torch.Tensor]) -> list[torch.Tensor]:
        values, positions = wire
        positions = positions.long()
        size = (*values.shape[:-1], m)
        sent = torch.zeros(size, dtype=values.dtype, device=values.device)
        sent.scatter_(-1, positions, values)
        chosen = torch.zeros(size, dtype=torch.bool, device=values.device)
        chosen.scatter_(-1, positions, True)
        return [sent, chosen]

    return pack, unpack


def sparse_wires(shapes: list[tuple[int, int]]) -> tuple[Callable, Callable]:
    """Several top-k tensors' wire forms in one message: tensors [sent_1, chosen_1, ...,
    sent_n, chosen_n] with (k_i, m_i) in `shapes` travel as [values_1 .. values_n, positions_1
    .. positions_n], every float before every integer, so each float stays aligned to its size
    in the byte buffer the torch.distributed exchange concatenates them into."""
    wires = [sparse_wire(k, m) for k, m in shapes]

    def pack(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        pairs = [pk(tensors[2 * i : 2 * i + 2]) for i, (pk, _) in enumerate(wires)]
        return [values for values, _ in pairs] + [positions for _, positions in pairs]

    def unpack(wire: list[torch.Tensor]) -> list[torch.Tensor]:
        n = len(wires)
        out: list[torch.Tensor] = []
        for i, (_, unpk) in enumerate(wires):
            out += unpk([wire[i], wire[n + i]])
        return out

    return pack, unpack
