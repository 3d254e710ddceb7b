"""Issue 43 item 4: the pictures are current. tools/screenshot_reports.py regenerates every
screenshot of the README and docs in one command and writes, beside each, the verdict drawn in
it (<name>.verdict.txt); here that text must equal the verdict printed today from the same run's
summary (tests/fixtures/verdicts, which the same command refreshes). And the README quotes the
verdicts as they are printed (its code block and its one line per scenario)."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from transitsim.analysis.verdict import verdict

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "verdicts"
RUNS = json.loads((FIXTURES / "runs.json").read_text(encoding="utf-8"))
SHOTS = ROOT / "docs" / "report-screenshots"
README_PICTURE = ROOT / "docs" / "quickstart-report.png"


def printed(name: str) -> list[str]:
    """The verdict lines `transitsim run scenarios/<name>.yaml` prints, from its summary."""
    frame = pd.read_csv(FIXTURES / f"{name}.csv")
    labels = dict(zip(frame["config"], frame["label"], strict=True))
    run = RUNS[name]
    found = verdict(frame, run["params"], labels, extrapolation=run["extrapolation"])
    return [f"Verdict: {line}" for line in found.sentences]


def pictures() -> list[tuple[Path, str]]:
    """Every screenshot the docs show, with the scenario it draws."""
    found = [
        (p, p.name.removesuffix("-first-screen.png")) for p in SHOTS.glob("*-first-screen.png")
    ]
    found += [(p, p.name.removesuffix("-full.png")) for p in SHOTS.glob("*-full.png")]
    return sorted(found) + [(README_PICTURE, "quickstart")]


def verdict_file(png: Path, name: str) -> Path:
    if png == README_PICTURE:
        return png.with_name("quickstart-report.verdict.txt")
    return png.with_name(f"{name}.verdict.txt")


def test_every_shipped_scenario_has_its_pictures() -> None:
    names = {name for _, name in pictures()}
    assert names == set(RUNS)


@pytest.mark.parametrize("png,name", pictures(), ids=lambda v: getattr(v, "name", v))
def test_each_picture_holds_todays_verdict(png: Path, name: str) -> None:
    text = verdict_file(png, name)
    assert text.exists(), f"{text} missing: run tools/screenshot_reports.py"
    shown = text.read_text(encoding="utf-8").splitlines()
    assert shown == printed(name), f"{png.name} shows an older verdict: rerun the tool"


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_quotes_quickstarts_verdict_as_printed() -> None:
    quoted = [line for line in readme().splitlines() if line.startswith("Verdict: To loss")]
    assert quoted == printed("quickstart")


def test_the_readme_quotes_each_scenarios_verdict_as_printed() -> None:
    """Every `...` quote in a scenario's line of the README that reads as a verdict is part of
    what that scenario prints (whitespace as the README wraps it)."""
    bullets = re.findall(r"^- \*\*([\w-]+)\*\*(.*?)(?=^- \*\*|^\S)", readme(), re.M | re.S)
    assert {name for name, _ in bullets} >= set(RUNS) - {"quickstart", "moving-bands"}
    for name, body in bullets:
        if name not in RUNS:
            continue
        sentences = " ".join(line.removeprefix("Verdict: ") for line in printed(name))
        for quote in re.findall(r"`([^`]+)`", body, re.S):
            quote = " ".join(quote.split())
            if quote.startswith("To loss") or re.search(r"fastest|\btie|leads|never win", quote):
                assert quote.rstrip(".") in sentences, (name, quote)


def test_every_verdict_the_readme_quotes_inline_is_printed() -> None:
    """`Verdict: To loss ...` quoted in running text (moving-bands) is a printed line's start."""
    lines = [line for name in RUNS for line in printed(name)]
    quotes = re.findall(r"`(Verdict: To loss[^`]+)`", readme(), re.S)
    assert quotes
    for quote in quotes:
        quote = " ".join(quote.split()).rstrip(".")
        assert any(line.startswith(quote) for line in lines), quote


def scenario_sections() -> dict[str, list[str]]:
    """docs/scenarios.md's `- To loss ...` bullets under each **name** heading, one per line."""
    text = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    found: dict[str, list[str]] = {}
    heading = r"^\*\*([\w-]+)\*\*(.*?)(?=^\*\*[\w-]+\*\*|\Z)"
    for name, body in re.findall(heading, text, re.M | re.S):
        bullets = re.findall(r"^- (To loss .*?)(?=^\S|\Z)", body, re.M | re.S)
        found[name] = [" ".join(b.split()) for b in bullets]
    return found


def test_docs_scenarios_quotes_each_verdict_as_printed() -> None:
    """docs/scenarios.md says its bullets are what `transitsim run` prints today: each shipped
    scenario it covers quotes exactly its printed verdict lines (issue 43)."""
    sections = {name: b for name, b in scenario_sections().items() if name in RUNS}
    assert len(sections) >= len(RUNS) - 1, sorted(set(RUNS) - set(sections))
    for name, bullets in sections.items():
        assert bullets == [line.removeprefix("Verdict: ") for line in printed(name)], name
