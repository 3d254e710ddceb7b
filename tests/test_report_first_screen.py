"""The quickstart's report answers its question on the first screen (1400 x 900, no scrolling).

Runs the shipped quickstart scenario on the shipped published traces (what the README's main
command does), opens report.html in headless Chromium at 1400 x 900, and measures, in the page,
where the verdict and the winner chart are; also saves the screenshot for a person to look at.
"""

import json
import re
import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM, chromium

from transitsim.run import run_scenario
from transitsim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
# The first screen as a user sees it: a 1400x900 window, the page given time to render.
SCREEN = ["--window-size=1400,900", "--virtual-time-budget=20000"]
# Test-only instrument, appended to a copy of the page: where the answer sits in the viewport.
MEASURE = """<script>
window.addEventListener('load', function () { setTimeout(function () {
  var verdict = document.getElementById('verdict');
  var chart = document.querySelector('#plot-winner .main-svg');
  var box = function (el) {
    var r = el.getBoundingClientRect(); return [r.top, r.bottom, r.width];
  };
  document.body.setAttribute('data-first-screen', JSON.stringify({
    viewport: [window.innerWidth, window.innerHeight],
    verdict: verdict ? box(verdict) : null, verdictText: verdict ? verdict.innerText : '',
    chart: chart ? box(chart) : null,
    lines: document.querySelectorAll('#plot-winner .trace.scatter').length,
    stars: document.querySelectorAll('#plot-winner path.point[d*="L"]').length
  }));
}, 0); });
</script></body>"""


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's /usr/bin/chromium (apt)")
def test_quickstart_report_first_screen_holds_the_verdict_and_the_winner_chart(
    tmp_path: Path,
) -> None:
    result = run_scenario(load_scenario(QUICKSTART), tmp_path / "out", serial=True, quiet=True)
    report = tmp_path / "out" / "report.html"
    assert len(result.verdict) == 2  # one sentence per target, generated from the results
    page = report.read_text(encoding="utf-8")
    for line in result.verdict:
        assert line.replace("'", "&#x27;") in page

    measured = tmp_path / "measured.html"
    measured.write_text(page.replace("</body>", MEASURE, 1), encoding="utf-8")
    dump = chromium(tmp_path / "profile-dom", *SCREEN, "--dump-dom", measured.as_uri())
    assert dump.returncode == 0, dump.stderr[-2000:]
    found = re.search(r'data-first-screen="([^"]*)"', dump.stdout)
    assert found, "the page did not finish rendering"
    facts = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    width, height = facts["viewport"]
    # headless chromium lays --dump-dom out in the window less its (invisible) frame: 1400 x ~760,
    # a stricter first screen than the 1400 x 900 screenshot
    assert width == 1400 and 700 <= height <= 900
    top, bottom, _ = facts["verdict"]
    assert 0 <= top and bottom <= height  # the verdict, whole, without scrolling
    for line in result.verdict:
        assert line in facts["verdictText"]
    chart_top, chart_bottom, chart_width = facts["chart"]
    assert 0 < chart_top and chart_bottom <= height and chart_width > 1000  # the winner chart
    assert facts["lines"] >= 2 * 5  # per target chart: 4 configurations and the stars

    shot = tmp_path / "first-screen.png"
    taken = chromium(tmp_path / "profile-shot", *SCREEN, f"--screenshot={shot}", report.as_uri())
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    shutil.copyfile(shot, Path("/tmp/transitsim-first-screen.png"))  # for a person to look at
