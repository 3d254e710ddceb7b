"""One interface for every variant's step (issue 41): what it compresses and sends, and how it
applies what it receives. Dense (A, trainer/variants/dense.py), DeMo (B..G, demo.py) and local
SGD (H, H-s, L, local_sgd.py) implement it, so the loop (trainer/loop/run.py) holds one object
and has no branch per variant; `exchange_step` is the one place that sends and receives, through
the wire `Exchange` (trainer/variants/exchange.py) of the backend.

A step returns its record (timings, bytes, diagnostics) as a value: nothing is left on the
object for the caller to pick up afterwards.
"""

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch

from trainer.variants.exchange import Exchange, Message

NamedParams = list[tuple[str, torch.nn.Parameter]]


@dataclass
class Outbox:
    """What a step's compression hands on: the messages every local worker sends (none on a
    local-SGD step without a sync) and what `apply` needs of the compression (`held`, the
    variant's own type, opaque to the loop)."""

    messages: list[Message]
    held: Any = None


@dataclass(frozen=True)
class Received:
    """Per message, its tensors combined over all W workers, and what receiving them cost."""

    tensors: list[list[torch.Tensor]]
    comm_s: float = 0.0
    sent_bytes: int = 0
    wall_s: float = 0.0  # the whole exchange (comm_s and the local combine), for the timings


@dataclass(frozen=True)
class StepRecord:
    """What one step measured. compress_s is one worker's share (the replay charges it per
    worker, like compute_s); update_s is the shared weights' update."""

    compress_s: float = 0.0
    comm_s: float = 0.0
    exchange_bytes: int = 0
    update_s: float = 0.0
    diag_s: float = 0.0
    broadcast: bool = False  # G recal / subspace: the chooser broadcast a new band
    diagnostics: list[dict] | None = None  # energy shares of a diagnostics step (spec §11)
    optics: dict[str, float] | None = None  # E, E': worker 0's out-of-band shares
    clip: tuple[int, int] | None = None  # E, E': cumulative (clipped, quantised) once active


class GradientExchange(ABC):
    """A variant's step over this process's workers: `compress` their gradients into Messages,
    `apply` the combined ones to the shared weights. `exchange` is the wire between processes;
    `state_key` names the variant's state in a checkpoint."""

    exchange: Exchange
    state_key: str

    @abstractmethod
    def compress(self, grads: dict[str, torch.Tensor], lr: float, step0: int) -> Outbox:
        """This process's workers' gradients grads[name] (L, *shape) into what they send."""

    @abstractmethod
    def apply(self, outbox: Outbox, received: Received, lr: float, step0: int) -> StepRecord:
        """Feed back and update the weights from what every worker sent; the step's record."""

    def step(self, grads: dict[str, torch.Tensor], lr: float, step0: int) -> StepRecord:
        """One whole step over this object's own exchange."""
        return exchange_step(self, self.exchange, grads, lr, step0)

    def load_replica(self, i: int, params: NamedParams) -> None:
        """Local worker i's weights into the model before its forward (local SGD: its replica;
        the others share the model's weights)."""
        return None

    def load_shared(self, params: NamedParams) -> None:
        """The shared weights into the model after a step or a resume (local SGD's theta)."""
        return None

    @abstractmethod
    def state_dict(self) -> dict:
        """This process's state, for a bit-exact resume."""

    @abstractmethod
    def load_state_dict(self, state: dict) -> None:
        """Restore a state of all W workers (or of exactly this process's)."""

    @staticmethod
    def merge_states(states: list[dict]) -> dict:
        """All processes' states as one process's holding every worker: by default they are
        the same everywhere (process 0's)."""
        return states[0]


def exchange_step(
    variant: GradientExchange,
    wire: Exchange,
    grads: dict[str, torch.Tensor],
    lr: float,
    step0: int,
) -> StepRecord:
    """Compress, send and receive through `wire` (only when there is something to send), apply."""
    with torch.no_grad():
        outbox = variant.compress(grads, lr, step0)
        received = Received([])
        if outbox.messages:
            started = time.perf_counter()
            tensors = wire.exchange(outbox.messages)
            comm_s, sent = wire.take_comm()
            received = Received(tensors, comm_s, sent, time.perf_counter() - started)
        return variant.apply(outbox, received, lr, step0)
