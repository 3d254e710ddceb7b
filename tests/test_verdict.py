"""The verdict in words and the human units it (and the report) print numbers in."""

import math
import textwrap

import numpy as np
import pandas as pd
import pytest

from transitsim.analysis.verdict import verdict, verdict_sentences
from transitsim.base import human


def summary_1d() -> pd.DataFrame:
    """B fastest on slow links, A from 10 Gb/s; C reaches the target but never wins; D never."""
    rows = []
    for rate in (1e9, 5e9, 1e10, 1e11):
        times = {"A": 100 / (rate / 1e9) ** 0.5, "B": 40.0, "C": 500.0, "D": math.nan}
        for config, time_s in times.items():
            rows.append(
                {
                    "config": f"{config}-run",
                    "network": f"rack[host_link.rate={rate:g}]",
                    "host_link.rate": rate,
                    "target": 3.3,
                    "time_to_target_s": time_s,
                }
            )
    return pd.DataFrame(rows)


LABELS = {"A-run": "A AdamW", "B-run": "B top-k", "C-run": "C band", "D-run": "D calib"}


def test_one_dimensional_verdict_names_the_switch_over() -> None:
    (line,) = verdict_sentences(summary_1d(), ["host_link.rate"], LABELS)
    assert line == (
        "To loss 3.3, B top-k is fastest below 10 Gb/s, A AdamW from 10 Gb/s up; "
        "C band never wins; D calib never reaches it."
    )


def test_one_winner_everywhere() -> None:
    frame = summary_1d()
    frame.loc[frame.config == "B-run", "time_to_target_s"] = 1.0
    (line,) = verdict_sentences(frame, ["host_link.rate"], LABELS)
    assert line.startswith("To loss 3.3, B top-k is fastest at all 4 values of host_link.rate")
    assert "A AdamW and C band never win" in line


def test_two_dimensional_verdict_says_where_the_minority_wins() -> None:
    rows = []
    for rate in (1e9, 1e11):
        for length in (1e4, 5e6):
            slow = rate == 1e9 and length == 5e6
            for config, time_s in (("A-run", 10.0), ("B-run", 5.0 if slow else 20.0)):
                rows.append(
                    {
                        "config": config,
                        "network": f"2dc[{rate:g},{length:g}]",
                        "wan_link.rate": rate,
                        "wan_link.length": length,
                        "target": 2.0,
                        "time_to_target_s": time_s,
                    }
                )
    (line,) = verdict_sentences(pd.DataFrame(rows), ["wan_link.rate", "wan_link.length"], LABELS)
    assert line == (
        "To loss 2.0, A AdamW is fastest at 3 of the 4 grid points, B top-k at 1 "
        "(1 Gb/s x 5,000 km)."
    )


def test_a_swept_placement_makes_contenders_and_answers_its_question() -> None:
    """placement.sum receivers vs switch: the same C placed two ways is two contenders, named
    by where it is summed, compared by name (a scenario's own question); A, whose times the
    placement does not change, stays one contender."""
    two = summary_1d()[lambda f: f.config.isin(["A-run", "C-run"])]
    frame = two.assign(**{"placement.sum": "receivers"})
    other = two.assign(**{"placement.sum": "switch"})
    other.loc[other.config == "C-run", "time_to_target_s"] = 0.5
    other["network"] += "+sum"
    both = pd.concat([frame, other])
    (line,) = verdict_sentences(both, ["placement.sum", "host_link.rate"], LABELS)
    assert line == (
        "To loss 3.3, C summed at the switch beats C all-gathered at every point (1,000x); "
        "C summed at the switch is fastest at all 4 values of host_link.rate; "
        "A and C all-gathered never win."
    )
    table = verdict(both, ["placement.sum", "host_link.rate"], LABELS).table
    assert list(table["fastest"]) == ["C band summed at the switch"]
    assert list(table["next"]) == ["A AdamW"]


def test_listed_networks_only() -> None:
    listed = pd.DataFrame(
        [
            {"config": "A-run", "network": "lan", "target": 3.0, "time_to_target_s": 1.0},
            {"config": "B-run", "network": "lan", "target": 3.0, "time_to_target_s": 2.0},
        ]
    )
    assert verdict_sentences(listed, [], LABELS) == [
        "To loss 3.0, A AdamW is fastest; B top-k never wins."
    ]


def test_labels_that_collide_are_told_apart_by_variant() -> None:
    rows = pd.DataFrame(
        [
            {"config": c, "variant": v, "network": "lan", "target": 3.0, "time_to_target_s": t}
            for c, v, t in (("e-run", "E", 2.0), ("e2-run", "E'", 1.0))
        ]
    )
    (line,) = verdict_sentences(rows, [], {"e-run": "E optics", "e2-run": "E optics"})
    assert line == ("To loss 3.0, E optics (E') is fastest; E optics (E) never wins.")


def test_no_summary_no_verdict() -> None:
    assert verdict_sentences(pd.DataFrame(), ["x"]) == []


@pytest.mark.parametrize(
    ("function", "value", "shown"),
    [
        (human.seconds, 6.3105, "6.311 s"),
        (human.seconds, 0.01234, "12.34 ms"),
        (human.seconds, 1234.5, "1,234 s"),
        (human.size, 16_625_145_600, "16.63 GB"),
        (human.size, 31_666_944, "31.67 MB"),
        (human.ratio, 1.34718, "1.35x"),
        (human.loss, 2.0, "2.0"),
        (human.loss, 3.124, "3.124"),
    ],
)
def test_human_units(function, value: float, shown: str) -> None:
    assert function(value) == shown


def test_steps_are_integers_or_a_mean_that_says_so() -> None:
    assert human.steps(158.333, 3) == "158 (mean of 3)"
    assert human.steps(1400.0, 1) == "1,400"
    assert human.steps(math.nan, 3) == "–"
    assert human.param("wan_link.length", 5e6) == "5,000 km"
    assert human.param("host_link.rate", 2.5e9) == "2.5 Gb/s"
    assert human.param("collective", "ring_allreduce") == "ring_allreduce"


def test_an_overlap_axis_over_listed_networks_keeps_them_listed() -> None:
    """An axis every row carries (overlap) must not make listed networks look like grid points
    with no sweep value ("no configuration reaches it" was printed for them)."""
    grid = pd.concat(
        [summary_1d().assign(overlap=mode) for mode in ("none", "buckets")], ignore_index=True
    )
    listed = pd.DataFrame(
        [
            {"config": c, "network": f"lan{m}", "overlap": m, "target": 3.3, "time_to_target_s": t}
            for m, times in (("none", (1.0, 2.0)), ("buckets", (2.0, 1.0)))
            for c, t in zip(("A-run", "B-run"), times, strict=True)
        ]
    )
    both = pd.concat([grid, listed], ignore_index=True)
    (line,) = verdict_sentences(both, ["overlap", "host_link.rate"], LABELS)
    assert "no configuration reaches it" not in line
    # the grid says the same in both modes: one clause for both
    assert line.startswith("To loss 3.3, with or without overlap: B is fastest below 10 Gb/s")
    assert "with overlap none: B" not in line
    # the listed networks differ between the modes: not one claim for both; the table has each
    assert "on every listed network" not in line
    table = verdict(both, ["overlap", "host_link.rate"], LABELS).table
    listed_rows = table[table["where"].str.startswith("lan")]
    assert list(zip(listed_rows["held"], listed_rows["fastest"], strict=True)) == [
        ("overlap none", "A AdamW"),
        ("overlap buckets", "B top-k"),
    ]


def test_a_held_text_axis_that_changes_nothing_is_one_clause() -> None:
    """collective ring vs switch sum with the same winners: said once, not twice."""
    rows = pd.concat(
        [summary_1d().assign(collective=v) for v in ("ring_allreduce", "switch_sum")],
        ignore_index=True,
    )
    (line,) = verdict_sentences(rows, ["collective", "host_link.rate"], LABELS)
    assert line.startswith("To loss 3.3, whatever the collective: B top-k is fastest below")
    assert line.count("is fastest") == 1


def seeded(config: str, network: str, times: list[float], **extra: object) -> dict[str, object]:
    """A summary row whose interval columns are those of these per-seed times."""
    from transitsim.analysis.uncertainty import seed_interval

    sd, lo, hi, kind = seed_interval(times)
    return {
        "config": config,
        "network": network,
        "target": 3.0,
        "seeds": len(times),
        "time_to_target_s": sum(times) / len(times),
        "time_to_target_s_sd": sd,
        "time_to_target_s_lo": lo,
        "time_to_target_s_hi": hi,
        "interval": kind,
        **extra,
    }


MODES = {"lb-run": "E' loopback feedback", "ex-run": "E' exact feedback"}


def test_a_margin_below_the_threshold_is_a_tie_named_together_with_its_seeds() -> None:
    """The in-network-sum-modes case: 15.787 s against 15.789 s (0.014 %), seeds tight enough
    that their intervals do not overlap: a tie by the margin rule, a win without it."""
    rows = pd.DataFrame(
        [
            seeded("lb-run", "rack", [15.7869, 15.7870, 15.7871]),
            seeded("ex-run", "rack", [15.7891, 15.7892, 15.7893]),
        ]
    )
    (line,) = verdict_sentences(rows, [], MODES)
    assert line == ("To loss 3.0, E' loopback feedback and E' exact feedback tie (3 seeds each).")
    (strict,) = verdict_sentences(rows, [], MODES, tie_margin=0.0001)  # 0.01 % < 0.014 %
    assert strict == ("To loss 3.0, E' loopback feedback is fastest; E' exact feedback never wins.")
    row = verdict(rows, [], MODES).table.iloc[0]
    assert (row["outcome"], row["fastest"]) == ("tie", "E' loopback feedback = E' exact feedback")
    assert row["interval"].count("(95 % t)") == 2 and row["seeds"] == "3, 3"
    assert row["margin_min"] == pytest.approx(0.0022 / 15.787, rel=1e-3)


def test_overlapping_intervals_further_apart_than_the_margin_cannot_separate() -> None:
    """The two-datacentres case from two seeds: 452.0 s against 453.7 s is within 1 %, a tie;
    2.5 % apart with overlapping ranges is no tie (issue 43: intervals overlapping everything
    called configurations 14.8x apart ties) but "cannot separate"; apart, a win."""
    close = [seeded("B-run", "2dc", [451.8, 452.2]), seeded("A-run", "2dc", [453.6, 453.8])]
    (line,) = verdict_sentences(pd.DataFrame(close), [], LABELS)
    assert line == "To loss 3.0, B top-k and A AdamW tie (2 seeds each)."
    row = verdict(pd.DataFrame(close), [], LABELS).table.iloc[0]
    assert row["interval"] == "451.8 s-452.2 s (range) / 453.6 s-453.8 s (range)"
    wide = [seeded("B-run", "2dc", [430.0, 450.0]), seeded("A-run", "2dc", [445.0, 455.0])]
    assert verdict_sentences(pd.DataFrame(wide), [], LABELS) == [  # 2.5 % apart
        "To loss 3.0, B top-k leads (cannot separate from A AdamW)."
    ]
    row = verdict(pd.DataFrame(wide), [], LABELS).table.iloc[0]
    assert (row["outcome"], row["fastest"], row["cannot_separate"]) == (
        "leads",
        "B top-k",
        "A AdamW",
    )
    apart = [seeded("B-run", "2dc", [438.0, 442.0]), seeded("A-run", "2dc", [450.0, 460.0])]
    assert verdict_sentences(pd.DataFrame(apart), [], LABELS) == [
        "To loss 3.0, B top-k is fastest; A AdamW never wins."
    ]


def test_a_tie_along_a_sweep_is_one_run_whichever_is_ahead() -> None:
    rows = []
    for rate, (a, b) in zip(
        (1e9, 1e10, 1e11), ((10.0, 10.02), (10.02, 10.0), (5.0, 10.0)), strict=True
    ):
        rows.append(seeded("A-run", f"r{rate:g}", [a], **{"host_link.rate": rate}))
        rows.append(seeded("B-run", f"r{rate:g}", [b], **{"host_link.rate": rate}))
    (line,) = verdict_sentences(pd.DataFrame(rows), ["host_link.rate"], LABELS)
    assert line == (
        "To loss 3.0, A AdamW and B top-k tie below 100 Gb/s (1 seed each), "
        "A AdamW is fastest at 100 Gb/s; A and B from 1 seed each."
    )


def test_every_sentence_fits_two_lines_however_much_there_is_to_say() -> None:
    """Six long-named configurations on a 5 x 4 grid, three held axes, random times: each
    sentence still fits in two lines of 100 characters; the table holds the rest."""
    rng = np.random.default_rng(7)
    labels = {f"c{i}": f"{v} a long configuration label number {i}" for i, v in enumerate("ABCDEF")}
    rows = []
    for overlap in ("none", "buckets"):
        for aggregator in (False, True):
            for collective in ("ring_allreduce", "switch_sum"):
                for rate in (1e9, 1e10, 1e11, 4e11, 1.6e12):
                    for length in (1e4, 1e5, 1e6, 5e6):
                        for config in labels:
                            times = list(rng.uniform(10, 14, size=2))
                            rows.append(
                                seeded(
                                    config,
                                    f"g[{overlap},{aggregator},{collective},{rate},{length}]",
                                    times,
                                    overlap=overlap,
                                    **{
                                        "switch.aggregator": aggregator,
                                        "collective": collective,
                                        "wan_link.rate": rate,
                                        "wan_link.length": length,
                                    },
                                )
                            )
    frame = pd.DataFrame(rows)
    frame = pd.concat([frame, frame.assign(target=2.0)], ignore_index=True)
    params = ["overlap", "switch.aggregator", "collective", "wan_link.rate", "wan_link.length"]
    result = verdict(frame, params, labels, extrapolation="extrapolated to 1e9 parameters")
    assert len(result.sentences) == 2
    for line in result.sentences:
        assert len(textwrap.wrap(line, 100)) <= 2, line
        assert line.startswith("To loss") and line.endswith(".")
        assert "(extrapolated to 1e9 parameters)" in line
    assert len(result.table) >= 16  # every held group has its rows
