"""The verdict in words and the human units it (and the report) print numbers in."""

import math

import pandas as pd
import pytest

from transitsim.analysis.verdict import verdict_sentences
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
    assert line.startswith("To loss 3.3, B top-k is fastest at every host_link.rate swept")
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


def test_listed_networks_and_held_text_parameters() -> None:
    frame = summary_1d().assign(**{"placement.sum": "receivers"})
    other = summary_1d().assign(**{"placement.sum": "switch"})
    other.loc[other.config == "C-run", "time_to_target_s"] = 0.5
    other["network"] += "+sum"
    (line,) = verdict_sentences(
        pd.concat([frame, other]), ["placement.sum", "host_link.rate"], LABELS
    )
    assert "with placement.sum receivers: B top-k is fastest below 10 Gb/s" in line
    assert "with placement.sum switch: C band is fastest at every host_link.rate" in line
    listed = pd.DataFrame(
        [
            {"config": "A-run", "network": "lan", "target": 3.0, "time_to_target_s": 1.0},
            {"config": "B-run", "network": "lan", "target": 3.0, "time_to_target_s": 2.0},
        ]
    )
    assert verdict_sentences(listed, [], LABELS) == [
        "To loss 3.0, A AdamW is fastest on every network (1); B top-k never wins."
    ]


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
    (line,) = verdict_sentences(
        pd.concat([grid, listed], ignore_index=True), ["overlap", "host_link.rate"], LABELS
    )
    assert "no configuration reaches it" not in line
    # the listed networks differ between the modes: one clause each
    assert "on the listed networks, with overlap none: A AdamW is fastest on every network" in line
    assert "listed networks, with overlap buckets: B top-k is fastest on every network" in line
    # the grid says the same in both modes: one clause for both
    assert "with or without overlap: B top-k is fastest below 10 Gb/s" in line
    assert "with overlap none: B top-k" not in line


def test_a_held_text_axis_that_changes_nothing_is_one_clause() -> None:
    """placement.sum receivers vs switch with the same winners: said once, not twice."""
    rows = pd.concat(
        [summary_1d().assign(**{"placement.sum": v}) for v in ("receivers", "switch")],
        ignore_index=True,
    )
    (line,) = verdict_sentences(rows, ["placement.sum", "host_link.rate"], LABELS)
    assert line.startswith("To loss 3.3, whatever the placement.sum: B top-k is fastest below")
    assert line.count("is fastest") == 1
