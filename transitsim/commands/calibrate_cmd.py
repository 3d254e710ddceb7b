"""`transitsim calibrate nccl-tests FILE... -o NET.yaml`, `transitsim calibrate testbed TABLE
-o NET.yaml` and `transitsim calibrate node FILE -o NET.yaml` (the node, calibrate/node_fit.py):
fit a network to measured collective tables and write it as a network YAML.

Prints each table beside transitsim's prediction on the calibrated network, per size (time,
algbw, busbw with nccl-tests' busbw factors, the error of each row), the fitted protocols (or
regimes), `--holdout` rows' errors, and the accuracy (calibrate/accuracy.py): the fit's errors on
the rows it saw and on every second size left out and predicted, beside a plain alpha-beta
line's. The file is checked before it is written: read back as `replay --network` reads it, it
must give the prediction printed. The work is transitsim.calibrate's.
"""

import sys
from pathlib import Path

import typer
import yaml

from transitsim import __version__
from transitsim.base.atomic import check_writable_file, write_text_atomic
from transitsim.base.errors import TransitsimError
from transitsim.base.tables import emit_json, emit_table, output_format
from transitsim.base.units import parse_bytes, parse_rate_bps
from transitsim.calibrate import COLLECTIVES, Calibration, Table, calibrate
from transitsim.calibrate.accuracy import Accuracy, accuracy
from transitsim.calibrate.fit import MAX_REGIMES, PLACES
from transitsim.calibrate.model import exchange_for, predict_s
from transitsim.calibrate.nccl_fit import (
    DEFAULT_CHANNELS,
    NCCL_COLLECTIVES,
    NCCL_MIN_SIZE_BYTES,
    NcclCalibration,
    calibrate_nccl,
)
from transitsim.calibrate.nccl_search import MEDIAN_TOLERANCE
from transitsim.calibrate.nccl_tests import read_nccl_tests
from transitsim.calibrate.network_file import nccl_network_yaml, network_yaml, size_text
from transitsim.calibrate.node_fit import (
    calibrate_node,
    gpu_generation,
    gpus_per_host,
    node_yaml,
)
from transitsim.calibrate.report import (
    COLUMNS,
    accuracy_lines,
    comparison_frame,
    readable,
    summary_lines,
)
from transitsim.calibrate.testbed_tables import TESTBED_COLLECTIVES, read_testbed_tables
from transitsim.commands import QUIET_HELP
from transitsim.network.nccl_tuner import GPUS

OUTPUT = typer.Option(..., "--output", "-o", help="the network YAML to write")
ALGO = typer.Option(
    None,
    "--algo",
    help="transitsim's all-reduce: ring-allreduce (default), double-binary-tree, tree",
)
PAYLOAD = typer.Option(
    None,
    "--payload",
    help="write the regime covering this size (default: the largest size measured)",
)
HOLDOUT = typer.Option([], "--holdout", help="leave this size out of the fit, report its error")
MAX_REGIMES_OPTION = typer.Option(
    2, "--max-regimes", help=f"size regimes allowed (1..{MAX_REGIMES}), 2 parameters each"
)
PLACE = typer.Option("out", "--place", help="time column: out(-of-place), in(-place) or min")
LINE_RATE = typer.Option(
    None, "--line-rate", help="the link's line rate: the efficiency is then payload / line"
)
TOPOLOGY = typer.Option(
    "switch",
    "--topology",
    help="switch: every rank on one switch; leaf-spine: a leaf per host of the Rank lines, "
    "the spine non-blocking (to be changed with --set spine_link.rate=...)",
)
NAME = typer.Option(None, "--name", help="the network's name (default: from the first file)")
CSV = typer.Option(False, "--csv", help="Print the comparison as CSV (raw numbers).")
JSON = typer.Option(False, "--json", help="Print one JSON document (raw numbers).")
QUIET = typer.Option(False, "--quiet", "-q", help=QUIET_HELP)


def _algo(text: str | None) -> str | None:
    return None if text is None else text.replace("-", "_")


def check_written(text: str, calibration: Calibration, regime: int) -> None:
    """The YAML read back as `replay --network` reads it reproduces the printed prediction."""
    from transitsim.network import simulate_exchange
    from transitsim.scenario import network_from_dict

    spec = network_from_dict(yaml.safe_load(text))
    if isinstance(calibration, NcclCalibration):  # one file for every size: every row
        for point, expected in zip(calibration.points, calibration.predicted_s, strict=True):
            exchange = exchange_for(calibration.collective, calibration.algo, spec.workers,
                                    point.row.size_bytes)  # fmt: skip
            got = simulate_exchange(spec, exchange).time_s
            if abs(got - expected) > 1e-6 * expected:
                raise TransitsimError(
                    f"internal: the written network gives {got:.6g} s for "
                    f"{size_text(point.row.size_bytes)} where the fit gives {expected:.6g} s"
                )
        return
    point = max(
        (p for p in calibration.points if calibration.regime_for(p.row.size_bytes) == regime),
        key=lambda p: p.row.size_bytes,
    )
    expected = predict_s(calibration.collective, calibration.algo, calibration.shape,
                         point.row.size_bytes, calibration.regimes[regime].link)  # fmt: skip
    if calibration.collective in ("broadcast", "alltoall"):
        return  # closed forms of calibrate/model.py: no transitsim schedule to run
    exchange = exchange_for(calibration.collective, calibration.algo, spec.workers,
                            point.row.size_bytes)  # fmt: skip
    got = simulate_exchange(spec, exchange).time_s
    if abs(got - expected) > 1e-6 * expected:
        raise TransitsimError(
            f"internal: the written network gives {got:.6g} s for {size_text(point.row.size_bytes)}"
            f" where the fit gives {expected:.6g} s"
        )


def _json_head(c: Calibration | NcclCalibration) -> dict:
    """What every calibration's JSON record begins with: the collective, algo, ranks, sources."""
    return {
        "collective": c.collective,
        "algo": c.algo,
        "ranks": c.ranks,
        "sources": [t.source for t in c.tables],
        "notes": [n for t in c.tables for n in t.notes],
    }


def _accuracy_json(a: Accuracy | None) -> dict | None:
    if a is None:
        return None

    def pair(e):
        return None if e is None else {"rows": e.rows, "worst": e.worst, "median": e.median}

    return {
        "min_size_bytes": a.min_size,
        "parameters": a.parameters,
        "fitted": pair(a.fitted),
        "held_out_sizes": list(a.held_sizes),
        "held_out_parameters": a.held_parameters,
        "held_out": pair(a.held_out),
        "alpha_beta": {
            "alpha_s": a.alpha_s,
            "beta_bytes_per_s": a.beta_bps,
            "fitted": pair(a.alpha_beta_fitted),
            "held_out": pair(a.alpha_beta_held_out),
        },
    }


def _nccl_json(c: NcclCalibration) -> dict:
    return {
        **_json_head(c),
        "model": "nccl",
        "channels": c.channels,
        "thresholds_bytes": list(c.switch_bytes),
        "protocols": [
            {
                "protocol": f.protocol,
                "first_bytes": f.first_bytes,
                "last_bytes": f.last_bytes,
                "latency_s": f.latency_s,
                "channel_rate_bps": f.channel_rate_bps,
                "channel_bytes": f.channel_bytes,
                "rows": f.rows,
            }
            for f in c.fits
        ],
        "parameters": c.parameters,
        "rows": comparison_frame(c).to_dict(orient="records"),
    }


def _report(
    calibrations: list[Calibration], accuracies: list[Accuracy | None], fmt: str, quiet: bool
) -> None:
    if fmt == "json":
        emit_json(
            [
                {**_nccl_json(c), "accuracy": _accuracy_json(a)}
                if isinstance(c, NcclCalibration)
                else {
                    **_json_head(c),
                    "model": "regimes",
                    "accuracy": _accuracy_json(a),
                    "regimes": [
                        {
                            "first_bytes": r.first_bytes,
                            "last_bytes": r.last_bytes,
                            "payload_bps": r.link.payload_bps,
                            "rate_bps": r.link.rate_bps,
                            "efficiency": r.link.efficiency,
                            "latency_s": r.link.latency_s,
                            "rows": r.rows,
                            "worst_abs_error": r.worst,
                        }
                        for r in c.regimes
                    ],
                    "rows": comparison_frame(c).to_dict(orient="records"),
                }
                for c, a in zip(calibrations, accuracies, strict=True)
            ]
        )
        return
    if fmt == "csv":  # one table: a column says which fit each row belongs to
        import pandas as pd

        frames = []
        for calibration in calibrations:
            frame = comparison_frame(calibration)
            frame.insert(0, "collective", calibration.collective)
            if "ranks" not in frame:
                frame.insert(1, "ranks", calibration.ranks)
            frames.append(frame)
        emit_table(pd.concat(frames, ignore_index=True), "csv")
        return
    for calibration, found in zip(calibrations, accuracies, strict=True):
        frame = comparison_frame(calibration)
        title = None
        if not quiet:
            hosts = "; ".join(
                f"{t.source}: {t.ranks} ranks on {t.hosts or '?'} host(s)"
                for t in calibration.tables
            )
            mode = " in NCCL mode" if isinstance(calibration, NcclCalibration) else ""
            title = f"{calibration.collective} as transitsim's {calibration.algo}{mode} ({hosts})"
        emit_table(readable(frame), "table", title=title, headers=COLUMNS)
        for line in summary_lines(calibration):
            print(line)
        if found is not None:
            model = "NCCL mode" if isinstance(calibration, NcclCalibration) else "regimes"
            median = getattr(calibration, "median_tolerance", MEDIAN_TOLERANCE)
            for line in accuracy_lines(found, model, calibration.tolerance, median):
                print(line)
        if not quiet:
            for table in calibration.tables:
                for note in table.notes:
                    print(f"note: {table.source}: {note}", file=sys.stderr)


def _finish(
    calibrations: list[Calibration],
    accuracies: list[Accuracy | None],
    use: str | None,
    output: Path,
    payload: str | None,
    name: str | None,
    command: str,
    fmt: str,
    quiet: bool,
) -> int:
    """Print, check and write the network of the collective `use` (default: all_reduce, else
    the first one read)."""
    names = list(dict.fromkeys(c.collective for c in calibrations))
    if use is not None:
        use = use.replace("-", "_")
        if use not in names:
            raise TransitsimError(f"--use {use}: the tables hold {', '.join(names)}")
    wanted = use or ("all_reduce" if "all_reduce" in names else names[0])
    chosen = max((c for c in calibrations if c.collective == wanted), key=lambda c: c.ranks)
    size = None if payload is None else parse_bytes(payload)
    if isinstance(chosen, NcclCalibration):
        if payload is not None:
            raise TransitsimError("--payload: an NCCL-mode file holds every size; leave it out")
        text, regime = nccl_network_yaml(chosen, name, command=command)[0], 0
    else:
        text, _, regime = network_yaml(chosen, size, name, command=command)
    check_written(text, chosen, regime)
    _report(calibrations, accuracies, fmt, quiet)
    for calibration in calibrations:
        worst = calibration.worst("fit")
        if worst is not None and worst > calibration.tolerance and not quiet:
            print(
                f"transitsim: warning: {calibration.collective}: worst fitted |error| "
                f"{worst * 100:.1f} % exceeds {calibration.tolerance * 100:.0f} % (a higher "
                "--min-size; with --model regimes, more --max-regimes)",
                file=sys.stderr,
            )
    write_text_atomic(output, text)
    if not quiet and isinstance(chosen, NcclCalibration):
        shown = ", ".join(f.protocol for f in chosen.fits)
        print(
            f"wrote {output}: {chosen.collective} in NCCL mode ({shown}; {chosen.channels} "
            f"channels), {chosen.ranks} workers on one flat switch (more ranks: --set workers=N; "
            "more nodes of this hardware: transitsim calibrate node, then --set nodes=N)",
            file=sys.stderr,
        )
    elif not quiet:
        first, last = chosen.regimes[regime].first_bytes, chosen.regimes[regime].last_bytes
        print(
            f"wrote {output}: {chosen.collective} regime {regime + 1} ({size_text(first)} .. "
            f"{size_text(last)}), {chosen.ranks} workers",
            file=sys.stderr,
        )
    return 0


def nccl_tests_command(
    files: list[Path] = typer.Argument(..., metavar="FILE...", help="nccl-tests outputs"),
    output: Path = OUTPUT,
    topology: str = TOPOLOGY,
    collective: str | None = typer.Option(
        None,
        "--collective",
        help=f"for files that do not name the test ({', '.join(COLLECTIVES)}); refused where "
        "a file names another",
    ),
    ranks: int | None = typer.Option(
        None,
        "--ranks",
        help="the rank count, for files without '#  Rank' lines (else read off busbw / algbw); "
        "refused where the Rank lines say otherwise",
    ),
    use: str | None = typer.Option(
        None,
        "--use",
        help="the collective whose network is written (default: all_reduce; the most ranks)",
    ),
    algo: str | None = ALGO,
    payload: str | None = PAYLOAD,
    holdout: list[str] = HOLDOUT,
    min_size: str | None = typer.Option(
        None,
        "--min-size",
        help="fit rows of at least this size (default: 64 KiB in the NCCL mode, 1 MiB for regimes)",
    ),
    max_regimes: int | None = typer.Option(
        None,
        "--max-regimes",
        help=f"--model regimes: size regimes allowed (1..{MAX_REGIMES}, default 2), 2 parameters "
        "each",
    ),
    place: str = PLACE,
    line_rate: str | None = LINE_RATE,
    name: str | None = NAME,
    model: str | None = typer.Option(
        None,
        "--model",
        help="nccl (the default for all_reduce, all_gather, reduce_scatter): the NCCL mode (LL, "
        "LL128, Simple chosen by size, channels), one file for every size; regimes (the "
        "default for broadcast, alltoall): alpha-beta per size regime, one in the file",
    ),
    no_holdout: bool = typer.Option(
        False,
        "--no-holdout",
        help="skip the second fit that leaves every second size out and predicts it",
    ),
    channels: int | None = typer.Option(
        None,
        "--channels",
        help=f"--model nccl: the channels of the network fitted (default {DEFAULT_CHANNELS})",
    ),
    max_protocols: int | None = typer.Option(
        None, "--max-protocols", help="--model nccl: protocols allowed (1: Simple .. 3: all)"
    ),
    csv: bool = CSV,
    json_: bool = JSON,
    quiet: bool = QUIET,
) -> int:
    """Fit a network to nccl-tests tables; print them beside its prediction; write it."""
    if model is not None and model not in ("regimes", "nccl"):
        raise TransitsimError(f"--model must be regimes or nccl, got {model!r}")
    assert NCCL_MIN_SIZE_BYTES == parse_bytes("64 KiB")
    fmt = output_format(csv, False, json_)
    check_writable_file(output, "network file")
    if any(path.exists() and path.resolve() == output.resolve() for path in files):
        raise TransitsimError(f"-o {output}: is one of the tables read; give another file")
    if collective is not None:
        collective = collective.replace("-", "_")
    given = {"--channels": channels, "--max-protocols": max_protocols, "--max-regimes": max_regimes}
    _check_applies(model, given, algo, [])  # before reading, where --model says
    tables = [read_nccl_tests(path, collective, ranks) for path in files]
    groups: dict[tuple[str, int], list[Table]] = {}
    for table in tables:  # one fit per collective and rank count: tables of one sweep, or repeats
        groups.setdefault((table.collective, table.ranks), []).append(table)
    # the NCCL mode where transitsim has the collective's schedule, else regimes
    models = {key: model or ("nccl" if key[0] in NCCL_COLLECTIVES else "regimes") for key in groups}
    _check_applies(model, given, algo, [(kind, models[kind, n]) for kind, n in groups])
    calibrations, accuracies = [], []
    for (kind, count), group in groups.items():
        chosen = models[kind, count]
        smallest = min_size or ("64 KiB" if chosen == "nccl" else "1 MiB")
        regimes = 2 if max_regimes is None else max_regimes
        settings = _fit_options(algo, holdout, smallest, regimes, place, line_rate, topology)
        settings["algo"] = settings["algo"] if kind == "all_reduce" else None
        if chosen == "nccl":
            settings.pop("max_regimes")
            settings.update(channels=DEFAULT_CHANNELS if channels is None else channels,
                            max_protocols=3 if max_protocols is None else max_protocols,
                            coefficient_cache={})  # fmt: skip
        fit = calibrate_nccl if chosen == "nccl" else calibrate
        final = fit(group, **settings)

        def refit(sizes: list[int], group=group, settings=settings, fit=fit):
            held = {**settings, "holdout": [*settings["holdout"], *sizes]}
            try:
                return fit(group, **held)
            except TransitsimError:
                return None  # too few rows left: no held-out figures

        calibrations.append(final)
        accuracies.append(accuracy(final, None if no_holdout else refit, kind, count))
    command = f"transitsim calibrate nccl-tests (transitsim {__version__})"
    return _finish(calibrations, accuracies, use, output, payload, name, command, fmt, quiet)


def _check_applies(
    model: str | None, given: dict[str, int | None], algo: str | None, fits: list[tuple[str, str]]
) -> None:
    """Refuse an option that applies to none of the fits, each (collective, model), rather than
    ignore it; with no fits yet (before reading), only what --model itself rules out."""
    models = {m for _, m in fits} or ({model} if model else {"nccl", "regimes"})
    wants = {"--channels": "nccl", "--max-protocols": "nccl", "--max-regimes": "regimes"}
    for option, value in given.items():
        if value is not None and wants[option] not in models:
            held = ", ".join(sorted({kind for kind, _ in fits}))
            why = f"not --model {model}" if model else f"and {held} is fitted with the other"
            raise TransitsimError(f"{option} applies to --model {wants[option]} only, {why}")
    if algo is not None and fits and not any(kind == "all_reduce" for kind, _ in fits):
        held = ", ".join(sorted({kind for kind, _ in fits}))
        raise TransitsimError(f"--algo applies to all_reduce only; the tables hold {held}")


def testbed_command(
    table_path: Path = typer.Argument(..., metavar="TABLE", help="the testbed's measured.parquet"),
    output: Path = OUTPUT,
    rate: str | None = typer.Option(
        None, "--rate", help="the shaped rate to calibrate (needed when the table has several)"
    ),
    workers: int | None = typer.Option(None, "--workers", help="worker count (default: largest)"),
    collective: str = typer.Option("all_reduce", "--collective", help="all_reduce or all_gather"),
    algo: str | None = ALGO,
    payload: str | None = PAYLOAD,
    holdout: list[str] = HOLDOUT,
    min_size: str = typer.Option("0 B", "--min-size", help="fit rows of at least this size"),
    max_regimes: int = MAX_REGIMES_OPTION,
    line_rate: str | None = LINE_RATE,
    name: str | None = NAME,
    csv: bool = CSV,
    json_: bool = JSON,
    quiet: bool = QUIET,
) -> int:
    """Fit a network to the testbed's own measured table, the same way as nccl-tests'."""
    fmt = output_format(csv, False, json_)
    check_writable_file(output, "network file")
    collective = collective.replace("-", "_")
    if collective not in TESTBED_COLLECTIVES:
        raise TransitsimError(
            f"--collective: the testbed measures {', '.join(TESTBED_COLLECTIVES)}"
        )
    tables = read_testbed_tables(table_path)
    rates = sorted({r for r, _ in tables})
    if rate is None and len(rates) > 1:
        shown = ", ".join(f"{r / 1e6:g} Mb/s" for r in rates)
        raise TransitsimError(f"{table_path}: holds several rates ({shown}); give --rate")
    wanted = parse_rate_bps(rate) if rate is not None else rates[0]
    chosen = [
        t for r, t in tables if abs(r - wanted) <= 1e-9 * wanted and t.collective == collective
    ]
    if not chosen:
        raise TransitsimError(f"{table_path}: no {collective} measured at {wanted / 1e6:g} Mb/s")
    counts = sorted(t.ranks for t in chosen)
    count = workers if workers is not None else counts[-1]
    chosen = [t for t in chosen if t.ranks == count]
    if not chosen:
        raise TransitsimError(f"--workers {count}: measured with {', '.join(map(str, counts))}")
    options = _fit_options(algo, holdout, min_size, max_regimes, "out", line_rate, "switch")
    calibrations = [calibrate(chosen, **options)]
    command = f"transitsim calibrate testbed (transitsim {__version__})"
    return _finish(calibrations, [None], None, output, payload, name, command, fmt, quiet)


def _fit_options(algo, holdout, min_size, max_regimes, place, line_rate, topology) -> dict:
    if not 1 <= max_regimes <= MAX_REGIMES:
        raise TransitsimError(f"--max-regimes must lie in 1..{MAX_REGIMES}, got {max_regimes}")
    if place not in PLACES:
        raise TransitsimError(f"--place must be one of {', '.join(PLACES)}, got {place!r}")
    return {
        "topology": topology.replace("-", "_"),
        "algo": _algo(algo),
        "holdout": [parse_bytes(h) for h in holdout],
        "min_size": parse_bytes(min_size),
        "max_regimes": max_regimes,
        "place": place,
        "line_bps": None if line_rate is None else parse_rate_bps(line_rate),
    }


def _node_pair(errors) -> str:
    return "-" if errors is None else f"{errors.worst * 100:.1f} % / {errors.median * 100:.1f} %"


def node_command(
    file: Path = typer.Argument(..., metavar="FILE", help="one nccl-tests output"),
    output: Path = typer.Option(..., "--output", "-o", help="the network YAML to write"),
    gpus_per_node: int | None = typer.Option(
        None, "--gpus-per-node", help="GPUs a node (default: the Rank lines' ranks a host, else 1)"
    ),
    gpu: str | None = typer.Option(
        None,
        "--gpu",
        help=f"NCCL's GPU generation: {', '.join(GPUS)} (default: the Rank lines' GPUs, "
        "else hopper)",
    ),
    cpu: str = typer.Option("intel", "--cpu", help="the hosts' CPU vendor: intel or amd"),
    collective: str | None = typer.Option(
        None, "--collective", help="for a file that does not name its test"
    ),
    ranks: int | None = typer.Option(None, "--ranks", help="for a file without Rank lines"),
    no_holdout: bool = typer.Option(False, "--no-holdout", help="skip the held-out refit"),
    name: str | None = typer.Option(None, "--name", help="the network's name"),
    quiet: bool = QUIET,
) -> int:
    """Fit the node (NIC and NVLink rates and latencies) to an nccl-tests table; write it."""
    if gpu is not None and gpu not in GPUS:
        raise TransitsimError(f"--gpu must be one of {', '.join(GPUS)}, got {gpu!r}")
    if cpu not in ("intel", "amd"):
        raise TransitsimError(f"--cpu must be intel or amd, got {cpu!r}")
    check_writable_file(output, "network file")
    if file.exists() and output.exists() and file.resolve() == output.resolve():
        raise TransitsimError(f"-o {output}: is the table read; give another file")
    table = read_nccl_tests(file, collective and collective.replace("-", "_"), ranks)
    if gpu is None:
        gpu = gpu_generation(table.gpu_names)
        names = ", ".join(sorted(table.gpu_names)) or "none"
        if gpu is None:
            gpu = "hopper"
            print(f"note: no one GPU generation in the Rank lines ({names}): took hopper (--gpu)")
        else:
            print(f"gpu: {gpu}, from the Rank lines ({names})")
    options = {"gpus_per_node": gpus_per_node, "gpu": gpu, "cpu": cpu}
    final = calibrate_node(table, **options)
    if gpus_per_node is None and gpus_per_host(table) is None and table.ranks > 1:
        print(
            "note: no Rank lines give the same GPU count on every host: took 1 GPU a node "
            f"({table.ranks} nodes); give --gpus-per-node if the nodes hold more"
        )

    def refit(sizes: list[int]):
        try:
            return calibrate_node(table, holdout=sizes, **options)
        except TransitsimError:
            return None

    found = accuracy(final, None if no_holdout else refit, table.collective, table.ranks)
    print(f"{'size':>12}  {'measured us':>12}  {'predicted us':>12}  {'error':>8}  ran")
    for point, predicted in zip(final.points, final.predicted_s, strict=True):
        error = predicted / point.measured_s - 1
        print(
            f"{point.row.size_bytes:>12}  {point.measured_s * 1e6:>12.1f}  "
            f"{predicted * 1e6:>12.1f}  {error * 100:>+7.1f}%  {point.role}"
        )
    values = ", ".join(
        f"{k} {v / 1e9:.4g} Gb/s" if k.endswith("bps") else f"{k} {v * 1e6:.4g} us"
        for k, v in final.values.items()
    )
    print(f"node: {final.nodes} node(s) x {final.gpus_per_node} GPU(s); fitted {values}")
    print(
        f"fitted {_node_pair(found.fitted)} (worst / median); "
        f"held out {_node_pair(found.held_out)}; "
        f"alpha-beta fitted {_node_pair(found.alpha_beta_fitted)}, held out "
        f"{_node_pair(found.alpha_beta_held_out)}"
    )
    command = f"transitsim calibrate node (transitsim {__version__})"
    write_text_atomic(output, node_yaml(final, name or f"node-{file.stem}", command))
    if not quiet:
        print(f"wrote {output}: scale with --set nodes=N", file=sys.stderr)
    return 0


def register(app: typer.Typer) -> None:
    """Add `transitsim calibrate ...` to the main app."""
    calibrate_app = typer.Typer(
        help="Fit a network to measured collective tables (nccl-tests, the testbed).",
        no_args_is_help=True,
    )
    calibrate_app.command("nccl-tests")(nccl_tests_command)
    calibrate_app.command("testbed")(testbed_command)
    calibrate_app.command("node")(node_command)
    app.add_typer(calibrate_app, name="calibrate")
