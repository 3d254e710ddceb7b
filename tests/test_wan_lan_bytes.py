"""Bytes split into WAN and LAN (issue 43, item 5): local SGD's point is few WAN bytes.

wan_bytes counts, of the bytes a worker puts on its line, those that crossed a link between two
datacentres (network/outcome.py's wan_share); LAN is the rest. By hand on 2 sites of 2
workers: a hierarchical all-reduce of P bytes sends P/2 per worker across the WAN (each worker's
shard once round a 2-ring), and the intra-site all-reduce of every step never leaves its site.
"""

import re
from pathlib import Path

import pandas as pd
import pytest
from test_replay import DENSE_BYTES, make_trace
from test_replay_sites import STEPS, SYNC_BYTES, TWO_SITES, _site_trace

from transitsim.network.spec import NetworkSpec
from transitsim.replay.replay import replay
from transitsim.replay.request import ReplayRequest
from transitsim.run import run_scenario
from transitsim.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def test_a_replica_per_site_sends_only_its_outer_sync_across_the_wan(tmp_path: Path) -> None:
    timeline = replay(_site_trace(tmp_path), ReplayRequest(TWO_SITES, replicas="site")).timeline
    last = timeline.iloc[-1]
    # two syncs, each P/2 per worker across; every step's dense all-reduce stays in its site
    assert last["wan_bytes"] == pytest.approx(2 * SYNC_BYTES / 2, rel=1e-9)
    inner = timeline["step"] < 10
    assert (timeline.loc[inner, "wan_bytes"] == 0).all()
    assert (timeline.loc[inner, "wire_bytes"] > 0).all()
    lan = last["wire_bytes"] - last["wan_bytes"]
    assert lan > STEPS * DENSE_BYTES / 2  # a 2-worker ring sends P/2 a step, every step


def test_bytes_on_a_network_without_datacentres_are_all_lan(tmp_path: Path) -> None:
    trace = make_trace(tmp_path, variant="A", steps=[1, 2, 3], payload_bytes=[DENSE_BYTES] * 3)
    rack = NetworkSpec(name="rack", topology="switch", workers=4, host_link=TWO_SITES.host_link)
    timeline = replay(trace, ReplayRequest(rack)).timeline
    assert timeline["wire_bytes"].iloc[-1] > 0
    assert (timeline["wan_bytes"] == 0).all()
    across = replay(trace, ReplayRequest(TWO_SITES)).timeline
    assert 0 < across["wan_bytes"].iloc[-1] < across["wire_bytes"].iloc[-1]


def _one_point(tmp_path: Path) -> Path:
    """two-datacentres-local-sgd cut to A and H every 50 at one grid point, without overlap."""
    text = (ROOT / "scenarios" / "two-datacentres-local-sgd.yaml").read_text(encoding="utf-8")
    text = text.replace("../traces/", f"{ROOT / 'traces'}/")
    kept = []
    skip = False
    for line in text.splitlines():
        if line.startswith("  - path:"):
            skip = not ("adamw" in line or "diloco-h50" in line and "sdiloco" not in line)
        elif not line.startswith("    "):
            skip = False
        if not skip:
            kept.append(line)
    text = "\n".join(kept) + "\n"
    text = re.sub(r"wan_link.rate: \[.*\]", 'wan_link.rate: ["10 Gb/s"]', text)
    text = re.sub(r"wan_link.length: \[.*\]", 'wan_link.length: ["1,000 km"]', text)
    text = text.replace("overlap: [none, buckets]", "overlap: none")
    path = tmp_path / "cut.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def local_sgd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("local-sgd-bytes")
    out = folder / "out"
    run_scenario(load_scenario(_one_point(folder)), out, serial=True, quiet=True)
    return out


def test_diloco_sends_far_fewer_wan_bytes_than_adamw_though_more_in_all(local_sgd: Path) -> None:
    summary = pd.read_csv(local_sgd / "summary.csv")
    rows = summary[summary["target"] == 3.0].set_index("variant")
    assert set(rows.index) == {"A", "H"}
    a, h = rows.loc["A"], rows.loc["H"]
    assert h["bytes_to_target"] > a["bytes_to_target"]  # the LAN all-reduce every step
    assert h["wan_bytes_to_target"] < a["wan_bytes_to_target"] / 10
    for row in (a, h):
        assert row["wan_bytes_to_target"] + row["lan_bytes_to_target"] == pytest.approx(
            row["bytes_to_target"], rel=1e-9
        )


def test_the_report_draws_wan_and_lan_bytes_and_its_table_splits_them(local_sgd: Path) -> None:
    page = (local_sgd / "report.html").read_text(encoding="utf-8")
    assert "Loss against bytes across the WAN" in page
    assert "Loss against bytes inside a site (LAN)" in page
    assert "<th title='click to sort'>WAN / LAN</th>" in page
    summary = pd.read_csv(local_sgd / "summary.csv")
    h = summary[(summary["variant"] == "H") & (summary["target"] == 3.0)].iloc[0]
    wan = float(h["wan_bytes_to_target"])
    assert f"data-v='{wan!r}'" in page
