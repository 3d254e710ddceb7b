"""Every screenshot of the README and docs, for a person to review the charts by eye, each with
the verdict it shows in a text file beside it.

For each scenario (default: scenarios/*.yaml) this runs it (as `transitsim run` does), opens its
report.html in Debian's headless Chromium (the flags of tests/browser.py) and writes two PNGs:
`<name>-first-screen.png` (the 1280 x 800 window a reader opens on) and `<name>-full.png` (the
whole page, 1280 px wide), palette-compressed so the lot stays a few MB in git, and
`<name>.verdict.txt`: the verdict the run printed ("Verdict: ..." a target a line), which is the
verdict drawn in them. quickstart's first screen is also the README's picture,
docs/quickstart-report.png (with docs/quickstart-report.verdict.txt). It also refreshes the
summaries the verdict tests read (tests/fixtures/verdicts/<name>.csv and runs.json), so
tests/test_screenshots.py fails when a text file differs from the verdict printed today.

    python tools/screenshot_reports.py                       # all, into docs/report-screenshots/
    python tools/screenshot_reports.py scenarios/cluster.yaml --keep out/shots
    python tools/screenshot_reports.py --reports out/shots   # re-shoot reports already run

Needs /usr/bin/chromium (apt-get install chromium) and Pillow (pip install -e '.[screenshots]'). All
scenarios took about 6 minutes on this 2-core machine (moving-bands about 3). Errors are one
line, exit 2.
"""

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # one Chromium flag list: the tests' own

from browser import CHROMIUM, chromium  # noqa: E402

WIDTH = 1280
FIRST_SCREEN = (WIDTH, 800)
DEFAULT_OUT = ROOT / "docs" / "report-screenshots"
MAX_HEIGHT = 16_000  # Chromium's largest screenshot surface is about 16k px
# Appended to a copy of the page: its full height once plotly has drawn every chart.
MEASURE = """<script>
window.addEventListener('load', function () { setTimeout(function () {
  document.body.setAttribute('data-height', String(document.documentElement.scrollHeight));
}, 0); });
</script></body>"""


class ShotError(Exception):
    """A problem to report in one line."""


def page_height(report: Path, profile: Path) -> int:
    """The report's full height in CSS pixels at WIDTH, measured in the browser."""
    measured = report.with_name("measure-height.html")
    measured.write_text(report.read_text(encoding="utf-8").replace("</body>", MEASURE, 1))
    try:
        dump = chromium(
            profile,
            f"--window-size={WIDTH},1000",
            "--virtual-time-budget=20000",
            "--dump-dom",
            measured.as_uri(),
        )
    finally:
        measured.unlink()
    found = re.search(r'data-height="(\d+)"', dump.stdout)
    if dump.returncode != 0 or not found:
        raise ShotError(f"{report}: the page did not render in Chromium")
    return int(found.group(1))


def screenshot(report: Path, png: Path, size: tuple[int, int], profile: Path) -> None:
    """One PNG of the report at this window size, palette-compressed in place."""
    from PIL import Image

    taken = chromium(
        profile,
        f"--window-size={size[0]},{size[1]}",
        "--virtual-time-budget=20000",
        f"--screenshot={png}",
        report.as_uri(),
    )
    if taken.returncode != 0 or not png.exists():
        raise ShotError(f"{report}: Chromium took no screenshot")
    with Image.open(png) as image:
        # octree keeps the chart palette's colours apart (median cut merged green into blue)
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE)
    small.save(png, optimize=True)


def shoot(report: Path, name: str, out: Path, work: Path) -> list[Path]:
    """The first screen and the full page of one report."""
    height = min(page_height(report, work / "profile-measure") + 40, MAX_HEIGHT)
    first, full = out / f"{name}-first-screen.png", out / f"{name}-full.png"
    screenshot(report, first, FIRST_SCREEN, work / "profile-first")
    screenshot(report, full, (WIDTH, height), work / "profile-full")
    return [first, full]


FIXTURES = ROOT / "tests" / "fixtures" / "verdicts"
README_PICTURE = ROOT / "docs" / "quickstart-report.png"
# the summary's own columns the decision recomputes: not kept in a fixture
DECIDED = ("call", "winner")


def run_report(scenario: Path, folder: Path) -> tuple[Path, list[str]]:
    """Run one scenario into folder; its report.html and its verdict as `transitsim run`
    prints it. Its summary becomes the verdict tests' fixture."""
    from transitsim.run import run_scenario
    from transitsim.scenario import load_scenario

    result = run_scenario(load_scenario(scenario), folder, quiet=True)  # Dask past a few s
    write_fixture(scenario.stem, result.summary, result.params, result.extrapolation)
    return folder / "report.html", [f"Verdict: {line}" for line in result.verdict]


def write_fixture(name: str, summary, params: list[str], extrapolation: str | None) -> None:
    """tests/fixtures/verdicts/<name>.csv (the summary without the decision's columns, which
    the tests recompute) and its entry in runs.json."""
    import json

    plain = summary.drop(columns=[c for c in DECIDED if c in summary.columns])
    plain.to_csv(FIXTURES / f"{name}.csv", index=False, lineterminator="\n")
    runs_file = FIXTURES / "runs.json"
    runs = json.loads(runs_file.read_text(encoding="utf-8")) if runs_file.exists() else {}
    runs[name] = {"params": params, "extrapolation": extrapolation}
    runs_file.write_text(json.dumps(runs, indent=1) + "\n", encoding="utf-8")


def write_verdict(png: Path, lines: list[str]) -> Path:
    """<image stem without -first-screen>.verdict.txt beside it: the verdict it shows."""
    stem = png.name.removesuffix(".png").removesuffix("-first-screen")
    text = png.with_name(f"{stem}.verdict.txt")
    text.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("scenarios", nargs="*", type=Path, help="default: scenarios/*.yaml")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--keep", type=Path, help="run into KEEP/<name>/ (default: a temp dir)")
    parser.add_argument("--reports", type=Path, help="shoot REPORTS/<name>/report.html, no runs")
    args = parser.parse_args(argv)
    try:
        from PIL import Image  # noqa: F401
    except ImportError:
        print("screenshot_reports: needs Pillow (pip install -e '.[screenshots]')", file=sys.stderr)
        return 2
    if not CHROMIUM.exists():
        print(f"screenshot_reports: needs {CHROMIUM} (apt-get install chromium)", file=sys.stderr)
        return 2
    scenarios = args.scenarios or sorted((ROOT / "scenarios").glob("*.yaml"))
    args.out.mkdir(parents=True, exist_ok=True)
    from transitsim.base.errors import TransitsimError

    summary = {}
    with tempfile.TemporaryDirectory(prefix="report-shots-") as tmp:
        work = Path(tmp)
        for scenario in scenarios:
            name = scenario.stem
            started = time.perf_counter()
            try:
                if args.reports is not None:
                    report = args.reports / name / "report.html"
                    if not report.exists():
                        raise ShotError(f"{report}: no such report")
                    lines = None  # no run: the text files stay as they are
                else:
                    report, lines = run_report(scenario, (args.keep or work) / name)
                shots = shoot(report, name, args.out, work)
                if lines is not None:
                    write_verdict(shots[0], lines)
                if name == "quickstart" and args.out == DEFAULT_OUT:
                    README_PICTURE.write_bytes(shots[0].read_bytes())
                    if lines is not None:
                        write_verdict(README_PICTURE, lines)
            except (ShotError, TransitsimError) as error:
                print(f"screenshot_reports: {error}", file=sys.stderr)
                return 2
            sizes = [f"{p.name} {p.stat().st_size / 1e3:.0f} kB" for p in shots]
            summary[name] = sizes
            print(f"{name}: {', '.join(sizes)} ({time.perf_counter() - started:.0f} s)")
    total = sum(p.stat().st_size for p in args.out.glob("*.png"))
    print(f"{len(summary)} report(s), {total / 1e6:.1f} MB of PNGs in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
