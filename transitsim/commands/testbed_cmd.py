"""`transitsim testbed run|compare|down|ttl|ttl-compare`: gloo on a real shaped network, simulated.

`run` builds the namespace testbed, measures, tears it down (also on Ctrl-C and SIGTERM),
replays every point through transitsim and prints the comparison. `compare` redoes only the
simulation from a measured table (no root, no torch). `down` removes what killed runs left.
`ttl` trains A, B, C and E′ on the testbed and holds their measured time-to-loss against
transitsim's prediction, made from separate compute runs; `ttl-compare` redoes only the
prediction.
"""

import importlib.util
import json
from pathlib import Path

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from transitsim.base.atomic import atomic_path, check_writable_folder
from transitsim.base.errors import TransitsimError
from transitsim.testbed import json_ready, percent, rate_label, size_label

TTL_TARGETS = "3.3,3.1"
DEFAULT_SIZES = "64 KiB,256 KiB,1 MiB,4 MiB,16 MiB,64 MiB"
DEFAULT_CALIBRATE = "64 KiB,4 MiB"
CALIBRATE_HELP = (
    "the (at most two) sizes the endpoint is fitted on; with --fit alpha, the one size alpha is"
)
FIT_HELP = "endpoint: HostSpec's o and rate per rate (issue 25); alpha: the legacy one alpha"
TABLE_COLUMNS = [
    "rate_bps",
    "layout",
    "wan_rate_bps",
    "collective",
    "workers",
    "bytes",
    "repeats",
    "repeat_stop",
    "median_s",
    "spread",
    "load_start",
    "load_end",
    "simulated_s",
    "rel_error",
    "fitted",
    "alpha_s",
    "host_per_transfer_s",
    "host_rate_bps",
    "qdisc_efficiency",
    "latency_s",
    "gloo_algorithm",
]


def _write_parquet(frame: pd.DataFrame, path: Path) -> None:
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def _config_label(rate: float, layout_sites: int, wan: float) -> str:
    if layout_sites == 1:
        return rate_label(rate)
    return f"{rate_label(rate)}, 2 sites, WAN {rate_label(wan)}"


def _endpoint_words(group: pd.DataFrame) -> str:
    """The fitted parameters of one configuration, as the table prints them."""
    row = group.iloc[0]
    if float(row["alpha_s"]) > 0 or not bool(row["host_fitted"]):
        return f"alpha {row['alpha_s'] * 1e3:.3f} ms"
    rate = float(row["host_rate_bps"])
    shared = "none" if rate == float("inf") else rate_label(rate)
    return f"o {row['host_per_transfer_s'] * 1e3:.3f} ms, rate {shared}"


def report(table: pd.DataFrame, out: Path | None) -> dict:
    """Print the comparison and its summary; write comparison.{parquet,csv}, report.html."""
    from transitsim.testbed.model import summary, wan_latency_s

    console = Console(width=max(Console().width, 120))
    grid = Table(title="gloo collectives on the testbed: measured vs transitsim")
    for name in ("rate", "layout", "collective", "P", "bytes", "repeats", "measured s", "spread",
                 "load", "simulated s", "error", ""):  # fmt: skip
        left = name in ("collective", "layout", "")
        grid.add_column(name, justify="left" if left else "right")
    for row in table.itertuples():
        loads = [v for v in (row.load_start, row.load_end) if v == v]  # NaN: not recorded
        load = max(loads) if loads else float("nan")
        grid.add_row(
            rate_label(row.rate_bps),
            row.layout,
            row.collective,
            str(row.workers),
            size_label(row.bytes),
            str(row.repeats),
            f"{row.median_s:.4f}",
            f"{row.spread:.1%}",
            "?" if load != load else f"{load:.2f}",
            f"{row.simulated_s:.4f}",
            f"{row.rel_error:+.1%}",
            "fitted" if row.fitted else "",
        )
    console.print(grid)
    per_rate = Table(title="per configuration: parameters and |error| over the predicted points")
    for name in ("configuration", "efficiency (tbf counters)", "latency (RTT/4)", "WAN latency",
                 "endpoint (fitted)", "points", "median |error|", "worst |error|"):  # fmt: skip
        per_rate.add_column(name, justify="right")
    figures = {"overall": summary(table), "per_rate": {}, "per_layout": {}}
    for (sites, rate, wan), group in table.groupby(["sites", "rate_bps", "wan_rate_bps"]):
        s = summary(group)
        label = _config_label(rate, int(sites), wan)
        wan_latency = wan_latency_s(group["rtt_s"].iloc[0], group["rtt_wan_s"].iloc[0])
        figures["per_rate"][label] = {
            **s,
            "alpha_s": float(group["alpha_s"].iloc[0]),
            "host_per_transfer_s": float(group["host_per_transfer_s"].iloc[0]),
            "host_rate_bps": float(group["host_rate_bps"].iloc[0]),
            "efficiency": float(group["qdisc_efficiency"].mean()),
            "latency_s": float(group["latency_s"].iloc[0]),
            "wan_latency_s": float(wan_latency) if sites == 2 else None,
        }
        per_rate.add_row(
            label,
            f"{group['qdisc_efficiency'].mean():.4f}",
            f"{group['latency_s'].iloc[0] * 1e6:.1f} us",
            f"{wan_latency * 1e6:.1f} us" if sites == 2 else "–",
            _endpoint_words(group),
            f"{s['predicted_points']} (+{s['points'] - s['predicted_points']} fitted)",
            percent(s["median_abs_error"]),
            percent(s["worst_abs_error"]),
        )
    console.print(per_rate)
    by_layout = Table(title="per layout: |error| over the predicted points")
    for name in ("layout", "points", "median |error|", "worst |error|", "run began > 1.5",
                 "other work running", "load unknown"):  # fmt: skip
        by_layout.add_column(name, justify="right")
    for name, group in table.groupby("layout", sort=False):
        s = summary(group)
        figures["per_layout"][name] = s
        by_layout.add_row(name, str(s["predicted_points"]), percent(s["median_abs_error"]),
                          percent(s["worst_abs_error"]), str(s["points_loaded"]),
                          str(s["points_foreign"]), str(s["points_load_unknown"]))  # fmt: skip
    console.print(by_layout)
    predicted = table[~table["fitted"]]
    by_workers = predicted.assign(abs_error=predicted["rel_error"].abs()).pivot_table(
        index="rate_bps", columns="workers", values="abs_error", aggfunc="median"
    )
    split = Table(title="median |error| of the predicted points by rate and workers")
    split.add_column("rate", justify="right")
    for workers in by_workers.columns:
        split.add_column(f"P = {workers}", justify="right")
    for rate, values in by_workers.iterrows():
        split.add_row(rate_label(rate), *(percent(v) for v in values))
    console.print(split)
    o = figures["overall"]
    console.print(
        f"all rates: {o['predicted_points']} predicted points, median |error| "
        f"{percent(o['median_abs_error'])}, worst {percent(o['worst_abs_error'])}"
    )
    began = table.get("loadavg_1m_at_start")
    run_load = ""
    if began is not None and pd.api.types.is_float_dtype(began):
        value = float(began.max())
        if 0 <= value < 1e4:  # the run-wide figure: the load before the run started
            figures["overall"]["run_loadavg_1m_at_start"] = value
            run_load = f"the run began at a 1-minute load average of {value:.2f}; "
    point_max = o["point_load_max"]
    console.print(
        f"load: {run_load}{o['points_loaded']} of {o['points']} points from a run begun above "
        f"{o['load_limit']:g}; {o['points_foreign']} with another process's thread running at "
        f"their start or end; {o['points_load_unknown']} with no load recorded"
        + (
            ""
            if point_max != point_max
            else f"; the points' own 1-minute load average (this run's ranks included) at most "
            f"{point_max:.2f}"
        )  # fmt: skip
    )
    if out is not None:
        from transitsim.testbed.plot import write_page

        _write_parquet(table, out / "comparison.parquet")
        with atomic_path(out / "comparison.csv") as tmp:
            table[TABLE_COLUMNS].to_csv(tmp, index=False, float_format="%.6g")
        with atomic_path(out / "summary.json") as tmp:
            tmp.write_text(json.dumps(json_ready(figures), indent=2) + "\n")
        fitted = ", ".join(
            size_label(int(b)) for b in sorted(set(table.loc[table["fitted"], "bytes"]))
        )
        what = "alpha" if table["alpha_s"].gt(0).any() else "the endpoint (o, rate)"
        note = (
            "Markers: measured median (bars: interquartile range); lines: transitsim on the "
            "same network (one switch, or two datacentres and the WAN; host links at the tbf "
            f"rate, measured efficiency and latency, {what} fitted on the {fitted} points of "
            "each configuration)."
        )
        write_page(out / "report.html", table, note, figures)
        console.print(f"wrote {out}/comparison.parquet, comparison.csv, summary.json, report.html")
    return figures


def run_command(
    rates: str = typer.Option("50 Mb/s,200 Mb/s,1 Gb/s", "--rates", help="tbf rates"),
    workers: str = typer.Option("2,4,8", "--workers", help="worker counts (one rank per host)"),
    sizes: str = typer.Option(DEFAULT_SIZES, "--sizes", help="payload per worker"),
    collectives: str = typer.Option("all-reduce,all-gather", "--collectives"),
    calibrate: str = typer.Option(DEFAULT_CALIBRATE, "--calibrate", help=CALIBRATE_HELP),
    fit: str = typer.Option("endpoint", "--fit", help=FIT_HELP),
    call_limit: float = typer.Option(3.0, "--call-limit", help="skip points longer than this (s)"),
    budget: float = typer.Option(6.0, "--budget", help="most seconds of timed calls per point"),
    min_repeats: int = typer.Option(5, "--min-repeats"),
    max_repeats: int = typer.Option(60, "--max-repeats"),
    target_spread: float = typer.Option(
        0.05, "--target-spread", help="repeat until IQR/median is under this (or a cap)"
    ),
    warmup: int = typer.Option(2, "--warmup"),
    sites: int = typer.Option(1, "--sites", help="2: two switches joined by a shaped WAN"),
    wan_rate: str | None = typer.Option(None, "--wan-rate", help="the WAN's tbf rate (--sites 2)"),
    wan_queue: str | None = typer.Option(
        None, "--wan-queue", help="the WAN tbf's queue bound, tbf `latency` (default 50 ms)"
    ),
    out: Path = typer.Option(Path("out/testbed"), "--output", "-o"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No per-point progress lines."),
) -> int:
    """Build the testbed, measure gloo collectives, tear it down, compare with transitsim."""
    from transitsim.testbed import flags

    grid = flags.grid(rates, workers, sizes, collectives, calibrate, call_limit, budget,
                      (min_repeats, max_repeats), warmup, target_spread, sites,
                      wan_rate, wan_queue)  # fmt: skip
    if fit not in ("endpoint", "alpha") or (fit == "alpha" and len(grid.calibration_sizes) > 1):
        raise TransitsimError("--fit: endpoint (one or two --calibrate sizes) or alpha (one)")
    check_writable_folder(out)
    if importlib.util.find_spec("torch") is None:
        raise TransitsimError("transitsim testbed run needs torch: pip install -e '.[train]'")
    from transitsim.testbed.measure import measure_grid
    from transitsim.testbed.model import compare
    from transitsim.testbed.netns import preflight
    from transitsim.testbed.tables import check_measured

    preflight()
    if not quiet:
        print(f"estimated duration: at most {grid.estimate_s() / 60:.1f} min (every point to its "
              "repeat or time cap; planning model of measure.planning_s)", flush=True)  # fmt: skip
    measured = measure_grid(
        grid.rates_bps,
        grid.workers,
        grid.sizes,
        grid.collectives,
        call_limit_s=grid.call_limit_s,
        budget_s=grid.budget_s,
        repeats=grid.repeats,
        warmup=grid.warmup,
        target_spread=grid.target_spread,
        sites=grid.sites,
        wan_rate_bps=grid.wan_rate_bps,
        wan_queue_s=grid.wan_queue_s,
        log=(lambda line: None) if quiet else (lambda line: print(line, flush=True)),
    )
    _write_parquet(measured, out / "measured.parquet")
    try:
        checked = check_measured(measured, out / "measured.parquet")
    except TransitsimError as exc:
        raise TransitsimError(f"{exc} (the measurement is kept there)") from None
    report(compare(checked, grid.calibration_sizes, fit), out)
    return 0


def compare_command(
    measured: Path = typer.Argument(..., help="measured.parquet from `testbed run`"),
    calibrate: str = typer.Option(DEFAULT_CALIBRATE, "--calibrate", help=CALIBRATE_HELP),
    fit: str = typer.Option("endpoint", "--fit", help=FIT_HELP),
    out: Path | None = typer.Option(None, "--output", "-o", help="write the comparison here"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Accepted: prints the comparison."),
) -> int:
    """Replay a measured table through transitsim and print the comparison (no root needed)."""
    from transitsim.testbed.flags import calibration_sizes
    from transitsim.testbed.model import compare
    from transitsim.testbed.tables import check_measured

    if fit not in ("endpoint", "alpha"):
        raise TransitsimError(f"--fit: expected endpoint or alpha, got {fit!r}")
    sizes = calibration_sizes(calibrate, 1 if fit == "alpha" else 2)
    if out is not None:
        check_writable_folder(out)
    if not measured.is_file():
        raise TransitsimError(f"no measured table at {measured}")
    try:
        frame = pd.read_parquet(measured)
    except Exception as exc:  # pyarrow raises several types for a non-Parquet file
        raise TransitsimError(f"{measured}: not a Parquet table ({type(exc).__name__})") from None
    report(compare(check_measured(frame, measured), sizes, fit), out)
    return 0


def down_command(
    everything: bool = typer.Option(False, "--all", help="also live runs' namespaces"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing but errors."),
) -> int:
    """Remove what killed testbed runs recorded (their creating process is gone); --all also
    live runs'. A namespace no run recorded is never touched, whatever its name."""
    from transitsim.testbed.netns import cleanup_leftovers, preflight

    preflight()
    removed = cleanup_leftovers(everything)
    if not quiet:
        print(f"removed {len(removed)} namespaces" + (f": {' '.join(removed)}" if removed else ""))
    return 0


def _variant(text: str) -> str:
    from transitsim.testbed.ttl_run import VARIANTS

    name = "E'" if text in ("EP", "Ep", "E'") else text
    if name not in VARIANTS:
        raise TransitsimError(f"--variants: expected some of {', '.join(VARIANTS)}, got {text!r}")
    return name


def ttl_report(
    folder: Path, targets: list[float], write: bool, parts: bool = False
) -> pd.DataFrame:
    """Predict every recorded run's time to each target; print the table; write it."""
    from transitsim.testbed.tables import check_measured, check_runs
    from transitsim.testbed.ttl_model import compare
    from transitsim.testbed.ttl_table import print_table, write_table

    runs_path, calib_path = folder / "runs.csv", folder / "calibration.parquet"
    for path in (runs_path, calib_path):
        if not path.is_file():
            raise TransitsimError(f"{folder}: no {path.name} (not a `testbed ttl` folder)")
    try:
        runs = pd.read_csv(runs_path)
        calibration = pd.read_parquet(calib_path)
    except Exception as exc:  # pandas and pyarrow raise many types for a damaged file
        raise TransitsimError(f"{folder}: unreadable runs.csv or calibration.parquet "
                              f"({type(exc).__name__})") from None  # fmt: skip
    runs = check_runs(runs, folder, runs_path)
    calibration = check_measured(calibration, calib_path)
    table = compare(folder, runs, calibration, targets)
    print_table(table)
    if parts:
        from transitsim.testbed.ttl_parts import parts_table, print_parts

        print_parts(parts_table(folder, runs), table)
    if write:
        write_table(table, folder)
    return table


def ttl_command(
    rates: str = typer.Option("50 Mb/s,400 Mb/s", "--rates", help="tbf rates"),
    variants: str = typer.Option("A,B,C,E'", "--variants", help="of A, B, C, E' (EP)"),
    targets: str = typer.Option(TTL_TARGETS, "--targets", help="validation losses"),
    hosts: int = typer.Option(4, "--hosts", help="one rank (one worker) per host, 2..8"),
    steps: int = typer.Option(400, "--steps", help="optimiser steps per run"),
    compute_steps: int = typer.Option(
        100, "--compute-steps", help="steps of each variant's compute run (unshaped), >= 3"
    ),
    seed: int = typer.Option(0, "--seed"),
    sites: int = typer.Option(1, "--sites", help="2: the hosts split over two sites"),
    wan_rate: str | None = typer.Option(
        None, "--wan-rate", help="the WAN's tbf rate (--sites 2), below --rates"
    ),
    out: Path = typer.Option(Path("out/testbed-ttl"), "--output", "-o"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No per-run progress lines."),
) -> int:
    """Train A, B, C, E' on the testbed (each first on the unshaped testbed for its compute);
    time-to-loss measured vs transitsim's prediction. With --sites 2 the hosts are split over
    two sites and every exchange crosses the WAN."""
    from transitsim.testbed import flags
    from transitsim.testbed.netns import preflight
    from transitsim.testbed.ttl_run import Plan, measure

    rate_list = flags.parse_list(rates, flags.rate, "rates")
    variant_list = flags.parse_list(variants, _variant, "variants")
    target_list = flags.parse_list(targets, flags.target, "targets")
    if not 2 <= hosts <= 8 or not 1 <= steps <= 100_000:
        raise TransitsimError("need 2 <= --hosts <= 8 and 1 <= --steps <= 100000")
    if not 3 <= compute_steps <= 100_000:
        raise TransitsimError(f"--compute-steps: need 3..100000, got {compute_steps}")
    flags.seed(seed)
    wan_bps = flags.ttl_sites(sites, wan_rate, hosts, rate_list)
    check_writable_folder(out)
    if importlib.util.find_spec("torch") is None:
        raise TransitsimError("transitsim testbed ttl needs torch: pip install -e '.[train]'")
    preflight()
    plan = Plan(rate_list, variant_list, hosts=hosts, steps=steps, seed=seed,
                compute_steps=compute_steps, sites=sites, wan_rate_bps=wan_bps)  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    runs, calibration = measure(plan, out, (lambda line: None) if quiet else print)
    _write_parquet(calibration, out / "calibration.parquet")
    with atomic_path(out / "runs.csv") as tmp:
        runs.to_csv(tmp, index=False)
    ttl_report(out, target_list, write=True)
    return 0


def ttl_compare_command(
    folder: Path = typer.Argument(..., help="a folder `testbed ttl` wrote"),
    targets: str = typer.Option(TTL_TARGETS, "--targets", help="validation losses"),
    write: bool = typer.Option(False, "--write", help="also rewrite time_to_loss.csv there"),
    parts: bool = typer.Option(
        False, "--parts", help="also each run's plain-step parts beside its compute run's"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Accepted: prints the table."),
) -> int:
    """Predict the recorded runs' time-to-loss again and print the table (no root, no torch)."""
    from transitsim.testbed import flags

    ttl_report(folder, flags.parse_list(targets, flags.target, "targets"), write, parts)
    return 0


def register(app: typer.Typer) -> None:
    """Add `transitsim testbed run|compare|down`."""
    group = typer.Typer(
        help="A real network of namespaces: gloo collectives measured, and simulated.",
        no_args_is_help=True,
    )
    group.command("run")(run_command)
    group.command("compare")(compare_command)
    group.command("down")(down_command)
    group.command("ttl")(ttl_command)
    group.command("ttl-compare")(ttl_compare_command)
    app.add_typer(group, name="testbed")
