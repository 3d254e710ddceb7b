"""transitsim.simulate: the notebook API over traces x networks."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import transitsim
from transitsim.base.errors import TransitsimError
from transitsim.network import LinkSpec, NetworkSpec, PluggableSpec, TransformSpec
from transitsim.simulation import SimulationResult, simulate
from transitsim.traces.format import read_trace, write_trace

WORKERS = 4
DENSE_BYTES = 2_000_000
FAST = NetworkSpec("fast", "switch", workers=WORKERS, host_link=LinkSpec(rate_bps=400e9))
SLOW = NetworkSpec("slow", "switch", workers=WORKERS, host_link=LinkSpec(rate_bps=1e9))


def write_run(folder: Path, variant: str, seed: int, payload_bytes: int, collective: str) -> Path:
    """A 20-step run whose validation loss falls from 5 to 3 (evaluated every 5 steps)."""
    step = np.arange(1, 21)
    frame = pd.DataFrame(
        {
            "step": step,
            "train_loss": np.linspace(5.0, 3.0, 20),
            "val_loss": np.where(step % 5 == 0, np.linspace(5.0, 3.0, 20) + 0.01 * seed, np.nan),
            "lr": 1e-3,
            "payload_bytes": payload_bytes,
            "collective": collective,
            "reducible": True,
            "compute_s": 0.01,
            "compress_s": 0.001 if variant != "A" else 0.0,
        }
    )
    meta = {
        "name": f"{variant}-tiny-s{seed}".replace("'", "p"),
        "variant": variant,
        "seed": seed,
        "workers": WORKERS,
        "n_params": DENSE_BYTES // 2,
        "dense_bytes_per_step": DENSE_BYTES,
        "rows": "every_step",
        "origin": "trainer",
        "status": "complete",
    }
    return write_trace(folder / f"{meta['name']}.parquet", frame, meta)


@pytest.fixture
def traces(tmp_path) -> Path:
    folder = tmp_path / "traces"
    for seed in (0, 1):
        write_run(folder, "A", seed, DENSE_BYTES, "all_reduce")
        write_run(folder, "C", seed, DENSE_BYTES // 16, "all_gather")
    return folder


def test_simulate_folders_on_two_networks(traces):
    result = simulate([traces], [FAST, SLOW], targets=[4.0, 3.5])
    assert isinstance(result, SimulationResult)
    timeline, summary = result.timeline, result.summary
    assert len(timeline) == 4 * 20 * 2
    assert set(timeline["network"]) == {"fast", "slow"}
    assert len(summary) == 2 * 2 * 2  # configs x networks x targets
    assert summary["reached"].eq("2/2").all()
    a_rows = summary[summary["variant"] == "A"]
    assert np.allclose(a_rows["speedup_vs_baseline"], 1.0)
    c_slow = summary[(summary["variant"] == "C") & (summary["network"] == "slow")]
    assert (c_slow["speedup_vs_baseline"] > 1.5).all()  # 1/16 of the bytes on a slow wire
    # the speed-up is the ratio of the timelines' times at the first evaluation under the target
    a_time = timeline.query("variant == 'A' and network == 'slow' and step == 15")["time_s"]
    c_time = timeline.query("variant == 'C' and network == 'slow' and step == 15")["time_s"]
    expected = a_time.mean() / c_time.mean()
    got = c_slow.loc[c_slow["target"] == 3.5, "speedup_vs_baseline"].iloc[0]
    assert got == pytest.approx(expected, rel=1e-12)
    assert set(result.link_stats["network"]) == {"fast", "slow"}
    assert not summary["extrapolated"].any() and result.notes == []


def test_default_target_is_the_baseline_final_loss(traces):
    result = simulate(traces, SLOW)
    final_a = np.mean([3.0, 3.01])  # mean over A's seeds of its last evaluated loss
    assert result.summary["target"].unique().tolist() == [pytest.approx(final_a)]
    spec = simulate(traces, SLOW, targets="4.0,final:A").summary
    assert sorted(spec["target"].unique()) == [pytest.approx(final_a), 4.0]


def test_trace_objects_and_what_if_scale(traces):
    loaded = [read_trace(path) for path in sorted(traces.glob("*.parquet"))]
    result = simulate(loaded, [SLOW], targets=[3.5], scale_params=10 * DENSE_BYTES)
    assert result.timeline["extrapolated"].all() and result.summary["extrapolated"].all()
    assert result.summary.attrs["extrapolated"] and result.summary.attrs["notes"] == result.notes
    assert any("extrapolated" in note for note in result.notes)


def test_transform_placement_applies_to_optical_variants(traces, tmp_path):
    write_run(traces, "E", 0, DENSE_BYTES // 16, "all_gather")
    transform = TransformSpec(size=256, planes=8, passes_per_s=1e9, keep=1 / 16)
    plug = dataclasses.replace(
        SLOW, name="plug", pluggable=PluggableSpec(1e9, 1e9, transform=transform)
    )
    result = simulate(traces, plug, targets=[3.5], transform_at="pluggable")
    by_variant = result.timeline.groupby("variant")["compress_s"].max()
    assert by_variant["E"] == 0.0 and by_variant["C"] == 0.001  # only E moved to the module
    explicit = simulate(traces, plug, targets=[3.5], transform_at={"C": "pluggable"}).timeline
    assert explicit.groupby("variant")["compress_s"].max()["C"] == 0.0


def test_bad_input_is_a_transitsim_error(traces, tmp_path):
    (tmp_path / "empty").mkdir()
    one = traces / "A-tiny-s0.parquet"
    for call in (
        lambda: simulate([one, one], SLOW, targets=[3.5]),
        lambda: simulate([tmp_path / "empty"], SLOW, targets=[3.5]),
        lambda: simulate([tmp_path / "missing.parquet"], SLOW, targets=[3.5]),
        lambda: simulate([traces], [], targets=[3.5]),
        lambda: simulate([traces], ["rack"], targets=[3.5]),
        lambda: simulate([traces], [SLOW, SLOW], targets=[3.5]),
        lambda: simulate([traces], SLOW, targets=[]),
        lambda: simulate([traces], SLOW, targets=["low"]),
        lambda: simulate([traces / "C-tiny-s0.parquet"], SLOW, targets=None),  # no A, no targets
        lambda: simulate([traces], SLOW, targets=[3.5], baseline="B"),
        lambda: simulate([42], SLOW, targets=[3.5]),
    ):
        with pytest.raises(TransitsimError):
            call()


def test_package_attributes(traces):
    assert transitsim.SimulationResult is SimulationResult
    # Here the submodule was imported first, so the attribute may be the (callable) module.
    via_package = transitsim.simulate(traces, SLOW, targets=[3.5])
    direct = simulate(traces, SLOW, targets=[3.5])
    pd.testing.assert_frame_equal(via_package.summary, direct.summary)


def _run_python(script: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=120)


def test_import_stays_light():
    _run_python(
        "import sys, transitsim\n"
        "assert 'pandas' not in sys.modules and 'transitsim.replay.replay' not in sys.modules\n"
        "function = transitsim.simulate\n"
        "from transitsim.simulation import simulate\n"
        "assert function is simulate and transitsim.simulate is simulate\n"
    )


def test_simulate_callable_after_importing_the_module_first():
    # The function and its module have different names, so importing the module first
    # cannot shadow the package attribute.
    _run_python(
        "import transitsim.simulation\n"
        "import transitsim\n"
        "from transitsim.base.errors import TransitsimError\n"
        "try:\n"
        "    transitsim.simulate([], [])\n"
        "except TransitsimError as exc:\n"
        "    assert 'no traces' in str(exc), exc\n"
        "else:\n"
        "    raise SystemExit('no error')\n"
    )


def test_baseline_defaults_to_a_only_when_there_is_an_a_run(traces):
    # With an A run, speed-ups are against A; without one, there are none (and no error).
    with_a = simulate([traces], SLOW, targets=[3.5]).summary
    assert np.allclose(with_a.loc[with_a["variant"] == "A", "speedup_vs_baseline"], 1.0)
    only_c = [read_trace(path) for path in sorted(traces.glob("*.parquet"))]
    only_c = [trace for trace in only_c if trace.variant == "C"]
    summary = simulate(only_c, SLOW, targets=[3.5]).summary
    assert len(summary) == 1 and summary["speedup_vs_baseline"].isna().all()
