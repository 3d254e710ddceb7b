"""The exchange over a torch.distributed process group: Messages become collectives.

Every "gather" message of a step travels in one all_gather of one byte buffer (each tensor in
its wire form: packed, floats in the wire dtype, viewed as bytes), and every "sum"/"mean"
message in one all_reduce of one float buffer. What the receivers rebuild is what the
simulated backend holds in memory, so the same optimiser code runs on both. A float wire dtype
narrower than float32 rounds the values sent (the spec's arithmetic never does).
"""

import time
from typing import Any

import torch
import torch.distributed as dist

from trainer.distributed.env import collective as guarded
from trainer.variants.exchange import Message
from transitsim.base.errors import TransitsimError

WIRE_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class ProcessGroupExchange:
    """The W workers spread evenly over the ranks of the default process group."""

    def __init__(
        self, workers: int, device: torch.device, wire_dtype: str = "float32", backend: str = ""
    ) -> None:
        self.backend = backend or dist.get_backend()
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        if workers % self.world:
            raise TransitsimError(
                f"{workers} workers do not split evenly over {self.world} processes; "
                f"use --set workers=N with N a multiple of {self.world}"
            )
        self.workers = workers
        self.local_workers = workers // self.world
        self.offset = self.rank * self.local_workers
        self.device = device
        self.wire_dtype = WIRE_DTYPES[wire_dtype]
        self._comm_s = 0.0
        self._sent = 0

    # --- the step's messages ---------------------------------------------------------------

    def exchange(self, messages: list[Message]) -> list[list[torch.Tensor]]:
        out: list[list[torch.Tensor] | None] = [None] * len(messages)
        gathers = [(i, m) for i, m in enumerate(messages) if m.combine == "gather"]
        reduces = [(i, m) for i, m in enumerate(messages) if m.combine != "gather"]
        if gathers:
            for (i, _), result in zip(gathers, self._gather([m for _, m in gathers]), strict=True):
                out[i] = result
        if reduces:
            for (i, _), result in zip(reduces, self._reduce([m for _, m in reduces]), strict=True):
                out[i] = result
        return out  # type: ignore[return-value]

    def _gather(self, messages: list[Message]) -> list[list[torch.Tensor]]:
        """One all_gather for all messages; per message its tensors stacked over W workers."""
        wires = [m.pack(m.tensors) if m.pack else list(m.tensors) for m in messages]
        layout = [[(t.shape, t.dtype) for t in wire] for wire in wires]
        pieces = [self._to_wire(t).reshape(-1).view(torch.uint8) for w in wires for t in w]
        buffer = torch.cat(pieces) if len(pieces) > 1 else pieces[0].clone()
        received = [torch.empty_like(buffer) for _ in range(self.world)]
        self._all_gather(received, buffer)

        per_rank = [self._split(buf, layout) for buf in received]
        results = []
        for mi, message in enumerate(messages):
            from_ranks = [
                message.unpack(ranks[mi]) if message.unpack else ranks[mi] for ranks in per_rank
            ]
            results.append([torch.cat(parts) for parts in zip(*from_ranks, strict=True)])
        return results

    def _split(self, buf: torch.Tensor, layout: list[list[tuple]]) -> list[list[torch.Tensor]]:
        """A received byte buffer back into each message's wire tensors, in their dtypes."""
        out, at = [], 0
        for shapes in layout:
            tensors = []
            for shape, dtype in shapes:
                wire = self._wire_dtype_of(dtype)
                size = torch.Size(shape).numel() * wire.itemsize
                tensor = buf[at : at + size].view(wire).reshape(shape)
                tensors.append(tensor.to(dtype) if wire != dtype else tensor)
                at += size
            out.append(tensors)
        return out

    def _reduce(self, messages: list[Message]) -> list[list[torch.Tensor]]:
        """One all_reduce (sum) for all messages; "mean" divides by W afterwards."""
        partial = [t.sum(0) for m in messages for t in m.tensors]
        buffer = torch.cat([self._to_wire(t).reshape(-1) for t in partial])
        self._all_reduce(buffer)
        results, at = [], 0
        for message in messages:
            combined = []
            for tensor in message.tensors:
                shape, n = tensor.shape[1:], tensor[0].numel()
                value = buffer[at : at + n].reshape(shape).to(tensor.dtype)
                combined.append(value / self.workers if message.combine == "mean" else value)
                at += n
            results.append(combined)
        return results

    def _all_gather(self, received: list[torch.Tensor], buffer: torch.Tensor) -> None:
        self._timed(lambda: dist.all_gather(received, buffer), buffer)

    def _all_reduce(self, buffer: torch.Tensor) -> None:
        self._timed(lambda: dist.all_reduce(buffer, op=dist.ReduceOp.SUM), buffer)

    def _wire_dtype_of(self, dtype: torch.dtype) -> torch.dtype:
        return self.wire_dtype if dtype.is_floating_point else dtype

    def _to_wire(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.contiguous().to(self._wire_dtype_of(tensor.dtype))

    def _timed(self, collective: Any, buffer: torch.Tensor) -> None:
        self._sync()
        started = time.perf_counter()
        guarded(collective, self.rank)
        self._sync()
        self._comm_s += time.perf_counter() - started
        self._sent += buffer.numel() * buffer.element_size()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def take_comm(self) -> tuple[float, int]:
        taken = (self._comm_s, self._sent)
        self._comm_s, self._sent = 0.0, 0
        return taken

    # --- small figures and checkpoints ---------------------------------------------------------

    def total(self, values: torch.Tensor) -> torch.Tensor:
        summed = values.clone()
        guarded(lambda: dist.all_reduce(summed, op=dist.ReduceOp.SUM), self.rank)
        return summed

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        local = torch.tensor(values, dtype=torch.float64, device=self.device)
        received = [torch.empty_like(local) for _ in range(self.world)]
        guarded(lambda: dist.all_gather(received, local), self.rank)
        return [r.tolist() for r in received]

    def gather_object(self, obj: Any) -> list[Any] | None:
        """Every rank's `obj` on rank 0 (None elsewhere)."""
        objects = [None] * self.world if self.rank == 0 else None
        guarded(lambda: dist.gather_object(obj, objects, dst=0), self.rank)
        return objects

    def broadcast_object(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank."""
        box = [obj if self.rank == 0 else None]
        guarded(lambda: dist.broadcast_object_list(box, src=0), self.rank)
        return box[0]


class SoloExchange(ProcessGroupExchange):
    """One worker alone, without a process group, that still counts what it would send: each
    step's messages are packed into the very buffers ProcessGroupExchange sends, and their
    bytes counted as it counts them; only the collectives are those of a group of one (the
    buffer itself comes back), so nothing crosses a wire and no time is spent on one."""

    def __init__(self, device: torch.device, wire_dtype: str = "float32") -> None:
        self.backend = "none"
        self.world, self.rank = 1, 0
        self.workers = self.local_workers = 1
        self.offset = 0
        self.device = device
        self.wire_dtype = WIRE_DTYPES[wire_dtype]
        self._comm_s = 0.0
        self._sent = 0

    def _all_gather(self, received: list[torch.Tensor], buffer: torch.Tensor) -> None:
        received[0].copy_(buffer)
        self._sent += buffer.numel() * buffer.element_size()

    def _all_reduce(self, buffer: torch.Tensor) -> None:
        self._sent += buffer.numel() * buffer.element_size()  # the sum over one is the buffer

    def total(self, values: torch.Tensor) -> torch.Tensor:
        return values.clone()

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        return [list(values)]

    def gather_object(self, obj: Any) -> list[Any] | None:
        return [obj]

    def broadcast_object(self, obj: Any) -> Any:
        return obj
