"""How long one worker computes per optimiser step, and how much that varies between workers.

Replay needs a per-worker compute time for every step. It comes from the trace as measured, from
the trace scaled by a factor (a faster or slower GPU), or from a FLOP model of a target GPU. On top
of that, stragglers: fixed per-worker factors (one slow machine) and seeded random jitter per step
and worker, so that no two steps of a run need to take the same time.

The GPU-side work of a step has three parts the trace measures on the same machine: forward and
backward (`compute_s`), compression (`compress_s`) and the optimiser update (`update_s`). Every
compute model maps the measured `compute_s` of a row to a modelled one; the compression and the
update of that row are scaled by the same ratio, modelled / measured compute. So the measured
ratio of compression (and update) to forward+backward is kept whatever the model: a FLOP model of
a GPU never mixes GPU forward+backward with CPU-measured compression. (Where a row measured no
compute at all, the run's median ratio stands in for it.)
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from transitsim.base.errors import TransitsimError

COMPUTE_KINDS = ("trace", "scaled", "flops")
JITTER_DISTRIBUTIONS = ("none", "exponential", "lognormal")
JITTER_MODES = ("multiplicative", "additive")


@dataclass(frozen=True)
class ComputeModel:
    """Where a worker's forward+backward seconds per step come from.

    kind "trace": the trace's measured `compute_s`; "scaled": that times `factor`;
    "flops": 6 * params * tokens_per_worker_step / (peak_flops * mfu), tokens = batch * context
    from the trace metadata (the trainer runs one micro-batch per worker per step).
    Compression and update follow forward+backward by the same per-row ratio (`step_times`).
    """

    kind: str = "trace"
    factor: float = 1.0
    peak_flops: float = 0.0  # FLOP/s of the target accelerator (kind "flops")
    mfu: float = 0.4  # model FLOP utilisation reached on it (kind "flops")

    def __post_init__(self) -> None:
        if self.kind not in COMPUTE_KINDS:
            raise TransitsimError(
                f"compute kind {self.kind!r} is not one of {', '.join(COMPUTE_KINDS)}"
            )
        if not np.isfinite(self.factor) or self.factor <= 0:
            raise TransitsimError(f"compute factor must be positive, got {self.factor!r}")
        if self.kind == "flops":
            if not np.isfinite(self.peak_flops) or self.peak_flops <= 0:
                raise TransitsimError(
                    f"compute kind 'flops' needs a positive peak_flops, got {self.peak_flops!r}"
                )
            if not 0 < self.mfu <= 1:
                raise TransitsimError(f"compute mfu must lie in (0, 1], got {self.mfu!r}")

    def step_times(
        self,
        trace_compute_s: np.ndarray,
        trace_compress_s: np.ndarray,
        trace_update_s: np.ndarray,
        meta: dict[str, Any],
        params: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-row (compute_s, compress_s, update_s) of one worker's step, all on the target.

        compute_s is `step_compute_s`; compress_s and update_s are the measured ones times the
        row's ratio of modelled to measured compute (see the module docstring).
        """
        measured = np.asarray(trace_compute_s, dtype=np.float64)
        modelled = self.step_compute_s(measured, meta, params)
        size_ratio = params / meta["n_params"]
        if self.kind == "flops":
            ratio = compute_ratio(measured, modelled, fallback=size_ratio)
        else:  # modelled = measured * factor * size_ratio: the ratio, without rounding
            factor = self.factor if self.kind == "scaled" else 1.0
            ratio = np.full(measured.shape, factor * size_ratio, dtype=np.float64)
        compress = np.asarray(trace_compress_s, dtype=np.float64) * ratio
        update = np.asarray(trace_update_s, dtype=np.float64) * ratio
        return modelled, compress, update

    def step_compute_s(
        self, trace_compute_s: np.ndarray, meta: dict[str, Any], params: int
    ) -> np.ndarray:
        """Per-row compute seconds of one worker's step for a model of `params` parameters.

        For "trace" and "scaled" the measured times scale with params / n_params (what-if scale);
        "flops" computes them from `params` directly.
        """
        measured = np.asarray(trace_compute_s, dtype=np.float64)
        if self.kind == "flops":
            tokens = tokens_per_worker_step(meta)
            seconds = 6.0 * params * tokens / (self.peak_flops * self.mfu)
            return np.full(measured.shape, seconds, dtype=np.float64)
        ratio = params / meta["n_params"]
        factor = self.factor if self.kind == "scaled" else 1.0
        return measured * (factor * ratio)


def compute_ratio(
    measured_s: np.ndarray, modelled_s: np.ndarray, fallback: float = 1.0
) -> np.ndarray:
    """Per row, modelled / measured compute: the factor the row's other GPU work scales by.

    Rows that measured no compute (an imported log may say 0) take the median ratio of the rows
    that did; when no row did, `fallback` (replay passes the what-if size ratio).
    """
    measured = np.asarray(measured_s, dtype=np.float64)
    modelled = np.asarray(modelled_s, dtype=np.float64)
    timed = measured > 0
    ratio = np.full(measured.shape, fallback, dtype=np.float64)
    ratio[timed] = modelled[timed] / measured[timed]
    if timed.any() and not timed.all():
        ratio[~timed] = float(np.median(ratio[timed]))
    return ratio


def tokens_per_worker_step(meta: dict[str, Any]) -> int:
    """batch * context from the trace metadata (context falls back to the model's block size)."""
    batch = meta.get("batch")
    context = meta.get("context")
    if context is None and isinstance(meta.get("model"), dict):
        context = meta["model"].get("block")
    if not isinstance(batch, int) or not isinstance(context, int) or batch < 1 or context < 1:
        raise TransitsimError(
            f"trace {meta.get('name', '?')!r}: the 'flops' compute model needs integer metadata "
            f"'batch' and 'context' (got batch={batch!r}, context={context!r})"
        )
    return batch * context


@dataclass(frozen=True)
class Stragglers:
    """Per-worker slowness: fixed factors plus seeded random jitter drawn per step and worker.

    jitter X per (step, worker): "exponential" with mean `scale`, "lognormal" with median `scale`
    and shape `sigma`, or "none". mode "multiplicative": compute * (1 + X) (X is a fraction);
    "additive": compute + X (X in seconds). `worker_factors` multiply each worker's compute on
    every step (a persistently slow machine); they are not random.
    """

    distribution: str = "exponential"
    scale: float = 0.0
    mode: str = "multiplicative"
    sigma: float = 0.5
    worker_factors: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.distribution not in JITTER_DISTRIBUTIONS:
            raise TransitsimError(
                f"straggler distribution {self.distribution!r} is not one of "
                f"{', '.join(JITTER_DISTRIBUTIONS)}"
            )
        if self.mode not in JITTER_MODES:
            raise TransitsimError(
                f"straggler mode {self.mode!r} is not one of {', '.join(JITTER_MODES)}"
            )
        if not np.isfinite(self.scale) or self.scale < 0:
            raise TransitsimError(f"straggler scale must be >= 0, got {self.scale!r}")
        if not np.isfinite(self.sigma) or self.sigma < 0:
            raise TransitsimError(f"straggler sigma must be >= 0, got {self.sigma!r}")
        factors = np.asarray(self.worker_factors, dtype=np.float64)
        if factors.size and (not np.isfinite(factors).all() or (factors <= 0).any()):
            raise TransitsimError("straggler worker_factors must all be positive")

    @property
    def random(self) -> bool:
        """Whether steps differ from each other (then no two steps can share one simulation)."""
        return self.distribution != "none" and self.scale > 0

    def factors(self, workers: int) -> np.ndarray:
        """The fixed per-worker compute multipliers (ones when none were given)."""
        if not self.worker_factors:
            return np.ones(workers, dtype=np.float64)
        if len(self.worker_factors) != workers:
            raise TransitsimError(
                f"straggler worker_factors has {len(self.worker_factors)} entries for a network "
                f"of {workers} workers"
            )
        return np.asarray(self.worker_factors, dtype=np.float64)

    def draw(self, rng: np.random.Generator, steps: int, workers: int) -> np.ndarray:
        """Jitter X for `steps` steps of `workers` workers, shape (steps, workers)."""
        if not self.random:
            return np.zeros((steps, workers), dtype=np.float64)
        if self.distribution == "exponential":
            return rng.exponential(self.scale, size=(steps, workers))
        return self.scale * rng.lognormal(0.0, self.sigma, size=(steps, workers))

    def apply(self, base_s: float, jitter: np.ndarray, workers: int) -> np.ndarray:
        """Per-worker compute seconds of steps whose unperturbed compute is `base_s`."""
        fixed = base_s * self.factors(workers)
        if self.mode == "multiplicative":
            return fixed * (1.0 + jitter)
        return fixed + jitter
