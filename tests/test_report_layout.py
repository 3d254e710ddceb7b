"""The report reads in a real browser: no titles on top of each other, no empty panel, a unit on
every axis. Issue 22 found subplot titles running into each other (moving-bands, scale-out,
in-network-sum), panels drawn empty for a sweep's listed networks, and axes named by config keys.

Three small reports shaped like those scenarios are opened in headless Chromium; a script in the
page measures every chart's title, subplot title, axis title, legend and menu (their DOM
bounding boxes), counts what each subplot draws, and reads every axis title.
"""

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from browser import CHROMIUM, chromium

from transitsim.report import write_report

# Test-only instrument, appended to a copy of the page once plotly has drawn every chart.
MEASURE = """<script>
window.addEventListener('load', function () { setTimeout(function () {
  var plots = [];
  document.querySelectorAll('.js-plotly-plot').forEach(function (plot) {
    var frame = plot.getBoundingClientRect();
    var boxes = [];
    var add = function (kind, el) {
      var r = el.getBoundingClientRect();
      if (r.width > 0 && r.height > 0) {
        boxes.push({kind: kind, text: el.textContent, box: [r.left, r.top, r.right, r.bottom]});
      }
    };
    plot.querySelectorAll('.infolayer .annotation .annotation-text-g text').forEach(
      function (el) { add('title', el); });
    plot.querySelectorAll('.infolayer .g-gtitle text').forEach(function (el) { add('chart', el); });
    plot.querySelectorAll('.infolayer g[class^="g-"][class$="title"] text').forEach(
      function (el) { if (!el.closest('.g-gtitle')) { add('axis', el); } });
    plot.querySelectorAll('.infolayer .legend .bg').forEach(function (el) { add('legend', el); });
    plot.querySelectorAll('.menulayer .updatemenu-header').forEach(
      function (el) { add('menu', el); });
    var subplots = [];
    plot.querySelectorAll('.cartesianlayer .subplot').forEach(function (sp) {
      var marks = 0;
      sp.querySelectorAll('.overplot path, .overplot image').forEach(function (el) {
        var d = el.getAttribute('d');
        if (el.tagName === 'image' || (d && d !== 'M0,0Z' && d.length > 4)) { marks += 1; }
      });
      subplots.push({name: sp.getAttribute('class'), marks: marks});
    });
    plots.push({id: plot.id, frame: [frame.left, frame.right], boxes: boxes, subplots: subplots});
  });
  document.body.setAttribute('data-layout', JSON.stringify(plots));
}, 0); });
</script></body>"""
# Axis titles that need no unit: counts, categories, and the loss (nats per token, named so).
UNITLESS = {"validation loss", "configuration", "link", "workers"}
UNITLESS |= {"optimiser steps to reach the target"}
LABELS = {
    "B-topk": "B top-k 2d64",
    "C-band": "C low band 1d256",
    "E2-sum": "E' optics summed (published E fb-sent)",
    **{
        f"G-{kind}-{r}": f"G {kind} band 1d256 every {r}"
        for kind in ("rotating", "recal")
        for r in (1, 10, 50)
    },  # fmt: skip
}


def timeline_for(networks: list[str], configs: list[str], steps: int = 12) -> pd.DataFrame:
    rows = []
    for n, network in enumerate(networks):
        for c, config in enumerate(configs):
            time_s = 0.0
            for step in range(1, steps + 1):
                wire = 0.01 * (1 + c) * (1 + n % 3)
                hidden = 0.3 * wire if network.endswith("+overlap") else 0.0
                time_s += 0.03 + wire - hidden
                rows.append(
                    {
                        "run": f"{config}-s0",
                        "config": config,
                        "variant": config[0],
                        "network": network,
                        "step": step,
                        "val_loss": 4.5 - (0.12 - 0.01 * c) * step if step % 3 == 0 else math.nan,
                        "compute_s": 0.03,
                        "wire_s": wire - hidden,
                        "step_s": 0.03 + wire - hidden,
                        "time_s": time_s,
                        "wire_bytes": 1e7 * (1 + c) * step,
                        "exposed_s": wire - hidden,
                        "hidden_s": hidden,
                        "exchange_s": wire,
                        "interval_steps": 1,
                        "overlap": "buckets" if network.endswith("+overlap") else "none",
                    }
                )
    return pd.DataFrame(rows)


def summary_for(points: list[dict], configs: list[str], targets: list[float]) -> pd.DataFrame:
    """A row per (point, config, target), times that differ, the last config never reaching
    the lower target."""
    rows = []
    for p, point in enumerate(points):
        for c, config in enumerate(configs):
            for t, target in enumerate(targets):
                reached = not (t and c == len(configs) - 1)
                rows.append(
                    point
                    | {
                        "config": config,
                        "variant": config[0],
                        "target": target,
                        "time_to_target_s": (20.0 + 7 * ((c + p) % 4) + 30 * t)
                        if reached
                        else math.nan,  # fmt: skip
                    }
                )
    return pd.DataFrame(rows)


def ladder_for(configs: list[str], targets: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"config": c, "variant": c[0], "target": t, "steps": 100.0 * (1 + i)}
            for i, c in enumerate(configs)
            for t in targets
        ]
    )


def both(network: str, point: dict) -> list[dict]:
    """A network point without and with overlap, as the scenario's overlap axis makes them."""
    return [
        point | {"network": network, "overlap": "none"},
        point | {"network": network + " +overlap", "overlap": "buckets"},
    ]


def moving_bands() -> dict:
    configs = ["B-topk", "C-band", *[c for c in LABELS if c.startswith("G-")]]
    points = [
        p for name in ("8x200g-switch", "8x200g-switch-sum", "2dc-wan") for p in both(name, {})
    ]
    return {"configs": configs, "points": points, "targets": [2.551, 2.3], "params": ["overlap"]}


def scale_out() -> dict:
    points = [
        p
        for collective in ("ring_allreduce", "switch_sum")
        for workers in (8, 64, 256, 1024)
        for p in both(
            f"fabric[workers={workers}, collective={collective}]",
            {"workers": workers, "collective": collective},
        )
    ]
    points += [p for n in (64, 256) for p in both(f"hierarchical N={n}", {"workers": math.nan})]
    return {
        "configs": ["A-adamw", "C-band", "E2-sum"],
        "points": points,
        "targets": [3.3],
        "params": ["overlap", "workers", "collective"],
    }


def in_network_sum() -> dict:
    points = [
        p
        for sum_at in ("receivers", "switch")
        for rate in (1e9, 1e10, 1e11, 4e11)
        for p in both(
            f"rack[placement.sum={sum_at}, host_link.rate={rate / 1e9:g} Gb/s]",
            {"placement.sum": sum_at, "host_link.rate": rate},
        )
    ]
    points += [
        p
        for rate in ("10 Gb/s", "100 Gb/s")
        for p in both(f"band made at the switch, {rate}", {"host_link.rate": math.nan})
    ]
    return {
        "configs": ["C-band", "E2-sum"],
        "points": points,
        "targets": [3.3, 2.0],  # 2 targets x 2 overlap modes x 2 placements: eight panels
        "params": ["overlap", "placement.sum", "host_link.rate"],
    }


def write(shape: dict, path: Path) -> Path:
    configs, targets = shape["configs"], shape["targets"]
    summary = summary_for(shape["points"], configs, targets)
    networks = list(dict.fromkeys(summary["network"]))
    return write_report(
        path,
        timeline_for(networks, configs),
        summary,
        ladder_for(configs, targets),
        sweep=summary,  # as `transitsim run` passes it: every row has a value of overlap
        labels=LABELS,
    )


def overlapping(a: list[float], b: list[float], slack: float = 1.0) -> bool:
    return (
        a[0] < b[2] - slack and b[0] < a[2] - slack and a[1] < b[3] - slack and b[1] < a[3] - slack
    )


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's /usr/bin/chromium (apt)")
@pytest.mark.parametrize(
    "shape", [moving_bands, scale_out, in_network_sum], ids=lambda f: f.__name__
)
def test_titles_do_not_collide_no_panel_is_empty_every_axis_has_a_unit(
    shape, tmp_path: Path
) -> None:
    report = write(shape(), tmp_path / "report.html")
    measured = tmp_path / "measured.html"
    page = report.read_text(encoding="utf-8")
    measured.write_text(page.replace("</body>", MEASURE, 1), encoding="utf-8")
    dump = chromium(
        tmp_path / "profile",
        "--window-size=1280,900",
        "--virtual-time-budget=20000",
        "--dump-dom",
        measured.as_uri(),
    )
    assert dump.returncode == 0, dump.stderr[-2000:]
    found = re.search(r'data-layout="([^"]*)"', dump.stdout)
    assert found, "the page did not finish rendering"
    plots = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    ids = [plot["id"] for plot in plots]
    assert "plot-winner" in ids and "plot-breakdown" in ids and len(ids) >= 6
    titles = 0
    for plot in plots:
        boxes = plot["boxes"]
        for i, first in enumerate(boxes):
            for second in boxes[i + 1 :]:
                assert not overlapping(first["box"], second["box"]), (plot["id"], first, second)
            if first["kind"] == "title":  # a subplot title stays inside its chart
                titles += 1
                left, right = plot["frame"]
                assert left - 1 <= first["box"][0] and first["box"][2] <= right + 1, first
            if first["kind"] == "axis":
                name = first["text"].strip()
                assert re.search(r"\(.+\)$", name) or name in UNITLESS, (plot["id"], name)
        for subplot in plot["subplots"]:
            assert subplot["marks"] > 0, (plot["id"], subplot)  # nothing drawn: an empty panel
    assert titles >= 4
    dom = dump.stdout
    winner = dom.split('id="winner"', 1)[1].split("</section>", 1)[0]
    assert "–" not in re.sub(r"<[^>]+>", " ", winner)  # no "collective –" panel
    assert "★" in winner or ">fastest<" in winner  # the winner is marked
