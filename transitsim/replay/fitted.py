"""Stragglers fitted from a profiled job's ranks (issue 42, item 5): `--stragglers-from TRACE` on
replay, `stragglers: {from: TRACE}` in a scenario.

`traces import --profile` with several ranks' files fits, under the trace's
`profile.stragglers`, how the ranks' steps differ (traces/profile_import.py): per rank, when it
reached the exchange after its step started (its arrival), not how long its step span was (a
rank that starts late waits least and has the shortest span). The fitted figures are the
replay's Stragglers: fixed per-rank factors (each rank's median arrival over the slowest's: the
trace's compute is the slowest rank's, so the slowest rank keeps it and the others compute
less) and exponential multiplicative jitter (its mean `scale`) for what the factors leave.
Since each step's measured compute is its slowest rank's, jitter included, the factors are
divided by the slowest rank's expected factor x (1 + jitter): the profiled job, replayed with
them, steps as it was measured on average, and a larger job's slowest worker is slower.

The factors are one per profiled rank; they apply as they are where the network has that many
workers. Elsewhere (a 128-rank job of which 2 ranks were profiled, or a what-if on another worker
count) only the jitter applies, and replay says so.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.replay.compute import Stragglers
from transitsim.traces.format import find_traces, read_meta

SAMPLES = 20_000  # Monte Carlo draws of the slowest profiled rank


@dataclass(frozen=True)
class FittedStragglers:
    """A trace's fitted stragglers, before the network's worker count is known."""

    source: str  # the trace's name, for notes
    distribution: str
    scale: float
    mode: str
    worker_factors: tuple[float, ...]
    fitted_from: str

    def expected_slowest(self) -> float:
        """E[max over the profiled ranks of factor x (1 + X)]: how much longer than the trace's
        compute the slowest of them would take, on average, with the fitted jitter on top
        (seeded Monte Carlo, so the same trace always gives the same figure)."""
        factors = np.asarray(self.worker_factors or (1.0,), dtype=np.float64)
        jitter = Stragglers(self.distribution, self.scale, self.mode)
        draws = jitter.draw(np.random.default_rng(0), SAMPLES, len(factors))
        return float(np.mean(np.max(factors * (1.0 + draws), axis=1)))

    def for_workers(self, workers: int) -> tuple[Stragglers, str | None]:
        """The replay's Stragglers on `workers` workers, and a note where the factors do not
        apply (their count is not the network's).

        The trace's compute is each step's slowest rank's, the jitter already in it; so every
        factor is divided by `expected_slowest`, and the profiled job replayed with its fitted
        stragglers steps, on average, as it was measured (a larger job's slowest worker, the
        maximum of more draws, is slower)."""
        fits = len(self.worker_factors) == workers
        factors = self.worker_factors if fits else (1.0,) * workers
        note = None
        if self.worker_factors and not fits:
            note = (
                f"stragglers from {self.source}: {len(self.worker_factors)} ranks' factors do "
                f"not fit {workers} workers: only the fitted jitter (scale {self.scale:g}) applies"
            )
        base = self.expected_slowest()
        stragglers = Stragglers(
            distribution=self.distribution,
            scale=self.scale,
            mode=self.mode,
            worker_factors=tuple(f / base for f in factors),
        )
        return stragglers, note


def fitted_from_meta(meta: dict[str, Any], where: str) -> FittedStragglers:
    """The fitted stragglers of a trace's metadata (one line naming `where` when it has none)."""
    fitted = (meta.get("profile") or {}).get("stragglers")
    if not isinstance(fitted, dict):
        raise TransitsimError(
            f"{where}: no fitted stragglers (import several ranks' profiles with `traces import "
            "--profile RANK0 --profile RANK1 ...`)"
        )
    try:
        return FittedStragglers(
            source=str(meta.get("name", where)),
            distribution=str(fitted["distribution"]),
            scale=float(fitted["scale"]),
            mode=str(fitted["mode"]),
            worker_factors=tuple(float(f) for f in fitted.get("worker_factors", [])),
            fitted_from=str(fitted.get("fitted_from", "")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TransitsimError(f"{where}: malformed profile.stragglers ({exc})") from None


def read_fitted(path: Path | str) -> FittedStragglers:
    """The fitted stragglers of the one trace at `path` (a trace file, or a folder holding one)."""
    found = find_traces([path])
    if len(found) != 1:
        raise TransitsimError(
            f"--stragglers-from {path}: {len(found)} traces there; give the one whose ranks were "
            "profiled"
        )
    return fitted_from_meta(read_meta(found[0]), str(found[0]))
