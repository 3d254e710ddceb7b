"""`transitsim replay TRACE... --network NET`: one-off questions without a scenario file.

The network is a preset name or a YAML file written as a scenario's network (a mapping, or a
preset name with keys to change); `--set host_link.rate="100 Gb/s"` changes one dotted key, with
units, as a scenario grid would. The work is transitsim.run.replay_traces'.
"""

import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import typer
import yaml

from transitsim.analysis.metrics import run_sort_key
from transitsim.base.errors import TransitsimError
from transitsim.base.tables import emit_table, output_format
from transitsim.base.units import parse_bytes
from transitsim.commands import QUIET_HELP
from transitsim.commands.run_cmd import (
    print_summary,
    print_verdict,
    report_all_failed,
    report_problems,
)
from transitsim.network import NetworkSpec
from transitsim.network.presets import preset_names
from transitsim.outputs import RunResult, check_outputs_writable, write_outputs
from transitsim.overlap import OVERLAP_MODES
from transitsim.replay.sites import REPLICAS
from transitsim.run import JobsFailed, bottlenecks, default_placement, load_traces, replay_traces
from transitsim.scenario import network_from_dict
from transitsim.scenario.yaml_source import (
    KeyPathIssue,
    check_expanded_size,
    format_path,
    read_yaml,
)
from transitsim.traces.format import find_traces

PLACEMENTS = ("auto", "none", "pluggable", "switch")
SUMS = ("auto", "receivers", "switch", "ring")
RUN_HEADERS = {
    "label": "Configuration",
    "network": "Network",
    "steps": "Steps",
    "time_s": "Time (s)",
    "step_s": "Mean step (s)",
    "final_val_loss": "Final val loss",
    "wire_bytes": "Wire bytes",
    "bottleneck": "Bottleneck",
}


def _parse_set(item: str) -> tuple[str, Any]:
    """'host_link.rate=100 Gb/s' -> ('host_link.rate', '100 Gb/s'); values read as YAML, so
    `workers=16` is a number and `switch.aggregator=true` a bool."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise TransitsimError(f'--set {item!r}: expected KEY=VALUE, e.g. host_link.rate="100 Gb/s"')
    if not text.strip():
        return key, ""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return key, text  # not YAML: the text as written
    except RecursionError:
        raise TransitsimError(f"--set {key}: the value is nested too deeply") from None
    if node is not None:
        check_expanded_size(node, f"--set {key}")  # an alias bomb would hang what reads it
    try:
        return key, yaml.safe_load(text)
    except yaml.YAMLError as exc:  # a tag safe_load refuses (!!python/object/apply:...)
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise TransitsimError(f"--set {key}: not a plain YAML value ({problem})") from None
    except RecursionError:
        raise TransitsimError(f"--set {key}: the value is nested too deeply") from None


def _as_text(value: Any) -> str:
    """A --set value as it reads in a network name: text as written, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _set_dotted(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set `key` ("a.b.c") in the nested mapping, creating mappings on the way."""
    node = raw
    parts = key.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value


def network_description(network: str, settings: list[str]) -> dict[str, Any]:
    """The network as a scenario would write it: a preset by name, or a YAML file's mapping,
    with --set keys applied (named after them unless the description names itself)."""
    path = Path(network)
    if network in preset_names():
        raw: Any = {"preset": network}
        name = network
    elif path.is_file():
        try:  # bounded as a scenario is: size, alias expansion, keys as text and once each
            _, raw = read_yaml(path, what="network")
        except KeyPathIssue as issue:
            key = format_path(issue.path)
            raise TransitsimError(f"{path}: {key + ': ' if key else ''}{issue.message}") from None
        raw = {"preset": raw} if isinstance(raw, str) else raw
        if not isinstance(raw, dict):
            raise TransitsimError(f"{path}: a network is a mapping of keys (or a preset name)")
        name = raw.get("name") or raw.get("preset") or path.stem
    else:
        raise TransitsimError(
            f"--network {network!r}: neither a preset ({', '.join(preset_names())}) nor a file"
        )
    pairs = [_parse_set(item) for item in settings]
    for key, value in pairs:
        _set_dotted(raw, key, value)
    if "name" not in raw or pairs:
        changed = ", ".join(f"{key}={_as_text(value)}" for key, value in pairs)
        raw["name"] = f"{name}[{changed}]" if changed else name
    return raw


def _placement(network: NetworkSpec, transform_at: str, sum_at: str) -> tuple[str | None, str]:
    """The placement asked for, refused (as a scenario refuses it) where the hardware is absent:
    otherwise every job would fail, one by one, with exit 1."""
    auto_transform, auto_sum = default_placement(network)
    transform = auto_transform if transform_at == "auto" else transform_at
    if sum_at == "switch" and not network.switch.aggregator:
        raise TransitsimError(
            f"--sum-at switch: network {network.name} has no summing switch (switch.aggregator "
            "is off; --set switch.aggregator=true adds one)"
        )
    if transform == "pluggable" and (network.pluggable is None or not network.pluggable.transform):
        raise TransitsimError(f"--transform-at pluggable: network {network.name} has none")
    if transform == "switch" and network.switch.transform is None:
        raise TransitsimError(f"--transform-at switch: network {network.name} has no transform")
    return (None if transform == "none" else transform), auto_sum if sum_at == "auto" else sum_at


def runs_table(result: RunResult) -> pd.DataFrame:
    """Per run without targets: steps, total and mean step time, final loss, bottleneck."""
    timeline = result.timeline
    parts = bottlenecks(timeline)
    rows = []
    for (run, network), steps in timeline.groupby(["run", "network"], sort=False):
        last = steps.iloc[-1]
        config = str(last["config"])
        evaluated = steps["val_loss"].dropna()
        rows.append(
            {
                "run": run,
                "label": result.labels.get(config, config),
                "network": network,
                "steps": int(last["step"]),
                "time_s": float(last["time_s"]),
                "step_s": float(last["time_s"]) / int(last["step"]),
                "final_val_loss": float(evaluated.iloc[-1]) if len(evaluated) else float("nan"),
                "wire_bytes": float(last["wire_bytes"]),
                "bottleneck": parts[(config, network)],
            }
        )
    return pd.DataFrame(rows)


def replay_command(
    traces: list[Path] = typer.Argument(..., help="Trace files or folders of them."),
    network: str = typer.Option(..., "--network", "-n", help="A preset name or a YAML file."),
    settings: list[str] = typer.Option(
        [], "--set", help='Change one network key: --set host_link.rate="100 Gb/s" (repeatable).'
    ),
    targets: str | None = typer.Option(
        None, "--targets", "-t", help='Losses: "2.7,final:A" (default: final:BASELINE if given).'
    ),
    baseline: str | None = typer.Option(
        None, "--baseline", "-b", help="Speed-ups against this config or variant id (e.g. A)."
    ),
    transform_at: str = typer.Option(
        "auto",
        "--transform-at",
        help="E/E' band made at: auto (the hardware), none, pluggable, switch.",
    ),
    sum_at: str = typer.Option(
        "auto",
        "--sum-at",
        help="Where the bands of C/D/E/F are summed: auto, receivers (all-gather), switch, "
        "ring (all-reduce).",
    ),
    overlap: str = typer.Option(
        "none",
        "--overlap",
        help="none: exchange after backward; buckets: each bucket/tensor as backward makes it.",
    ),
    bucket_size: str = typer.Option(
        "25 MiB", "--bucket-size", help="DDP bucket cap with --overlap buckets (e.g. 25 MiB)."
    ),
    replicas: str = typer.Option(
        "worker",
        "--replicas",
        help="Local SGD (H, H-s, L): worker (a replica per worker, as trained) or site (one "
        "replica per datacentre, its workers all-reducing every step over their LAN).",
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Also write timeline, summary and report here."
    ),
    csv: bool = typer.Option(False, "--csv", help="Print CSV (raw numbers)."),
    markdown: bool = typer.Option(False, "--markdown", help="Print a markdown table."),
    json_: bool = typer.Option(False, "--json", help="Print JSON records."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    notes: bool = typer.Option(
        False, "--notes", help="Print every note (with --out, all are in notes.txt there)."
    ),
) -> int:
    """Replay traces on one network and print time-to-loss per target, then the verdict (or,
    without targets, each run's total time). Exit 0 ok, 1 when a trace could not be replayed,
    2 on bad input."""
    fmt = output_format(csv, markdown, json_)
    if transform_at not in PLACEMENTS:
        raise TransitsimError(f"--transform-at must be one of {', '.join(PLACEMENTS)}")
    if sum_at not in SUMS:
        raise TransitsimError(f"--sum-at must be one of {', '.join(SUMS)}")
    if overlap not in OVERLAP_MODES:
        raise TransitsimError(f"--overlap must be one of {', '.join(OVERLAP_MODES)}")
    if replicas not in REPLICAS:
        raise TransitsimError(f"--replicas must be one of {', '.join(REPLICAS)}")
    bucket_bytes = parse_bytes(bucket_size)
    if bucket_bytes < 1:
        raise TransitsimError(f"--bucket-size must be positive, got {bucket_size!r}")
    if out is not None:
        check_outputs_writable(out)
    spec = network_from_dict(network_description(network, settings))
    placed_transform, placed_sum = _placement(spec, transform_at, sum_at)
    loaded = load_traces(find_traces(traces))
    loaded = dict(sorted(loaded.items(), key=lambda item: run_sort_key(item[1].meta)))
    if not loaded:
        raise TransitsimError(f"no traces in {', '.join(map(str, traces))}")
    try:
        result = replay_traces(
            loaded,
            spec,
            targets=targets,
            baseline=baseline,
            transform_at=placed_transform,
            sum_at=placed_sum,
            quiet=quiet or fmt != "table",
            overlap=overlap,
            bucket_bytes=bucket_bytes,
            replicas=replicas,
        )
    except JobsFailed as exc:
        return report_all_failed(exc)
    if out is not None:
        write_outputs(result, out, ("timeline", "summary", "report"))
    report_problems(result, quiet, all_notes=notes)
    if result.targets:
        print_summary(result, fmt, baseline=baseline, quiet=quiet)
        if fmt == "table" and not quiet:
            print_verdict(result)
    else:
        table = runs_table(result)
        if fmt in ("table", "markdown"):
            table = table.drop(columns="run")
        emit_table(table, fmt, headers=RUN_HEADERS)
    if out is not None and fmt == "table" and not quiet:
        print(f"wrote {', '.join(str(path) for path in result.files)}", file=sys.stderr)
    return result.exit_code


def register(app: typer.Typer) -> None:
    """Add `transitsim replay` to the main app (the lead wires it in transitsim/cli.py)."""
    app.command("replay")(replay_command)
