"""`transitsim collective`: time one collective on a simple network, beside its closed form.

The network is either built from --workers/--bandwidth/--latency/--efficiency (one switch, or
switches per datacentre joined by a WAN), or a preset or YAML file given with --network, e.g.
`--network 8xh100-nvlink`. Algorithm and bus bandwidth are printed as nccl-tests reports them.
"""

import json

import numpy as np
import typer

from transitsim.base.errors import TransitsimError
from transitsim.base.units import parse_bytes, parse_length_m, parse_rate_bps, parse_time_s
from transitsim.commands import QUIET_HELP
from transitsim.network import (
    COLLECTIVE_ALGOS,
    Exchange,
    LinkSpec,
    NetworkSpec,
    SwitchSpec,
    closed_form_time_s,
    simulate_exchange,
)
from transitsim.network.bandwidth import algorithm_bandwidth_bps, bus_bandwidth_bps
from transitsim.network.limits import MAX_DATACENTRES, MAX_WORKERS

CLI_ALGOS = {name.replace("_", "-"): name for name in COLLECTIVE_ALGOS}


def build_network(
    workers: int,
    bandwidth: str,
    latency: str,
    datacentres: int,
    wan: str | None,
    distance: str | None,
    slot_bytes: str | None,
    efficiency: float = 1.0,
) -> NetworkSpec:
    """One switch (or one per datacentre, joined by a WAN link each way), summing allowed.

    Bounded as a scenario's network is (a ring of 10^8 hosts would never return), and sites
    of equal size, as scenarios require."""
    if not 1 <= workers <= MAX_WORKERS:
        raise TransitsimError(f"--workers must lie in 1..{MAX_WORKERS:,}, got {workers:,}")
    if not 1 <= datacentres <= MAX_DATACENTRES:
        raise TransitsimError(
            f"--datacentres must lie in 1..{MAX_DATACENTRES}, got {datacentres:,}"
        )
    if workers % datacentres:
        raise TransitsimError(
            f"--workers ({workers}) must be a multiple of --datacentres ({datacentres})"
        )
    host_link = LinkSpec(
        parse_rate_bps(bandwidth), latency_s=parse_time_s(latency), efficiency=efficiency
    )
    switch = SwitchSpec(aggregator=True, agg_slot_bytes=parse_bytes(slot_bytes or 0))
    if datacentres <= 1:
        if wan is not None or distance is not None:
            raise TransitsimError("--wan and --distance need --datacentres 2 or more")
        return NetworkSpec("cli", "switch", workers, host_link, switch=switch)
    if wan is None:
        raise TransitsimError("--datacentres needs --wan (the WAN link rate, e.g. '100 Gb/s')")
    wan_link = LinkSpec(parse_rate_bps(wan), length_m=parse_length_m(distance or "0 km"))
    return NetworkSpec(
        "cli",
        "datacentres",
        workers,
        host_link,
        switch=switch,
        datacentres=datacentres,
        wan_link=wan_link,
    )


def named_network(network: str, workers: int | None, settings: list[str]) -> NetworkSpec:
    """A preset or YAML network (as `transitsim replay --network` takes it), --set applied."""
    from transitsim.commands.replay_cmd import network_description
    from transitsim.scenario import network_from_dict

    spec = network_from_dict(network_description(network, settings))
    if workers is not None and workers != spec.workers:
        raise TransitsimError(
            f"--workers {workers} disagrees with network {spec.name!r} of {spec.workers} workers"
            " (leave --workers out, or --set workers=N)"
        )
    return spec


def _spread(values: np.ndarray) -> str:
    low, high = float(values.min()), float(values.max())
    return f"{low:,.0f}" if low == high else f"{low:,.0f} .. {high:,.0f}"


def register(app: typer.Typer) -> None:
    """Add `collective` to the main app."""

    @app.command("collective")
    def collective(
        algo: str = typer.Option(..., "--algo", help=f"one of {', '.join(CLI_ALGOS)}"),
        workers: int | None = typer.Option(None, "--workers", help="number of hosts"),
        size: str = typer.Option(..., "--bytes", help="payload per worker, e.g. '32 MB'"),
        bandwidth: str | None = typer.Option(
            None, "--bandwidth", help="host link rate, e.g. '200 Gb/s'"
        ),
        efficiency: float = typer.Option(
            1.0, "--efficiency", help="protocol share of the host link rate, in (0, 1]"
        ),
        network_name: str | None = typer.Option(
            None, "--network", "-n", help="a preset (e.g. 8xh100-nvlink) or YAML file instead"
        ),
        settings: list[str] = typer.Option(
            [], "--set", help="with --network: change one key, e.g. --set workers=16"
        ),
        latency: str = typer.Option("0 s", "--latency", help="host link latency, e.g. '5 us'"),
        datacentres: int = typer.Option(1, "--datacentres", help="hosts split over D sites"),
        wan: str | None = typer.Option(None, "--wan", help="WAN link rate each way"),
        distance: str | None = typer.Option(None, "--distance", help="WAN length, e.g. '1000 km'"),
        slot_bytes: str | None = typer.Option(
            None, "--slot-bytes", help="switch-sum piece size (default: whole payload)"
        ),
        method: str = typer.Option("auto", "--method", help="auto | des | fast"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    ) -> int:
        """Simulate one collective and print its time, the closed form, and bytes per host."""
        if algo not in CLI_ALGOS:
            raise TransitsimError(
                f"unknown --algo {algo!r} (expected one of {', '.join(CLI_ALGOS)})"
            )
        if workers is not None and workers < 1:
            raise TransitsimError(f"--workers must be at least 1, got {workers}")
        if datacentres < 1:
            raise TransitsimError(f"--datacentres must be at least 1, got {datacentres}")
        if network_name is not None:
            if bandwidth is not None:
                raise TransitsimError("give either --network or --bandwidth, not both")
            network = named_network(network_name, workers, settings)
        else:
            if workers is None or bandwidth is None:
                raise TransitsimError("give --workers and --bandwidth (or --network)")
            if settings:
                raise TransitsimError("--set needs --network")
            network = build_network(
                workers, bandwidth, latency, datacentres, wan, distance, slot_bytes, efficiency
            )
        workers = network.workers
        exchange = Exchange(CLI_ALGOS[algo], parse_bytes(size))
        result = simulate_exchange(network, exchange, method=method)
        closed = closed_form_time_s(network, exchange)
        summary = {
            "algo": CLI_ALGOS[algo],
            "workers": workers,
            "payload_bytes": exchange.payload_bytes,
            "time_s": result.time_s,
            "closed_form_s": closed,
            "transform_s": result.transform_s,
            "wire_s": result.wire_s,
            "wait_s": result.wait_s,
            "algbw_bps": algorithm_bandwidth_bps(
                exchange.algo, workers, exchange.payload_bytes, result.time_s
            ),
            "busbw_bps": bus_bandwidth_bps(
                exchange.algo, workers, exchange.payload_bytes, result.time_s
            ),
            "bottleneck": result.bottleneck,
            "method": result.method,
            "events": result.events,
            "bytes_sent": result.bytes_sent.tolist(),
            "bytes_received": result.bytes_received.tolist(),
        }
        if as_json:
            print(json.dumps(summary))
            return 0
        from rich.console import Console  # ~0.1 s to import: not for --json
        from rich.table import Table

        table = Table(title=None if quiet else f"{algo} on {workers} workers", show_header=False)
        table.add_row("simulated time", f"{result.time_s * 1e3:.6f} ms ({result.method})")
        bound = " (lower bound, both halves at once)" if "tree" in exchange.algo else ""
        table.add_row("closed form", f"{closed * 1e3:.6f} ms{bound}")
        table.add_row(
            "breakdown",
            f"wire {result.wire_s * 1e3:.6f} ms, transform {result.transform_s * 1e3:.6f} ms, "
            f"wait {result.wait_s * 1e3:.6f} ms (bottleneck: {result.bottleneck})",
        )
        table.add_row(
            "bandwidth (nccl-tests)",
            f"algbw {summary['algbw_bps'] / 8e9:,.1f} GB/s, "
            f"busbw {summary['busbw_bps'] / 8e9:,.1f} GB/s",
        )
        table.add_row("bytes sent per host", _spread(result.bytes_sent))
        table.add_row("bytes received per host", _spread(result.bytes_received))
        table.add_row("SimPy events", f"{result.events:,}")
        Console().print(table)
        return 0
