"""Steps-, bytes- and time-to-loss on runs with known numbers."""

import math
from pathlib import Path

import logfactory as lf
import numpy as np
import pandas as pd
import pytest

from transitsim.analysis.metrics import (
    crossovers,
    first_reaching,
    ladder,
    parse_targets,
    time_to_target,
)
from transitsim.analysis.uncertainty import seed_interval, t_quantile_975
from transitsim.base.errors import TransitsimError
from transitsim.traces.experiment_logs import import_log
from transitsim.traces.format import Trace


def study_traces(folder: Path) -> list[Trace]:
    return [import_log(log).trace for log in lf.write_study(folder)]


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> list[Trace]:
    return study_traces(tmp_path_factory.mktemp("study"))


def cell(table: pd.DataFrame, variant: str, target: float) -> pd.Series:
    rows = table[(table["variant"] == variant) & (table["target"] == target)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_first_reaching_takes_the_first_row_at_or_below_the_target() -> None:
    df = pd.DataFrame({"step": [600, 200, 400, 800], "val_loss": [2.0, 3.0, math.nan, 2.5]})
    assert first_reaching(df, 2.0)["step"] == 600  # exactly equal counts
    assert first_reaching(df, 3.0)["step"] == 200  # rows are taken in step order
    assert first_reaching(df, 2.6)["step"] == 600  # NaN rows were not evaluated
    assert first_reaching(df, 1.9) is None


def test_ladder_reproduces_a_known_table(traces: list[Trace]) -> None:
    table = ladder(traces, [3.158, 3.124, 3.087, 1.785])
    assert list(table.columns) == [
        "config",
        "variant",
        "target",
        "seeds",
        "reached",
        "steps",
        "payload_bytes",
        "wire_bytes",
        "steps_crossed",
        "steps_before",
    ]
    assert list(dict.fromkeys(table["variant"])) == ["A", "B", "C", "D", "F"]
    a = cell(table, "A", 3.158)
    assert (a["steps"], a["payload_bytes"], a["reached"]) == (400, 400 * lf.DENSE_BYTES, "3/3")
    assert a["payload_bytes"] == 12_666_777_600  # the slides' 12.67 GB
    assert a["wire_bytes"] == pytest.approx(400 * 1.75 * lf.DENSE_BYTES)
    assert cell(table, "A", 1.785)["steps"] == 2000
    assert cell(table, "B", 3.158)["payload_bytes"] == 400 * lf.TOPK_BYTES
    c = cell(table, "C", 3.158)
    assert c["steps"] == pytest.approx(8000 / 3)  # 2,667 on the slide
    assert c["payload_bytes"] == pytest.approx(8000 / 3 * lf.BAND_BYTES)
    assert c["wire_bytes"] == pytest.approx(8000 / 3 * 7 * lf.BAND_BYTES)
    assert cell(table, "D", 3.158)["steps"] == pytest.approx(7600 / 3)
    assert cell(table, "D", 3.124)["steps"] == pytest.approx(8000 / 3)
    assert cell(table, "F", 3.087)["steps"] == 1400
    # a seed that misses: NaN and r/n
    missed = cell(table, "C", 3.124)
    assert missed["reached"] == "2/3"
    assert math.isnan(missed["steps"]) and math.isnan(missed["payload_bytes"])
    assert cell(table, "B", 1.785)["reached"] == "0/3"
    assert cell(table, "F", 1.785)["seeds"] == 1


def test_target_equal_to_a_loss_counts_as_reached(traces: list[Trace]) -> None:
    table = ladder(traces, [3.15])
    assert cell(table, "C", 3.15)["reached"] == "3/3"
    assert cell(table, "C", 3.15)["steps"] == pytest.approx(8000 / 3)


def test_bytes_follow_the_rows_when_the_payload_changes() -> None:
    """Trainer traces have a row per step; D sends a different payload before calibration."""
    steps = pd.DataFrame(
        {
            "step": np.arange(1, 7),
            "val_loss": [math.nan, 4.0, math.nan, 3.0, math.nan, 2.0],
            "payload_bytes": [10, 10, 10, 20, 20, 20],
            "collective": ["all_gather"] * 6,
        }
    )
    meta = {"name": "x-s0", "variant": "D", "seed": 0, "workers": 4}
    trace = Trace(meta=meta, steps=steps)
    table = ladder([trace], [3.0, 2.0])
    assert table["steps"].tolist() == [4, 6]
    assert table["payload_bytes"].tolist() == [50, 90]
    assert table["wire_bytes"].tolist() == [150, 270]  # (W-1) x payload, derived


def test_the_same_run_twice_is_an_error(traces: list[Trace]) -> None:
    with pytest.raises(TransitsimError, match="appears twice"):
        ladder([traces[0], traces[0]], [3.0])


def test_parse_targets_numbers_and_final_losses(traces: list[Trace]) -> None:
    assert parse_targets("3.158, 3.124,1.785", traces) == [3.158, 3.124, 1.785]
    a_final = np.mean([t.final_val_loss for t in traces if t.variant == "A"])
    assert parse_targets("final:A", traces) == [pytest.approx(a_final)]
    assert parse_targets("final:tinystories-adamw-lr0.003", traces) == [pytest.approx(a_final)]
    c_final = np.mean([3.12, 3.15, 3.12])
    assert parse_targets("final:band-low-k16-1d256,3.0", traces) == [
        pytest.approx(c_final),
        3.0,
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "no loss targets"),
        ("3.1,abc", "bad loss target 'abc'"),
        ("nan", "bad loss target"),
        ("final:Z", "unknown configuration 'Z'"),
        ("final:band", "ambiguous"),
    ],
)
def test_parse_targets_errors(traces: list[Trace], spec: str, message: str) -> None:
    with pytest.raises(TransitsimError, match=message):
        parse_targets(spec, traces)


def timeline() -> pd.DataFrame:
    """Two configs x two seeds on two bandwidths: B is faster per step on the slow network."""
    rows = []
    for bandwidth, network in ((10, "wan-10"), (100, "wan-100")):
        for config, variant, step_s, reach in (
            ("base", "A", 1.0 + 100 / bandwidth, 4),
            ("topk", "B", 2.0, 6),
        ):
            for seed in (0, 1):
                reach_at = reach + (seed if config == "topk" else 0)
                for step in range(1, 11):
                    rows.append(
                        {
                            "run": f"{config}-s{seed}",
                            "config": config,
                            "variant": variant,
                            "network": network,
                            "step": step,
                            "val_loss": 2.0 if step >= reach_at else 3.0,
                            "time_s": step * step_s,
                            "wire_bytes": step * 1000.0,
                            "bandwidth_gbps": bandwidth,
                            "jitter_s": 0.001 * step,  # varies within a run: not a parameter
                        }
                    )
    return pd.DataFrame(rows)


def test_time_to_target_summarises_per_config_network_and_target() -> None:
    summary = time_to_target(timeline(), [2.0, 1.0], baseline_variant="A")
    assert list(summary.columns) == [
        "config",
        "variant",
        "network",
        "bandwidth_gbps",
        "target",
        "seeds",
        "reached",
        "steps_to_target",
        "time_to_target_s",
        "time_to_target_s_sd",
        "time_to_target_s_lo",
        "time_to_target_s_hi",
        "interval",
        "steps_to_target_sd",
        "steps_to_target_lo",
        "steps_to_target_hi",
        "bytes_to_target",
        "wan_bytes_to_target",
        "lan_bytes_to_target",
        "speedup_vs_baseline",
    ]
    assert len(summary) == 2 * 2 * 2

    def row(config, network, target):
        hit = summary[
            (summary.config == config) & (summary.network == network) & (summary.target == target)
        ]
        return hit.iloc[0]

    base = row("base", "wan-10", 2.0)
    assert (base["seeds"], base["reached"], base["steps_to_target"]) == (2, "2/2", 4)
    assert base["time_to_target_s"] == pytest.approx(4 * 11.0)
    assert base["bytes_to_target"] == 4000
    assert math.isnan(base["wan_bytes_to_target"])  # a timeline without the split: unknown
    assert base["speedup_vs_baseline"] == pytest.approx(1.0)
    topk = row("topk", "wan-10", 2.0)
    assert topk["steps_to_target"] == 6.5  # mean of the seeds' 6 and 7
    assert topk["time_to_target_s"] == pytest.approx(13.0)
    assert topk["speedup_vs_baseline"] == pytest.approx(44.0 / 13.0)
    assert row("topk", "wan-100", 2.0)["speedup_vs_baseline"] == pytest.approx(8.0 / 13.0)
    never = row("topk", "wan-10", 1.0)
    assert never["reached"] == "0/2" and math.isnan(never["time_to_target_s"])
    assert math.isnan(never["speedup_vs_baseline"])
    # two seeds: their range, called so (topk's seeds reach at steps 6 and 7: 12 s and 14 s),
    # widened to the evaluations before them (steps 5 and 6: 10 s and 12 s, mean 11 s)
    assert (topk["interval"], topk["time_to_target_s_lo"], topk["time_to_target_s_hi"]) == (
        "range",
        11.0,
        14.0,
    )
    assert topk["time_to_target_s_sd"] == pytest.approx(math.sqrt(2))
    assert (topk["steps_to_target_lo"], topk["steps_to_target_hi"]) == (5.5, 7)
    assert never[["time_to_target_s_lo", "time_to_target_s_hi"]].isna().all()
    assert not isinstance(never["interval"], str)  # no interval unless every seed reaches it


def seed_timeline(times_by_seed: dict[int, float], config: str = "c") -> pd.DataFrame:
    """One config on one network: seed s reaches the target (val loss 2.0) at time t_s, step
    t_s / 2 (a step takes 2 s)."""
    rows = []
    for seed, reach_s in times_by_seed.items():
        for step in range(1, 21):
            rows.append(
                {
                    "run": f"{config}-s{seed}",
                    "config": config,
                    "variant": "C",
                    "network": "lan",
                    "step": step,
                    "val_loss": 2.0 if 2.0 * step >= reach_s else 3.0,
                    "time_s": 2.0 * step,
                    "wire_bytes": 1000.0 * step,
                }
            )
    return pd.DataFrame(rows)


def test_three_seeds_give_a_t_interval_of_the_mean_on_log_time() -> None:
    """Seeds reaching at 10, 12 and 14 s: mean 12, sd 2; the interval is the t interval of the
    mean log time, exp(mean log -/+ t(0.975, 2) x sd(log) / sqrt(3)) with t(0.975, 2) = 4.3027
    (the t table), a factor either side, never at or below 0."""
    (row,) = time_to_target(seed_timeline({0: 10.0, 1: 12.0, 2: 14.0}), [2.0]).itertuples()
    assert row.time_to_target_s == 12.0 and row.interval == "t95"
    assert row.time_to_target_s_sd == pytest.approx(2.0)
    logs = np.log([10.0, 12.0, 14.0])
    half = 4.302653 * np.std(logs, ddof=1) / math.sqrt(3)
    assert row.time_to_target_s_lo == pytest.approx(math.exp(logs.mean() - half), abs=1e-5)
    assert row.time_to_target_s_hi == pytest.approx(math.exp(logs.mean() + half), abs=1e-5)
    assert row.steps_to_target == 6.0 and row.steps_to_target_sd == pytest.approx(1.0)


def test_two_seeds_give_their_range_and_one_seed_its_evaluations() -> None:
    (two,) = time_to_target(seed_timeline({0: 10.0, 1: 16.0}), [2.0]).itertuples()
    assert (two.interval, two.time_to_target_s_lo, two.time_to_target_s_hi) == ("range", 10, 16)
    (one,) = time_to_target(seed_timeline({0: 10.0}), [2.0]).itertuples()
    # evaluated every step (2 s): it crossed between 8 s (loss 3.0) and 10 s (2.0)
    assert (one.interval, one.time_to_target_s_lo, one.time_to_target_s_hi) == ("one seed", 8, 10)
    assert math.isnan(one.time_to_target_s_sd)


def coarse_timeline(reach_steps: dict[int, int], every: int = 25) -> pd.DataFrame:
    """Issue 43's H every 50: evaluated every 25 steps; seed s's loss falls linearly from 3.5 at
    step 0 to 2.5 at reach_steps[s] x 2 (so it crosses 3.0 at reach_steps[s]), 1 s a step."""
    rows = []
    for seed, reach in reach_steps.items():
        for step in range(1, 201):
            loss = 3.5 - 0.5 * step / reach
            rows.append(
                {
                    "run": f"h-s{seed}",
                    "config": "h",
                    "variant": "H",
                    "network": "wan",
                    "step": step,
                    "val_loss": loss if step % every == 0 else math.nan,
                    "time_s": float(step),
                    "wire_bytes": 10.0 * step,
                }
            )
    return pd.DataFrame(rows)


def test_steps_to_a_target_are_interpolated_between_evaluations() -> None:
    """A seed crossing 3.0 at step 40, evaluated at 25 (3.2) and 50 (2.875): the first
    evaluation at or below says 50; the crossing is at 40, and the interval is 25..50."""
    (row,) = time_to_target(coarse_timeline({0: 40}), [3.0]).itertuples()
    assert row.steps_to_target == pytest.approx(40.0)
    assert row.time_to_target_s == pytest.approx(40.0)
    assert row.bytes_to_target == pytest.approx(400.0)
    assert (row.time_to_target_s_lo, row.time_to_target_s_hi) == (25.0, 50.0)
    assert (row.steps_to_target_lo, row.steps_to_target_hi) == (25.0, 50.0)


def test_no_interval_bound_is_at_or_below_zero() -> None:
    """Issue 43: seeds first evaluated at or below the target at steps 50, 100 and 100 gave a
    linear t interval of +-86 %, and one from 0 s; on log time it stays above 0 and still
    holds every seed's evaluation bracket."""
    (row,) = time_to_target(coarse_timeline({0: 30, 1: 90, 2: 80}), [3.0]).itertuples()
    assert row.time_to_target_s == pytest.approx((30 + 90 + 80) / 3)
    assert row.time_to_target_s_lo > 0
    assert row.time_to_target_s_lo <= (25 + 75 + 75) / 3  # the mean of the brackets' lows
    assert row.time_to_target_s_hi >= (50 + 100 + 100) / 3
    for values in ([1e-6, 1.0, 1e3], [50.0, 100.0, 100.0]):
        assert seed_interval(values)[1] > 0


def test_t_quantiles_match_the_table() -> None:
    expected = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 9: 2.2622, 30: 2.0423}
    for dof, value in expected.items():
        assert t_quantile_975(dof) == pytest.approx(value, abs=1e-4)
    assert seed_interval([5.0, 5.0, 5.0]) == pytest.approx((0.0, 5.0, 5.0, "t95"))
    *figures, kind = seed_interval([])
    assert all(math.isnan(x) for x in figures) and kind == ""


def test_time_to_target_needs_every_seed() -> None:
    data = timeline()
    data = data[~((data.run == "topk-s1") & (data.step >= 7))]  # seed 1 stops before reaching
    summary = time_to_target(data, [2.0])
    partial = summary[(summary.config == "topk") & (summary.network == "wan-10")].iloc[0]
    assert partial["reached"] == "1/2"
    assert math.isnan(partial["steps_to_target"]) and math.isnan(partial["bytes_to_target"])
    assert summary["speedup_vs_baseline"].isna().all()  # no baseline asked for


def test_time_to_target_input_errors() -> None:
    with pytest.raises(TransitsimError, match="lacks column"):
        time_to_target(timeline().drop(columns="time_s"), [2.0])
    with pytest.raises(TransitsimError, match="unknown configuration 'E'"):
        time_to_target(timeline(), [2.0], baseline_variant="E")


def test_crossovers_find_where_the_winner_changes() -> None:
    summary = time_to_target(timeline(), [2.0, 1.0])
    table = crossovers(summary, "bandwidth_gbps")
    reached = table[table.target == 2.0]
    assert reached["bandwidth_gbps"].tolist() == [10, 100]
    assert reached["best_config"].tolist() == ["topk", "base"]
    assert reached["changed"].tolist() == [False, True]
    assert reached["runner_up_ratio"].tolist() == pytest.approx([44.0 / 13.0, 13.0 / 8.0])
    assert table[table.target == 1.0]["best_config"].isna().all()
    with pytest.raises(TransitsimError, match="no grid parameter 'latency_s'"):
        crossovers(summary, "latency_s")


def test_wan_bytes_are_interpolated_like_the_total_and_lan_is_the_rest() -> None:
    """A quarter of each step's bytes crossed the WAN: to the target (step 4) 1,000 of the
    4,000 bytes, 3,000 on the LAN; the column is never taken for a grid parameter."""
    frame = timeline()
    frame["wan_bytes"] = frame["wire_bytes"] / 4
    summary = time_to_target(frame, [2.0])
    assert "wan_bytes" not in summary.columns
    base = summary[(summary.config == "base") & (summary.network == "wan-10")].iloc[0]
    assert (base["wan_bytes_to_target"], base["lan_bytes_to_target"]) == (1000, 3000)


def test_the_ladder_carries_the_interpolated_crossing_and_its_bracket() -> None:
    """Issue 43: the "Steps to loss" chart read the first evaluation at or below (step 50 here)
    where the summary interpolates (the loss falls from 4.0 at 25 to 2.0 at 50, so 3.0 is
    crossed at 37.5): the ladder keeps both, and the bracket the step is known within."""
    steps = pd.DataFrame(
        {
            "step": [0, 25, 50, 75],
            "val_loss": [5.0, 4.0, 2.0, 1.5],
            "payload_bytes": [10] * 4,
            "collective": ["all_reduce"] * 4,
        }
    )
    trace = Trace(meta={"name": "x-s0", "variant": "A", "seed": 0, "workers": 2}, steps=steps)
    row = ladder([trace], [3.0, 5.0]).iloc[0]
    assert (row["steps_before"], row["steps_crossed"], row["steps"]) == (25, 37.5, 50)
    first = ladder([trace], [5.0]).iloc[0]  # already there at the first evaluation
    assert first["steps_before"] == first["steps_crossed"] == first["steps"] == 0
