"""A grid of (trace, network point) replay jobs, run one after another or in parallel on Dask.

Every job is independent and deterministic, so where and in which order jobs run cannot change
a number: results come back in job order, whatever order they finished in. A job that fails
becomes a result with a one-line reason (which trace, which network, why); the others carry on.

Dask costs seconds to start (worker processes import pandas and the simulator), so by default
it is used only when it can pay: jobs run in this process while the ones left would take less
than CLUSTER_AFTER_S seconds at the pace measured so far, and only what is left then goes to a
local cluster of at most MAX_LOCAL_WORKERS single-threaded processes, in batches (a few per
process, so that each task's round trip is paid once per batch, not per job). `serial=True`
never starts Dask; `scheduler="tcp://host:8786"` sends every job to an existing cluster (its
workers need transitsim installed; traces are sent to them once, not read there).
"""

import contextlib
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from transitsim.base.errors import TransitsimError, error_line
from transitsim.replay.replay import replay
from transitsim.replay.request import ReplayRequest
from transitsim.traces.format import Trace

MAX_LOCAL_WORKERS = 2  # this project's machines have two cores
# Serial seconds still to go above which a local cluster pays for itself: it takes ~5 s to start
# on two cores and then halves what is left (benchmarks/bench_engine.py --only sweep measures it)
CLUSTER_AFTER_S = 20.0
PACE_SAMPLE_S = 2.0  # jobs timed here before their pace decides (or cluster_after_s, if less)
BATCHES_PER_WORKER = 4  # enough to balance uneven jobs, few enough to amortise each round trip


@dataclass(frozen=True)
class ReplayJob:
    """One trace (by name) and the replay asked of it, at one point of a grid."""

    index: int
    trace_name: str
    request: ReplayRequest
    params: dict[str, Any] = field(default_factory=dict)  # grid parameters of the point (SI)

    @property
    def network_name(self) -> str:
        return self.request.network.name


@dataclass
class JobResult:
    """What one job gave: its replay, or the one-line reason it failed."""

    job: ReplayJob
    timeline: pd.DataFrame | None = None
    link_stats: pd.DataFrame | None = None
    step_events: pd.DataFrame | None = None  # one step's intervals (replay.step_events)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def describe_failure(self) -> str:
        return f"{self.job.trace_name} on {self.job.network_name}: {self.error}"


def run_job(trace: Trace, job: ReplayJob) -> JobResult:
    """Replay one trace on one network point; never raises (a failure is the result's error)."""
    try:
        result = replay(trace, job.request)
    except Exception as exc:  # a job's failure must not lose the others
        return JobResult(job=job, error=error_line(exc))
    return JobResult(
        job=job,
        timeline=result.timeline,
        link_stats=result.link_stats,
        step_events=result.step_events,
    )


# ---------------------------------------------------------------------------------------------
# Running many jobs


def show_progress(quiet: bool) -> bool:
    """A bar only for a person watching: not under --quiet, in CI, or when stderr is a file."""
    return not quiet and sys.stderr.isatty() and not os.environ.get("CI")


class _RateColumn(ProgressColumn):
    """Jobs per second, once there is a measurement."""

    def render(self, task: Any) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.2f} jobs/s" if speed else "", style="progress.data.speed")


@contextlib.contextmanager
def _progress(total: int, quiet: bool) -> Iterator[Any]:
    """A callable that advances the bar by one job (a no-op when no bar is shown)."""
    if not show_progress(quiet) or total == 0:
        yield lambda: None
        return
    bar = Progress(
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with bar:
        task = bar.add_task("replaying", total=total)
        yield lambda: bar.advance(task)


def run_jobs(
    traces: dict[str, Trace],
    jobs: list[ReplayJob],
    *,
    serial: bool = False,
    scheduler: str | None = None,
    max_workers: int = MAX_LOCAL_WORKERS,
    cluster_after_s: float = CLUSTER_AFTER_S,
    quiet: bool = False,
) -> list[JobResult]:
    """Run every job (traces by name) and return the results in job order.

    serial: in this process, one after another. scheduler: the address of a running Dask
    scheduler, which runs every job. Otherwise jobs run here until the rest would take more than
    `cluster_after_s` serial seconds, and the rest on a local Dask cluster of up to
    `max_workers` processes (0: the cluster from the first job; one job or one core: never).
    """
    if serial and scheduler:
        raise TransitsimError("--serial and --scheduler exclude each other: choose one")
    missing = sorted({job.trace_name for job in jobs} - set(traces))
    if missing:
        raise TransitsimError(f"jobs name trace(s) that were not given: {', '.join(missing)}")
    local_workers = max(1, min(max_workers, len(jobs), os.cpu_count() or 1))
    with _progress(len(jobs), quiet) as advance:
        if scheduler is not None:
            return _run_on_dask(traces, jobs, scheduler, max_workers, advance)
        if serial or local_workers == 1:
            return [_advancing(run_job(traces[job.trace_name], job), advance) for job in jobs]
        results = _serial_while_cheap(traces, jobs, cluster_after_s, advance)
        rest = jobs[len(results) :]
        if rest:
            results += _run_on_dask(traces, rest, None, max_workers, advance)
        return results


def _advancing(result: JobResult, advance: Any) -> JobResult:
    advance()
    return result


def _serial_while_cheap(
    traces: dict[str, Trace], jobs: list[ReplayJob], cluster_after_s: float, advance: Any
) -> list[JobResult]:
    """Jobs run here, in order, until the ones left would take over `cluster_after_s` seconds
    at the mean pace so far: a short grid never waits for a cluster to start."""
    results: list[JobResult] = []
    if cluster_after_s <= 0:
        return results
    started = time.perf_counter()
    for job in jobs:
        results.append(_advancing(run_job(traces[job.trace_name], job), advance))
        left = len(jobs) - len(results)
        elapsed_s = time.perf_counter() - started
        if elapsed_s < min(PACE_SAMPLE_S, cluster_after_s):
            continue  # the first jobs pay for imports and caches: not yet a pace
        if left and elapsed_s / len(results) * left > cluster_after_s:
            break
    return results


def run_batch(traces: dict[str, Trace], jobs: list[ReplayJob]) -> list[JobResult]:
    """Several jobs in one Dask task (traces by name, only those the jobs use)."""
    return [run_job(traces[job.trace_name], job) for job in jobs]


@contextlib.contextmanager
def _quiet_dask() -> Iterator[None]:
    """Dask's loggers say nothing below ERROR while we use it (start-up chatter, shutdown)."""
    loggers = [logging.getLogger(name) for name in ("distributed", "dask", "tornado", "asyncio")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _check_reachable(address: str) -> None:
    """A quick TCP connect first: a Client that fails to connect takes 20 s more to give up
    (in its destructor) and prints a traceback while it does."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        protocol, location = parse_address(address)
        if protocol != "tcp":
            return  # tls://, ucx://, ...: leave it to the client
        host, port = parse_host_port(location)
        socket.create_connection((host, port), timeout=5).close()
    except (OSError, ValueError, TypeError) as exc:
        raise TransitsimError(
            f"cannot reach the Dask scheduler at {address!r}: {error_line(exc)}"
        ) from None


def _run_on_dask(
    traces: dict[str, Trace],
    jobs: list[ReplayJob],
    scheduler: str | None,
    max_workers: int,
    advance: Any,
) -> list[JobResult]:
    from dask.distributed import Client, LocalCluster, as_completed  # seconds to import: lazily

    with _quiet_dask(), contextlib.ExitStack() as stack:
        if scheduler is None:
            workers = max(1, min(max_workers, len(jobs), os.cpu_count() or 1))
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    # CRITICAL: a worker's heartbeat that outlives the scheduler at shutdown
                    # logs a traceback at ERROR; a job's own failure comes back as its result
                    silence_logs=logging.CRITICAL,
                )
            )
            client = stack.enter_context(Client(cluster, set_as_default=False))
        else:
            _check_reachable(scheduler)
            try:
                client = stack.enter_context(Client(scheduler, timeout="10s", set_as_default=False))
            except (OSError, TimeoutError, ValueError) as exc:
                raise TransitsimError(
                    f"cannot reach the Dask scheduler at {scheduler}: {error_line(exc)}"
                ) from None
        used = sorted({job.trace_name for job in jobs})
        shared = client.scatter({name: traces[name] for name in used}, hash=False)
        workers_now = max(1, len(client.scheduler_info().get("workers", {})))
        size = max(1, -(-len(jobs) // (workers_now * BATCHES_PER_WORKER)))
        batches = [jobs[i : i + size] for i in range(0, len(jobs), size)]
        futures = [
            client.submit(
                run_batch,
                {name: shared[name] for name in sorted({job.trace_name for job in batch})},
                batch,
                pure=False,
            )
            for batch in batches
        ]
        done_batches = {
            future.key: len(batch) for future, batch in zip(futures, batches, strict=True)
        }
        for future in as_completed(futures, loop=client.loop):
            for _ in range(done_batches[future.key]):
                advance()
        results = []
        for batch, future in zip(batches, futures, strict=True):
            try:
                results.extend(future.result())
            except Exception as exc:  # the worker itself died (killed, out of memory)
                reason = f"Dask worker failed: {error_line(exc)}"
                results.extend(JobResult(job=job, error=reason) for job in batch)
        return results
