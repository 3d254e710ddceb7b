"""The calibrated network as a network YAML: what `replay --network`, `collective -n` and a
scenario's `networks:` take (a scenario network mapping, units explicit).

A network file holds one network, so it holds one regime of one collective: the one that
covers `payload_bytes` (by default the largest size measured, the regime gradient exchanges of
large models fall in). The comment block above it lists where it came from and every regime,
so the others can be written by hand or with --payload.
"""

import math
import re

import yaml

from transitsim.calibrate.fit import Calibration
from transitsim.calibrate.model import Link, Shape

_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def rate_text(bps: float) -> str:
    """A rate with units and enough digits to reproduce the fit (1e-9 relative)."""
    return f"{bps / 1e9:.9g} Gb/s"


def time_text(seconds: float) -> str:
    return f"{seconds * 1e6:.9g} us"


def size_text(n_bytes: float) -> str:
    """Bytes as nccl-tests users write them: 1 MiB, 8 GiB, 512 B."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n_bytes >= scale:
            value = n_bytes / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.3g} {unit}"
    return f"{n_bytes:.0f} B"


def link_dict(link: Link, ports: int = 1) -> dict:
    return {
        "rate": rate_text(link.rate_bps * ports),
        "efficiency": float(f"{link.efficiency:.12g}"),
        "latency": time_text(link.latency_s),
    }


def network_dict(link: Link, shape: Shape, name: str, description: str) -> dict:
    """The scenario-style mapping of the calibrated network (calibrate/model.py)."""
    mapping = {
        "name": name,
        "description": description,
        "topology": shape.topology,
        "workers": shape.ranks,
        "host_link": link_dict(link),
        "switch": {"forwarding_latency": "0 s"},
    }
    if shape.topology == "leaf_spine":
        mapping["hosts_per_rack"] = shape.per_host
        mapping["spine_link"] = link_dict(link, shape.per_host)  # non-blocking: not fitted
    return mapping


def regime_line(calibration: Calibration, index: int) -> str:
    """One regime in words: its sizes, its link and how well it fits."""
    regime = calibration.regimes[index]
    link = regime.link
    links = calibration.shape.message_links(True)
    between = " between hosts" if calibration.shape.hosts > 1 else ""
    split = (
        f" (line {rate_text(link.line_bps)} x efficiency {link.efficiency:.4f})"
        if link.line_bps is not None
        else ""
    )
    return (
        f"regime {index + 1}: {size_text(regime.first_bytes)} .. {size_text(regime.last_bytes)}"
        f" ({regime.rows} rows): payload {link.payload_bps / 1e9:,.4g} Gb/s"
        f"{split}, latency {link.latency_s * 1e6:.4g} us per link "
        f"({links * link.latency_s * 1e6:.4g} us per message{between}), "
        f"worst |error| {regime.worst * 100:.1f} %"
    )


def default_name(calibration: Calibration) -> str:
    stem = calibration.tables[0].source.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
    name = _NAME_CHARS.sub("-", f"calibrated-{stem}").strip("-")
    return name[:100] or "calibrated"


def network_yaml(
    calibration: Calibration,
    payload_bytes: float | None = None,
    name: str | None = None,
    command: str = "transitsim calibrate",
) -> tuple[str, dict, int]:
    """(YAML text, the mapping, regime index written) for the regime covering payload_bytes."""
    if payload_bytes is None:
        payload_bytes = max(p.row.size_bytes for p in calibration.points if p.role == "fit")
    index = calibration.regime_for(payload_bytes)
    regime = calibration.regimes[index]
    name = name or default_name(calibration)
    where, tables = _where_and_tables(calibration)
    description = (
        f"{calibration.collective} calibrated from measured tables ({tables}), sizes "
        f"{size_text(regime.first_bytes)} .. {size_text(regime.last_bytes)}, as "
        f"{calibration.algo} on {where}"
    )
    mapping = network_dict(regime.link, calibration.shape, name, description)
    lines = [
        f"# Calibrated by `{command}`.",
        f"# Every rank is a host with one link to {where}; transitsim's "
        f"{calibration.algo} on it reproduces",
        f"# the measured {calibration.collective} times of these tables (out-of-place unless "
        "--place says otherwise):",
    ]
    for table in calibration.tables:
        per_host = "/".join(str(n) for n in sorted(set(table.ranks_per_host.values())))
        hosts = f"{table.hosts} hosts x {per_host}" if table.ranks_per_host else "hosts unknown"
        lines.append(f"#   {table.source}: {table.ranks} ranks ({hosts}), {len(table.rows)} rows")
    worst = calibration.worst("fit")
    lines.append(
        f"# Fitted on rows of at least {size_text(calibration.min_size)}: "
        f"{len(calibration.regimes)} regime(s), {calibration.parameters} fitted parameters, "
        f"worst |error| {(worst or math.nan) * 100:.1f} %."
    )
    for i in range(len(calibration.regimes)):
        marker = "   <- this file" if i == index else ""
        lines.append(f"#   {regime_line(calibration, i)}{marker}")
    lines.append(
        "# A network file holds one regime: the one covering the payload it was written for "
        f"({size_text(payload_bytes)})."
    )
    body = yaml.safe_dump(mapping, sort_keys=False, default_flow_style=False, width=100)
    return "\n".join(lines) + "\n" + body, mapping, index


def protocol_line(calibration, index: int) -> str:
    """One fitted NCCL protocol in words: the rows it times, latency, channel rate, floor."""
    fit = calibration.fits[index]
    plateau = (
        f", fewer channels below {size_text(fit.channel_bytes * calibration.channels)} "
        f"({size_text(fit.channel_bytes)} a channel)"
        if fit.channel_bytes
        else ""
    )
    switch = calibration.switch_bytes
    if switch:
        low = f"from {size_text(switch[index - 1])}" if index > 0 else ""
        high = f"below {size_text(switch[index])}" if index < len(switch) else ""
        chosen = f"chosen {' '.join(x for x in (low, high) if x)}"
    else:
        chosen = "chosen where fastest"
    rows = (
        f"{size_text(fit.first_bytes)} .. {size_text(fit.last_bytes)} ({fit.rows} fitted rows)"
        if fit.rows
        else "no fitted row"
    )
    return (
        f"{fit.protocol}: {chosen}, times {rows}: latency {fit.latency_s * 1e6:.4g} us per link, "
        f"channel rate {fit.channel_rate_bps / 1e9:,.4g} Gb/s x {calibration.channels} channels = "
        f"{fit.channel_rate_bps * calibration.channels / 1e9:,.4g} Gb/s{plateau}"
    )


def nccl_network_yaml(
    calibration, name: str | None = None, command: str = "transitsim calibrate"
) -> tuple[str, dict]:
    """(YAML text, the mapping) of an NCCL-mode calibration (calibrate/nccl_fit.py): one file
    for every size, the protocol chosen by size as `auto` chooses."""
    name = name or default_name(calibration)
    spec = calibration.network(name)
    link = Link(calibration.payload_bps, spec.host_link.latency_s, calibration.line_bps)
    where, tables = _where_and_tables(calibration)
    description = (
        f"{calibration.collective} calibrated from measured tables ({tables}) in NCCL mode "
        f"({', '.join(f.protocol for f in calibration.fits)} over {calibration.channels} "
        f"channels), as {calibration.algo} on {where}"
    )
    mapping = network_dict(link, calibration.shape, name, description)
    assert spec.nccl is not None
    protocols = {}
    for fit in calibration.fits:
        one = spec.nccl.spec(fit.protocol)
        protocols[fit.protocol] = {
            "efficiency": float(f"{one.efficiency:.12g}"),
            "latency": time_text(one.latency_s),
            "channel_rate": rate_text(one.channel_rate_bps),
            "channel_bytes": int(one.channel_bytes),
            "nvlink_latency": time_text(one.nvlink_latency_s),
            "base_latency": time_text(one.base_latency_s),
        }
    mapping["nccl"] = {
        "protocol": "auto",
        "tuner": spec.nccl.tuner,
        "protocols": [f.protocol for f in calibration.fits],
        "channels": calibration.channels,
    }
    if spec.nccl.thresholds:  # the engine compares them with the exchange's payload
        mapping["nccl"]["thresholds"] = [int(t) for t in spec.nccl.thresholds]
    mapping["nccl"].update(protocols)
    worst = calibration.worst("fit")
    lines = [
        f"# Calibrated by `{command}` (NCCL mode).",
        f"# Every rank is a host with one link to {where}; transitsim's {calibration.algo} in",
        f"# NCCL mode reproduces the measured {calibration.collective} times of these tables:",
    ]
    for table in calibration.tables:
        lines.append(f"#   {table.source}: {table.ranks} ranks, {len(table.rows)} rows")
    lines.append(
        f"# Fitted on rows of at least {size_text(calibration.min_size)}: "
        f"{len(calibration.fits)} protocol(s), {calibration.parameters} fitted parameters, "
        f"worst |error| {(worst or math.nan) * 100:.1f} %."
    )
    lines += [f"#   {protocol_line(calibration, i)}" for i in range(len(calibration.fits))]
    if spec.nccl.thresholds:
        lines.append(
            "# thresholds: the payload bytes where the protocol changes (nccl-tests' sizes "
            + ", ".join(size_text(b) for b in calibration.switch_bytes)
            + ", as the exchange's payload)"
        )
    body = yaml.safe_dump(mapping, sort_keys=False, default_flow_style=False, width=100)
    return "\n".join(lines) + "\n" + body, mapping


def _where_and_tables(calibration) -> tuple[str, str]:
    """What the ranks' links lead to, and the tables' file names, as a file's description says."""
    where = "one switch" if calibration.shape.topology == "switch" else "a leaf switch per host"
    return where, ", ".join(t.source.rsplit("/", 1)[-1] for t in calibration.tables)
