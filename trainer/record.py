"""Record the project's traces: every run of the published grid (spec §1.3) at one preset.

Each run is a separate `python -m trainer` process, so a run that is killed resumes from its
checkpoint when this script is started again, and completed traces are skipped.

    python -m trainer.record --preset shakespeare-mini -o traces/shakespeare-mini --jobs 2
    python -m trainer.record --preset shakespeare -o traces/shakespeare --grid next-step --jobs 1
    python -m trainer.record --preset shakespeare-mini -o traces/shakespeare-mini --grid local-sgd
    python -m trainer.record --preset shakespeare-mini -o traces/shakespeare-mini-sites \
        --grid local-sgd-sites --jobs 1
"""

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trainer.cli import threads_arg
from trainer.config import PRESETS

# (label, trainer options, seeds): the grid of the recorded-traces issue.
CORE_SEEDS = (0, 1, 2)
E_SETTINGS = (("8", "8"), ("6", "8"), ("10", "8"), ("12", "8"), ("8", "4"), ("8", "12"))


def grid(fs_every: int) -> list[tuple[str, list[str], tuple[int, ...]]]:
    """Every run to record; `fs_every` is the full-scale re-set interval of the repaired E runs.

    The issue's grid, plus seeds 1 and 2 for E sent (ENOB 8, 8 planes), the E' modes and F random,
    whose comparisons rest on one seed in the published experiment."""
    runs: list[tuple[str, list[str], tuple[int, ...]]] = [
        ("A", ["--variant", "A"], CORE_SEEDS),
        ("B top-k 2d64", ["--variant", "B"], CORE_SEEDS),
        ("C low 1d256", ["--variant", "C", "--chunk-mode", "1d", "--chunk", "256"], CORE_SEEDS),
        ("C low 2d64", ["--variant", "C", "--chunk-mode", "2d", "--chunk", "64"], CORE_SEEDS),
        ("D calibrated 2d64", ["--variant", "D"], CORE_SEEDS),
        ("C low 1d64", ["--variant", "C", "--chunk-mode", "1d", "--chunk", "64"], (0,)),
        ("F zigzag 2d64", ["--variant", "F", "--band", "zigzag"], (0,)),
        ("F high 2d64", ["--variant", "F", "--band", "high"], (0,)),
        ("F random 2d64", ["--variant", "F", "--band", "random"], CORE_SEEDS),
    ]
    for enob, planes in E_SETTINGS:
        optics = ["--variant", "E", "--enob", enob, "--planes", planes]
        runs.append(
            (
                f"E exact enob{enob} p{planes}",
                [*optics, "--feedback", "exact", "--fs-every", "0"],
                (0,),
            )
        )
        runs.append(
            (
                f"E sent enob{enob} p{planes} fs{fs_every}",
                [*optics, "--feedback", "sent", "--fs-every", str(fs_every)],
                CORE_SEEDS if (enob, planes) == ("8", "8") else (0,),
            )
        )
    runs.append(
        (
            "E sent enob8 p8 fs fixed",
            [
                "--variant",
                "E",
                "--enob",
                "8",
                "--planes",
                "8",
                "--feedback",
                "sent",
                "--fs-every",
                "0",
            ],
            (0,),
        )
    )
    runs.append(
        (
            "E perfect optics",
            ["--variant", "E", "--enob", "none", "--planes", "none", "--feedback", "sent"],
            (0,),
        )
    )
    for mode in ("loopback", "exact", "mean"):
        runs.append(
            (
                f"E' {mode} enob8 p8",
                [
                    "--variant",
                    "E'",
                    "--enob",
                    "8",
                    "--planes",
                    "8",
                    "--feedback",
                    mode,
                    "--fs-every",
                    str(fs_every),
                ],
                CORE_SEEDS,
            )
        )
    return runs


def cpu_check_grid(fs_every: int) -> list[tuple[str, list[str], tuple[int, ...]]]:
    """The seven runs of the published TinyShakespeare optics check (spec §14.5)."""
    optics = ["--variant", "E", "--planes", "8"]
    fixed, reset = ["--fs-every", "0"], ["--fs-every", str(fs_every)]
    return [
        ("C exact band 1d256", ["--variant", "C", "--chunk-mode", "1d", "--chunk", "256"], (0,)),
        ("E fixed fb-exact", [*optics, "--enob", "8", "--feedback", "exact", *fixed], (0,)),
        ("E agc fb-exact", [*optics, "--enob", "8", "--feedback", "exact", *reset], (0,)),
        ("E agc fb-exact enob12", [*optics, "--enob", "12", "--feedback", "exact", *reset], (0,)),
        (
            "E agc fb-exact no noise",
            [*optics, "--enob", "none", "--feedback", "exact", *reset],
            (0,),
        ),
        ("E agc fb-sent", [*optics, "--enob", "8", "--feedback", "sent", *reset], (0,)),
        ("E fixed fb-sent", [*optics, "--enob", "8", "--feedback", "sent", *fixed], (0,)),
    ]


# Issue 14's next step (deck slide 12): G selections and E with feedback of the values sent.
G_RUNS = (("rotating", 1), ("recal", 10), ("subspace", 50), ("rotating", 50), ("recal", 100))
NEXT_E_ENOBS = ("8", "10", "12")


def next_step_grid(fs_every: int) -> list[tuple[str, list[str], tuple[int, ...]]]:
    """Issue 14's runs at 3 seeds, ordered so seed 0 of every new configuration (G, then E at
    ENOB 10 and 12) comes first, then seed 1, then seed 2; the published core (B, C 1-D 256, D,
    F random), which an earlier grid records under the same names, comes last and is skipped
    where complete."""
    new: list[tuple[str, list[str]]] = [
        (
            f"G {selection} r{every}",
            ["--variant", "G", "--band", selection, "--select-every", str(every)],
        )
        for selection, every in G_RUNS
    ]
    for enob in NEXT_E_ENOBS:
        new.append(
            (
                f"E sent enob{enob} p8 fs{fs_every}",
                [
                    *("--variant", "E", "--enob", enob, "--planes", "8"),
                    *("--feedback", "sent", "--fs-every", str(fs_every)),
                ],
            )
        )
    core = [
        ("B top-k 2d64", ["--variant", "B"]),
        ("C low 1d256", ["--variant", "C", "--chunk-mode", "1d", "--chunk", "256"]),
        ("D calibrated 2d64", ["--variant", "D"]),
        ("F random 2d64", ["--variant", "F", "--band", "random"]),
    ]
    runs = [(label, options, (seed,)) for seed in CORE_SEEDS for label, options in new]
    return runs + [(label, options, CORE_SEEDS) for label, options in core]


# Issue 26: the local-SGD family (docs/local-sgd.md), each at its variant's defaults but H.
LOCAL_SGD_RUNS: tuple[tuple[str, list[str]], ...] = (
    ("H h10", ["--variant", "H", "--set", "inner_steps=10"]),
    ("H h50", ["--variant", "H", "--set", "inner_steps=50"]),
    ("H-s h50 p5 t5", ["--variant", "H-s"]),
    ("L h10 k64 2d64", ["--variant", "L"]),
)


def local_sgd_grid(fs_every: int) -> list[tuple[str, list[str], tuple[int, ...]]]:
    """H every 10 and every 50 steps, H-s and L, 3 seeds; seed 0 of each first, then 1, 2; then
    AdamW's 3 seeds, the baseline findings (h) compares with (skipped where recorded already)."""
    del fs_every  # no optics here
    runs = [(label, options, (seed,)) for seed in CORE_SEEDS for label, options in LOCAL_SGD_RUNS]
    return runs + [("A", ["--variant", "A"], CORE_SEEDS)]


# Issue 26, item 2: a replica per site (docs/local-sgd.md, "Replicas and sites"). Two sites of
# the preset's workers each, so tokens per step stay the preset's: workers x batch is kept.
SITES = 2


def local_sgd_sites_grid(fs_every: int) -> list[tuple[str, list[str], tuple[int, ...]]]:
    """The local-SGD runs with one replica per site (SITES of them) instead of one per worker;
    the batch is set where the command lines are made (`site_options`), from the preset."""
    del fs_every  # no optics here
    return [(label, options, (seed,)) for seed in CORE_SEEDS for label, options in LOCAL_SGD_RUNS]


def site_options(preset: str) -> list[str]:
    """`--set workers=SITES --set batch=B`, B = the preset's workers x batch / SITES."""
    values = PRESETS[preset]
    tokens, sites = values["workers"] * values["batch"], SITES
    if tokens % sites:
        raise SystemExit(
            f"--grid local-sgd-sites: {tokens} sequences a step do not split {sites} ways"
        )
    return ["--set", f"workers={sites}", "--set", f"batch={tokens // sites}"]


GRIDS = {
    "issue": grid,
    "cpu-check": cpu_check_grid,
    "next-step": next_step_grid,
    "local-sgd": local_sgd_grid,
    "local-sgd-sites": local_sgd_sites_grid,
}


def commands(
    preset: str, out: Path, fs_every: int, threads: int, grid_name: str = "issue"
) -> list[tuple[str, list[str]]]:
    """One `python -m trainer` command line per (configuration, seed)."""
    result = []
    extra = site_options(preset) if grid_name == "local-sgd-sites" else []
    for label, options, seeds in GRIDS[grid_name](fs_every):
        for seed in seeds:
            argv = [sys.executable, "-m", "trainer", "--preset", preset, *options, *extra]
            argv += ["--seed", str(seed), "--threads", str(threads or "auto"), "-o", str(out)]
            argv += ["--quiet"]
            result.append((f"{label} s{seed}", argv))
    return result


def run_one(label: str, argv: list[str], log_dir: Path) -> tuple[str, int, float]:
    start = time.perf_counter()
    log = log_dir / (label.replace(" ", "_").replace("'", "p") + ".log")
    with log.open("a") as handle:
        code = subprocess.call(argv, stdout=handle, stderr=subprocess.STDOUT)
    return label, code, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="shakespeare-mini")
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel")
    parser.add_argument(
        "--threads", type=threads_arg, default=1, help="torch threads per run, or auto (default: 1)"
    )
    parser.add_argument("--fs-every", type=int, default=50)
    parser.add_argument("--grid", choices=sorted(GRIDS), default="issue")
    parser.add_argument("--only", default="", help="run only labels containing this text")
    parser.add_argument("--list", action="store_true", help="print the runs and exit")
    args = parser.parse_args()
    todo = [
        (label, argv)
        for label, argv in commands(args.preset, args.out, args.fs_every, args.threads, args.grid)
        if args.only in label
    ]
    if args.list:
        for label, argv in todo:
            print(f"{label:32s} {' '.join(argv[1:])}")
        return
    log_dir = args.out / ".logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for label, code, seconds in pool.map(lambda item: run_one(*item, log_dir), todo):
            print(
                f"{'ok' if code == 0 else f'FAILED ({code})':12s} {seconds:7.1f} s  {label}",
                flush=True,
            )
            failed += code != 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
