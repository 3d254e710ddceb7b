"""Every shipped scenario's verdict reads, on that scenario's own numbers.

tests/fixtures/verdicts/<scenario>.csv holds the columns of summary.csv the verdict reads, as
`transitsim run scenarios/<scenario>.yaml` wrote them (runs.json: its grid parameters and what
its title says it extrapolates to). A full run takes minutes; the verdict on its summary, well
under a second. Two of them hold the ties issue 22 named: two-datacentres' 452.0 s against
453.7 s from two seeds, and in-network-sum-modes' 15.787 s against 15.789 s (0.014 %).
"""

import json
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from transitsim.analysis.outcomes import board
from transitsim.analysis.verdict import verdict

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "verdicts"
RUNS = json.loads((FIXTURES / "runs.json").read_text(encoding="utf-8"))
SCENARIOS = sorted(path.stem for path in (HERE.parent / "scenarios").glob("*.yaml"))


def summary(name: str) -> pd.DataFrame:
    return pd.read_csv(FIXTURES / f"{name}.csv")


def judged(name: str):
    frame = summary(name)
    labels = dict(zip(frame["config"], frame["label"], strict=True))
    run = RUNS[name]
    return verdict(frame, run["params"], labels, extrapolation=run["extrapolation"])


def test_every_shipped_scenario_has_its_summary_here() -> None:
    assert sorted(RUNS) == SCENARIOS, "add the new scenario's summary columns and runs.json"


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_verdict_sentence_fits_two_lines(name: str) -> None:
    result = judged(name)
    assert len(result.sentences) == summary(name)["target"].nunique()
    for line in result.sentences:
        assert len(textwrap.wrap(line, 100)) <= 2, line
        assert "…" not in line, f"no style fitted, so the sentence was cut: {line}"
        if RUNS[name]["extrapolation"]:
            assert f"({RUNS[name]['extrapolation']})" in line
    assert set(result.table["target"]) == set(summary(name)["target"])


def test_two_datacentres_two_seeds_far_apart_with_overlapping_ranges_cannot_separate() -> None:
    """Issue 22 called 452.0 s against 453.7 s from two seeds a tie (0.37 % apart: still one,
    tests/test_verdict.py). Interpolated between evaluations (issue 43), A and B at 1 Gb/s are
    further apart than the tie margin with ranges that overlap: A leads, and the table and the
    sentence say that the two seeds cannot separate it from B, rather than calling it a tie or
    a win."""
    result = judged("two-datacentres")
    rows = result.table[
        (result.table["target"] == 2.0)
        & (result.table["held"] == "overlap none")
        & result.table["where"].str.contains("1 Gb/s x 5,000 km")
    ]
    (row,) = rows.itertuples()
    assert (row.outcome, row.fastest, row.cannot_separate) == ("leads", "A AdamW", "B top-k 2d64")
    assert row.margin_max > 0.01 and row.interval.endswith("(range)") and row.seeds == "2"
    assert "(cannot separate from B)" in result.sentences[1]


def test_in_network_sum_modes_0_014_percent_is_a_tie() -> None:
    frame = summary("in-network-sum-modes")
    rows = frame[frame["target"] == 3.0]
    labels = dict(zip(frame["config"], frame["label"], strict=True))
    found = board(rows, RUNS["in-network-sum-modes"]["params"], labels)
    (point,) = [
        o
        for o in found.outcomes
        if o.point == "10 Gb/s" and dict(o.held) == {"overlap": "none", "switch.aggregator": False}
    ]
    assert point.tie and [found.name(k) for k in point.members] == [
        "E' loopback feedback",
        "E' exact feedback",
    ]
    assert 0 < point.margin < 0.0005  # 0.014 %: far inside the 1 % tie margin
    result = judged("in-network-sum-modes")
    assert "E' loopback and E' exact tie below 400 Gb/s (3 seeds each)" in (result.sentences[0])


def test_in_network_sum_answers_e_against_e_summed_by_name() -> None:
    """The scenario's own question first, and E's one seed said (issue 43: most "ties" came
    from C's wide interval against E's one seed)."""
    (line,) = judged("in-network-sum").sentences
    assert line.startswith("To loss 3.3, E summed at the switch beats E all-gathered at ")
    assert line.endswith("; E from 1 seed.")


def test_two_datacentres_local_sgd_names_c_where_it_leads() -> None:
    """Issue 43: "H DiLoCo every 50 ties for fastest at every one of the 16 grid points ...;
    the others never win" called configurations 14.8x apart ties, and C, which leads half the
    grid by mean, one that never wins. Now C leads where it leads; where the seeds (and the
    evaluation every 25 steps) cannot separate the local-SGD variants, the sentence and the
    table say so; the local-SGD family leads where the WAN is slow (1 and 10 Gb/s)."""
    result = judged("two-datacentres-local-sgd")
    first = result.sentences[0]
    assert "C is fastest at" in first and "never win" not in first.split("C is fastest")[0]
    assert "H-s leads at 8 (cannot separate from 1 other)" in first
    assert "1 other leads at 8" in first  # H DiLoCo every 50 at 10 Gb/s: counted, not dropped
    assert "ties for fastest" not in first
    table = result.table
    compressors = ("A AdamW", "B top-k 2d64", "C low band 1d256", "E optics")
    slow = table[table["where"].str.startswith(("1 Gb/s", "10 Gb/s"))]
    for fastest in slow["fastest"]:
        assert not any(name in fastest for name in compressors), fastest
    fast = table[table["where"].str.startswith("400 Gb/s x 10 km") & (table["target"] == 3.0)]
    assert len(fast) and set(fast["fastest"]) == {"C low band 1d256"}
    assert (fast["outcome"] == "fastest").all()  # apart from every other, both overlap modes


def test_background_traffic_local_sgd_keeps_the_family_ahead_at_every_share() -> None:
    """Issue 26 item 4: other traffic on the WAN slows the every-step methods (A about 9x
    slower to loss 3.0 from no share to 90 %), and a local-SGD variant leads at every share,
    with and without overlap; no compressor is ever among the fastest."""
    result = judged("background-traffic-local-sgd")
    compressors = ("A AdamW", "B top-k 2d64", "C low band 1d256", "E optics")
    for fastest in result.table["fastest"]:
        assert not any(name in fastest for name in compressors), fastest
        assert any(name in fastest for name in ("H DiLoCo", "H-s", "L SparseLoCo")), fastest
    frame = summary("background-traffic-local-sgd")
    a = frame[(frame["label"] == "A AdamW") & (frame["target"] == 3.0)]
    a = a[a["overlap"] == "none"].set_index("wan_link.background")["time_to_target_s"]
    assert a.loc[0.9] / a.loc[0.0] > 5
    swept = a[a.index.notna()].sort_index()  # the listed network (a series) has no share
    assert swept.is_monotonic_increasing
