"""`transitsim validate`: check scenario files before anything runs; `transitsim scenario-schema`:
the JSON Schema of the format (for editors, and shipped as scenarios/scenario.schema.json);
`transitsim scenario-reference`: every key in markdown (shipped as docs/scenario-reference.md)."""

import json
import sys
from pathlib import Path

import typer

from transitsim.base.atomic import check_writable_file, write_text_atomic
from transitsim.base.errors import TransitsimError, escaped_line
from transitsim.outputs import check_outputs_writable
from transitsim.run import check_jobs, load_traces, scenario_jobs
from transitsim.scenario import (
    load_scenario,
    network_placement,
    scenario_json_schema,
    scenario_to_networks,
)
from transitsim.scenario.schema import scenario_reference_markdown


def _describe(path: Path) -> dict:
    """What a valid scenario resolves to, in a few numbers a person can check at a glance."""
    scenario = load_scenario(path)
    if scenario.output_dir is not None:  # `run -o` may choose another; without it, this one
        try:
            check_outputs_writable(scenario.output_dir)
        except TransitsimError as exc:
            raise TransitsimError(f"{path}: outputs.dir: {exc}") from None
    networks = [name for name, _, _ in scenario_to_networks(scenario)]
    traces = load_traces([trace.path for trace in scenario.trace_files])
    jobs = scenario_jobs(scenario, traces)
    problems = check_jobs(jobs, traces)  # what would fail at run time, planned now
    if problems:
        raise TransitsimError(f"{path}: {'; '.join(problems)}")
    return {
        "file": str(path),
        "name": scenario.name,
        "traces": [str(trace.path) for trace in scenario.trace_files],
        "configs": sorted({trace.config for trace in scenario.trace_files}),
        "networks": networks,
        "placements": {name: vars(network_placement(scenario, name)) for name in networks},
        "targets": list(scenario.targets),
        "baseline": scenario.baseline,
        "compute": scenario.compute.model,
    }


def validate_command(
    scenarios: list[Path] = typer.Argument(..., help="Scenario YAML files to check."),
    json_: bool = typer.Option(False, "--json", help="Print what each scenario resolves to."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only errors."),
) -> int:
    """Check scenarios (keys, units, trace files, targets) and plan every job without running
    it: exit 0 when all are valid, 2 when any is not (one line per bad file, each reason once)."""
    results, failed = [], False
    for path in scenarios:
        try:
            results.append(_describe(path))
        except TransitsimError as exc:
            failed = True
            print(f"transitsim: error: {escaped_line(exc)}", file=sys.stderr)
    if json_:
        print(json.dumps(results, indent=2))
    elif not quiet:
        for item in results:
            print(
                f"ok  {item['file']}: {len(item['traces'])} traces "
                f"({len(item['configs'])} configs), {len(item['networks'])} networks, "
                f"{len(item['targets'])} targets"
            )
    return 2 if failed else 0


def _emit(text: str, output: Path | None, quiet: bool) -> int:
    """Print text, or write it atomically to --output."""
    if output is None:
        sys.stdout.write(text)
        return 0
    write_text_atomic(check_writable_file(output, what="--output file"), text)
    if not quiet:
        print(f"wrote {output}", file=sys.stderr)
    return 0


def schema_command(
    output: Path = typer.Option(
        None, "--output", "-o", help="Write the schema here (default: print it)."
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="With -o: print nothing (errors still print)."
    ),
) -> int:
    """The JSON Schema of scenario files (point your editor's YAML plugin at it)."""
    return _emit(
        json.dumps(scenario_json_schema(), indent=2, sort_keys=False) + "\n", output, quiet
    )


def reference_command(
    output: Path = typer.Option(
        None, "--output", "-o", help="Write the markdown here (default: print it)."
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="With -o: print nothing (errors still print)."
    ),
) -> int:
    """Every scenario key, its type, default and meaning, as markdown (the models' own words:
    docs/scenario-reference.md is this command's output)."""
    return _emit(scenario_reference_markdown(), output, quiet)


def register(app: typer.Typer) -> None:
    """Add `transitsim validate`, `scenario-schema` and `scenario-reference` to the main app."""
    app.command("validate")(validate_command)
    app.command("scenario-schema")(schema_command)
    app.command("scenario-reference")(reference_command)
