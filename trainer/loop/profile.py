"""When each gradient becomes ready during backward: the profile replay overlaps exchanges with.

A real data-parallel step starts exchanging a gradient bucket as soon as the backward pass has
accumulated every gradient in it (PyTorch DDP hooks AccumulateGrad). To replay that, the trainer
measures once per run, on one step's micro-steps, the moment each parameter tensor's gradient is
accumulated (`register_post_accumulate_grad_hook`, the hook DDP's reducer relies on) as a
fraction of that micro-step's backward, and the backward's share of forward+backward. The
hooks only read a clock: the numbers the run computes are unchanged.

Recorded in the trace metadata under "backward_profile" (see
transitsim/traces/backward_profile.py, which reads it): tensors in registration order with their
element counts and ready fractions.
"""

import time
from collections.abc import Callable
from typing import Any

import torch

PROFILE_VERSION = 1


class BackwardProfiler:
    """Times forward and backward of micro-steps and when each tensor's gradient is accumulated.

    Usage: `with profiler.micro_step() as mark: loss = model(x, y); mark(); loss.backward()`,
    over the micro-steps of one window, then `profile()`.
    """

    def __init__(self, params: list[tuple[str, torch.nn.Parameter]]) -> None:
        self.params = params
        self.ready_s: list[dict[str, float]] = []
        self.forward_s: list[float] = []
        self.backward_s: list[float] = []

    def micro_step(self) -> "_MicroStep":
        return _MicroStep(self)

    def profile(self) -> dict[str, Any]:
        """The mean over the measured micro-steps, as the trace metadata stores it."""
        if not self.backward_s:
            raise ValueError("no micro-step was measured")
        n = len(self.backward_s)
        forward_s = sum(self.forward_s) / n
        backward_s = sum(self.backward_s) / n
        tensors = []
        for name, param in self.params:
            shares = [
                min(max(ready[name] / bwd, 0.0), 1.0) if bwd > 0 else 1.0
                for ready, bwd in zip(self.ready_s, self.backward_s, strict=True)
                if name in ready
            ]
            tensors.append(
                {
                    "name": name,
                    "numel": int(param.numel()),
                    # a tensor without a gradient is never waited for: ready with the last
                    "ready": sum(shares) / len(shares) if shares else 1.0,
                }
            )
        total = forward_s + backward_s
        return {
            "version": PROFILE_VERSION,
            "window": f"{n} micro-step(s) of one step, post-accumulate-grad hooks",
            "forward_s": forward_s,
            "backward_s": backward_s,
            "backward_share": backward_s / total if total > 0 else 2.0 / 3.0,
            "tensors": tensors,
        }


class _MicroStep:
    """One measured micro-step: hooks on for its backward, removed on exit."""

    def __init__(self, profiler: BackwardProfiler) -> None:
        self.profiler = profiler
        self.handles: list[Any] = []
        self.ready: dict[str, float] = {}
        self.started = self.backward_from = 0.0

    def __enter__(self) -> Callable[[], None]:
        for name, param in self.profiler.params:
            self.handles.append(param.register_post_accumulate_grad_hook(self._hook(name)))
        self.started = time.perf_counter()
        return self._mark

    def _mark(self) -> None:
        """Called between forward and backward."""
        self.backward_from = time.perf_counter()

    def _hook(self, name: str) -> Callable[[torch.Tensor], None]:
        def hook(_: torch.Tensor) -> None:
            self.ready[name] = time.perf_counter() - self.backward_from

        return hook

    def __exit__(self, *exc: object) -> None:
        ended = time.perf_counter()
        for handle in self.handles:
            handle.remove()
        if exc[0] is None and self.backward_from > 0:
            self.profiler.forward_s.append(self.backward_from - self.started)
            self.profiler.backward_s.append(ended - self.backward_from)
            self.profiler.ready_s.append(self.ready)


class _Unmeasured:
    """The micro-step context when nothing is measured: the same code path, no hooks."""

    def __enter__(self) -> Callable[[], None]:
        return _nothing

    def __exit__(self, *exc: object) -> None:
        return None


def _nothing() -> None:
    return None


def measured(profiler: BackwardProfiler | None) -> "_MicroStep | _Unmeasured":
    """A micro-step context: measured by `profiler`, or a no-op when it is None."""
    return profiler.micro_step() if profiler is not None else _Unmeasured()


def profile_due(done: int, steps: int, has_profile: bool) -> bool:
    """Measure once per run, on its second step (the first warms allocators) or its only one."""
    return not has_profile and (done >= 1 or steps == 1)
