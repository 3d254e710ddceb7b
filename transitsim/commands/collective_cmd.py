"""`transitsim collective`: time one collective on a simple network, beside its closed form.

The network is either built from --workers/--bandwidth/--latency/--efficiency (one switch, or
switches per datacentre joined by a WAN), or a preset or YAML file given with --network, e.g.
`--network 8xh100-nvlink`. Algorithm and bus bandwidth are printed as nccl-tests reports them.
`--host-rate`, `--host-overhead` and `--ranks-per-host` put a host endpoint in series with the
links (NetworkSpec.host: each host's rate each way, shared by its ranks, and a cost per message
sent), on either kind of network (with --network they replace its `host:` block).

`-b 8 -e 1G -f 2` sweeps sizes as nccl-tests does (8 B, 16 B, ... 1 GiB; K, M, G are powers of
1024 there) and prints nccl-tests' columns, one row a size, so the two can be laid side by
side: size is the buffer in bytes (an all-gather's whole output, each rank sending size / N),
count its elements of --datatype, time the simulated microseconds, algbw and busbw in GB/s
(1e9 bytes a second).
"""

import dataclasses
import json
import re
from typing import Any

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
from transitsim.network.bandwidth import (
    ALL_REDUCES,
    algorithm_bandwidth_bps,
    bus_bandwidth_bps,
)
from transitsim.network.limits import MAX_DATACENTRES, MAX_WORKERS
from transitsim.network.nccl import MAX_CHANNELS, PROTOCOL_CHOICES
from transitsim.network.spec import AGG_PIECE_BYTES, HostSpec, NcclSpec

CLI_ALGOS = {name.replace("_", "-"): name for name in COLLECTIVE_ALGOS}
# nccl-tests' datatypes (-d) and their sizes in bytes
DATATYPES = {
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "half": 2,
    "float": 4,
    "double": 8,
    "bfloat16": 2,
}
MAX_SIZES = 64  # rows of one sweep
_NCCL_SIZE = re.compile(r"\s*(\d+)\s*([kKmMgGtT]?)\s*")
_NCCL_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


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


def _parsed(parse, text: str, option: str) -> float:
    try:
        return parse(text)
    except TransitsimError as exc:
        raise TransitsimError(f"{option}: {exc}") from None


def with_host(
    network: NetworkSpec,
    rate: str | None,
    overhead: str | None,
    ranks_per_host: int | None,
) -> NetworkSpec:
    """The network with the host endpoint the options give (unchanged when none is given);
    options left out keep the network's own host values (or HostSpec's defaults)."""
    if rate is None and overhead is None and ranks_per_host is None:
        return network
    host = network.host or HostSpec()
    if rate is not None:
        host = dataclasses.replace(host, rate_bps=_parsed(parse_rate_bps, rate, "--host-rate"))
    if overhead is not None:
        seconds = _parsed(parse_time_s, overhead, "--host-overhead")
        host = dataclasses.replace(host, per_message_s=seconds)
    if ranks_per_host is not None:
        if ranks_per_host < 1 or network.workers % ranks_per_host:
            raise TransitsimError(
                f"--ranks-per-host must be a divisor of the {network.workers} workers, "
                f"got {ranks_per_host}"
            )
        host = dataclasses.replace(host, ranks_per_host=ranks_per_host)
    return dataclasses.replace(network, host=host)


def named_network(network: str, workers: int | None, settings: list[str]) -> NetworkSpec:
    """A preset or YAML network (as `transitsim replay --network` takes it), --set applied."""
    from transitsim.scenario import network_from_dict
    from transitsim.scenario.network_arg import network_description

    spec = network_from_dict(network_description(network, settings))
    if workers is not None and workers != spec.workers:
        raise TransitsimError(
            f"--workers {workers} disagrees with network {spec.name!r} of {spec.workers} workers"
            " (leave --workers out, or --set workers=N)"
        )
    return spec


def parse_sweep_size(text: str, option: str) -> int:
    """A size as nccl-tests writes it ("8", "128K", "1G": K, M, G powers of 1024), or as the
    rest of transitsim does ("32 MB", "4 KiB")."""
    match = _NCCL_SIZE.fullmatch(text)
    try:
        if match:
            return parse_bytes(int(match.group(1)) * _NCCL_UNITS[match.group(2).lower()])
        return parse_bytes(text)
    except TransitsimError as exc:
        raise TransitsimError(f"{option}: {exc}") from None


def sweep_sizes(minbytes: int, maxbytes: int, factor: int) -> list[int]:
    """minbytes, minbytes x factor, ... up to maxbytes (nccl-tests' -b, -e, -f)."""
    if minbytes < 1:
        raise TransitsimError(f"--minbytes must be at least 1 byte, got {minbytes}")
    if maxbytes < minbytes:
        raise TransitsimError(f"--maxbytes ({maxbytes:,}) is below --minbytes ({minbytes:,})")
    if factor < 2:
        raise TransitsimError(f"--stepfactor must be at least 2, got {factor}")
    sizes = [minbytes]
    while sizes[-1] * factor <= maxbytes:
        sizes.append(sizes[-1] * factor)
    if len(sizes) > MAX_SIZES:
        raise TransitsimError(f"the sweep has {len(sizes)} sizes; at most {MAX_SIZES}")
    return sizes


def sweep_row(network: NetworkSpec, algo: str, size: int, datatype: str, method: str) -> dict:
    """One nccl-tests row: the buffer as nccl-tests counts it, and its simulated exchange."""
    word = DATATYPES[datatype]
    workers = network.workers
    gather = algo not in ALL_REDUCES
    count = size // word // workers if gather else size // word  # per rank for an all-gather
    payload = count * word  # what each worker originates
    total = payload * workers if gather else payload
    time_s, protocol = 0.0, None
    if payload > 0:
        result = simulate_exchange(network, Exchange(algo, payload), method=method)
        time_s, protocol = result.time_s, _nccl_choice(result, algo)
    row = {
        "size_bytes": total,
        "count": count,
        "type": datatype,
        "redop": "none" if gather else "sum",
        "payload_bytes": payload,
        "time_s": time_s,
        "algbw_GBps": algorithm_bandwidth_bps(algo, workers, payload, time_s) / 8e9,
        "busbw_GBps": bus_bandwidth_bps(algo, workers, payload, time_s) / 8e9,
    }
    if network.nccl is not None:
        row["protocol"] = protocol
    return row


def _nccl_choice(result, asked: str) -> str | None:
    """The NCCL mode's choice in words ("ll128 x 8 ch", with the algorithm where it chose
    another than the one asked for)."""
    if result.protocol is None:
        return None
    algo = f"{result.algo.replace('_', '-')} " if result.algo not in (None, asked) else ""
    return f"{algo}{result.protocol} x {result.channels} ch"


def with_nccl(network: NetworkSpec, protocol: str | None, channels: int | None) -> NetworkSpec:
    """The network with the NCCL mode the options give (--protocol, --channels), on top of its
    own `nccl:` block (or NCCL's defaults); unchanged when neither is given."""
    if protocol is None and channels is None:
        return network
    nccl = network.nccl or NcclSpec()
    if protocol is not None:
        if protocol not in PROTOCOL_CHOICES:
            raise TransitsimError(
                f"--protocol must be one of {', '.join(PROTOCOL_CHOICES)}, got {protocol!r}"
            )
        fixed = protocol != "auto"  # a protocol asked for overrides the size thresholds
        nccl = dataclasses.replace(
            nccl, protocol=protocol, thresholds=() if fixed else nccl.thresholds
        )
    if channels is not None:
        if not 1 <= channels <= MAX_CHANNELS:
            raise TransitsimError(f"--channels must lie in 1..{MAX_CHANNELS}, got {channels}")
        nccl = dataclasses.replace(nccl, channels=channels)
    return dataclasses.replace(network, nccl=nccl)


def _usec(time_s: float) -> str:
    """nccl-tests' time column: 2 decimals below 100 us, 1 below 10 ms, none above."""
    usec = time_s * 1e6
    if usec >= 10000.0:
        return f"{usec:7.0f}"
    return f"{usec:7.1f}" if usec >= 100.0 else f"{usec:7.2f}"


def nccl_table(rows: list[dict[str, Any]], title: str | None) -> str:
    """The sweep in nccl-tests' layout (its out-of-place columns, no root or #wrong)."""
    lines = [f"# {title}", "#"] if title else []
    nccl = any("protocol" in row for row in rows)  # NCCL mode: what it chose, last column
    lines += [
        f"#{'size':>11}  {'count':>12}  {'type':>8}  {'redop':>6}  {'time':>7}  "
        f"{'algbw':>6}  {'busbw':>6}" + ("  protocol" if nccl else ""),
        f"#{'(B)':>11}  {'(elements)':>12}  {'':>8}  {'':>6}  {'(us)':>7}  "
        f"{'(GB/s)':>6}  {'(GB/s)':>6}",
    ]
    for row in rows:
        lines.append(
            f"{row['size_bytes']:12d}  {row['count']:12d}  {row['type']:>8}  {row['redop']:>6}  "
            f"{_usec(row['time_s'])}  {row['algbw_GBps']:6.2f}  {row['busbw_GBps']:6.2f}"
            + (f"  {row.get('protocol') or '-'}" if nccl else "")
        )
    average = sum(row["busbw_GBps"] for row in rows) / len(rows)
    lines.append(f"# Avg bus bandwidth    : {average:g}")
    return "\n".join(lines) + "\n"


def _spread(values: np.ndarray) -> str:
    low, high = float(values.min()), float(values.max())
    return f"{low:,.0f}" if low == high else f"{low:,.0f} .. {high:,.0f}"


def register(app: typer.Typer) -> None:
    """Add `collective` to the main app."""

    @app.command("collective")
    def collective(
        algo: str = typer.Option(..., "--algo", help=f"one of {', '.join(CLI_ALGOS)}"),
        workers: int | None = typer.Option(None, "--workers", help="number of hosts"),
        size: str | None = typer.Option(
            None, "--bytes", help="payload per worker, e.g. '32 MB' (or sweep with -b/-e)"
        ),
        minbytes: str | None = typer.Option(
            None, "--minbytes", "-b", help="sweep from this size, nccl-tests style (e.g. 8)"
        ),
        maxbytes: str | None = typer.Option(
            None, "--maxbytes", "-e", help="sweep up to this size (e.g. 1G = 1024^3 bytes)"
        ),
        stepfactor: int = typer.Option(
            2, "--stepfactor", "-f", help="sweep: each size this many times the last"
        ),
        datatype: str = typer.Option(
            "float", "--datatype", "-d", help=f"sweep: element type, one of {', '.join(DATATYPES)}"
        ),
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
            None,
            "--slot-bytes",
            help=f"switch-sum piece size (default: {AGG_PIECE_BYTES:,} B pieces, one packet)",
        ),
        host_rate: str | None = typer.Option(
            None, "--host-rate", help="each host endpoint's rate each way, shared by its ranks"
        ),
        host_overhead: str | None = typer.Option(
            None, "--host-overhead", help="host cost of every message a rank sends, e.g. '20 us'"
        ),
        ranks_per_host: int | None = typer.Option(
            None, "--ranks-per-host", help="consecutive ranks sharing one host endpoint"
        ),
        protocol: str | None = typer.Option(
            None,
            "--protocol",
            help="NCCL mode: ll | ll128 | simple | auto (what NCCL's tuner picks)",
        ),
        channels: int | None = typer.Option(
            None, "--channels", help="NCCL mode: parallel rings (NCCL's channels), 1..64"
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
        network = with_host(network, host_rate, host_overhead, ranks_per_host)
        network = with_nccl(network, protocol, channels)
        workers = network.workers
        sweeping = minbytes is not None or maxbytes is not None
        if sweeping and size is not None:
            raise TransitsimError("give either --bytes or a sweep (-b/-e), not both")
        if sweeping:
            if datatype not in DATATYPES:
                raise TransitsimError(
                    f"unknown --datatype {datatype!r} (expected one of {', '.join(DATATYPES)})"
                )
            low = parse_sweep_size(minbytes or maxbytes or "", "--minbytes")
            high = parse_sweep_size(maxbytes or minbytes or "", "--maxbytes")
            rows = [
                sweep_row(network, CLI_ALGOS[algo], each, datatype, method)
                for each in sweep_sizes(low, high, stepfactor)
            ]
            if as_json:
                print(
                    json.dumps([{"algo": CLI_ALGOS[algo], "workers": workers, **r} for r in rows])
                )
                return 0
            title = (
                None
                if quiet
                else (
                    f"transitsim collective: {CLI_ALGOS[algo]} on {workers} workers of network "
                    f"{network.name!r}, simulated ({method}), not measured"
                )
            )
            print(nccl_table(rows, title), end="")
            return 0
        if size is None:
            raise TransitsimError("give --bytes (one size) or -b/-e (a sweep of sizes)")
        exchange = Exchange(CLI_ALGOS[algo], parse_bytes(size))
        result = simulate_exchange(network, exchange, method=method)
        # the closed forms know no NCCL mode (protocols, channels, NCCL's tuner): not shown there
        closed = None if result.protocol is not None else closed_form_time_s(network, exchange)
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
        if result.protocol is not None:
            summary.update(
                protocol=result.protocol, channels=result.channels, nccl_algo=result.algo
            )
        if as_json:
            print(json.dumps(summary))
            return 0
        from rich.console import Console  # ~0.1 s to import: not for --json
        from rich.table import Table

        table = Table(title=None if quiet else f"{algo} on {workers} workers", show_header=False)
        table.add_row("simulated time", f"{result.time_s * 1e3:.6f} ms ({result.method})")
        bound = " (lower bound, both halves at once)" if "tree" in exchange.algo else ""
        if closed is None:
            table.add_row("closed form", "not shown in NCCL mode (the forms know no protocols)")
        else:
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
        if result.protocol is not None:
            table.add_row("NCCL mode", _nccl_choice(result, exchange.algo))
        table.add_row("SimPy events", f"{result.events:,}")
        Console().print(table)
        return 0
