"""The training loop (spec §4), LR schedule (§5) and the trace it writes, for every variant."""

import math
import random

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from trainer.config import make_config, preset_config, variant_id  # noqa: E402
from trainer.loop.run import TIMING_COLUMNS, lr_at, train  # noqa: E402
from trainer.naming import run_name  # noqa: E402
from transitsim.traces.format import read_trace  # noqa: E402

torch.set_num_threads(1)

WORDS = "the a cat dog sat on mat ran to house big small red blue and then".split()


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    """A small word-salad text: learnable in a few steps, unlike uniform synthetic tokens."""
    rng = random.Random(0)
    text = " ".join(rng.choice(WORDS) + ("." if rng.random() < 0.1 else "") for _ in range(6000))
    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text(text)
    return str(path)


def tiny_config(corpus: str, vid: str, **overrides):
    """The synthetic preset's model (1 layer, width 64, 2 workers) on the tiny text."""
    settings = dict(steps=30, threads=1, dataset=corpus, eval_every=10, block=32)
    return make_config("synthetic", vid, **{**settings, **overrides})


def test_lr_schedule_warms_up_then_decays_to_a_tenth():
    cfg = preset_config("tinystories-gpu")  # lr 1e-3, warmup 200, 3000 steps
    assert lr_at(399, cfg) == pytest.approx(9.888296e-4, rel=1e-6)  # spec §5 check value
    assert lr_at(0, cfg) == pytest.approx(1e-3 / 200)
    assert lr_at(99, cfg) == pytest.approx(1e-3 * 100 / 200)
    assert lr_at(199, cfg) == lr_at(200, cfg) == pytest.approx(1e-3)
    assert lr_at(2999, cfg) == pytest.approx(
        1e-3 * (0.1 + 0.45 * (1 + math.cos(math.pi * 2799 / 2800)))
    )
    assert lr_at(2999, cfg) > 1e-4
    schedule = [lr_at(s, cfg) for s in range(200, 3000)]
    assert all(a >= b for a, b in zip(schedule, schedule[1:], strict=False))


def test_variant_ids_map_to_algorithms_and_names():
    assert run_name(make_config("tinystories-gpu", "A", seed=1)) == "tinystories-adamw-lr0.003-s1"
    assert (
        run_name(make_config("tinystories-gpu", "D", seed=2))
        == "tinystories-calib-calib-k16-2d64-lr0.001-s2"
    )
    cfg = make_config("tinystories-gpu", "E", fs_every=100)
    assert run_name(cfg) == "tinystories-optics-low-k16-1d256-enob8.0-p8-agc100-fbsent-lr0.001-s0"
    assert (
        run_name(make_config("tinystories-gpu", "E", feedback="exact"))
        == "tinystories-optics-low-k16-1d256-enob8.0-p8-lr0.001-s0"
    )
    cfg = make_config("shakespeare", "E'", enob=None)
    assert run_name(cfg) == "shakespeare-opticsum-low-k16-1d256-enobNone-p8-fbloopback-lr0.001-s0"
    assert [
        variant_id(make_config("synthetic", v)) for v in ("A", "B", "C", "D", "E", "E'", "F")
    ] == ["A", "B", "C", "D", "E", "E'", "F"]
    assert variant_id(make_config("synthetic", "C", band="zigzag")) == "F"


VARIANT_CASES = [
    ("A", {}),
    ("B", {}),
    ("C", {}),
    ("C", {"chunk_mode": "1d", "chunk": 256}),
    ("D", {}),
    ("E", {"feedback": "exact"}),
    ("E", {"feedback": "sent"}),
    ("E'", {"feedback": "loopback"}),
    ("E'", {"feedback": "exact"}),
    ("E'", {"feedback": "mean"}),
    ("F", {"band": "zigzag"}),
    ("F", {"band": "high"}),
    ("F", {"band": "random"}),
]


@pytest.mark.parametrize(
    "vid,overrides",
    VARIANT_CASES,
    ids=[f"{v}-{'-'.join(map(str, o.values())) or 'default'}" for v, o in VARIANT_CASES],
)
def test_every_variant_trains_and_writes_a_valid_trace(tiny_corpus, tmp_path, vid, overrides):
    cfg = tiny_config(tiny_corpus, vid, **overrides)
    result = train(cfg, tmp_path, say=lambda _: None)
    trace = read_trace(result.trace_path)
    steps = trace.steps
    assert trace.variant == vid and trace.meta["status"] == "complete"
    assert list(steps["step"]) == list(range(1, 31))
    evaluated = steps.dropna(subset=["val_loss"])
    assert list(evaluated["step"]) == [10, 20, 30]
    val = list(evaluated["val_loss"])
    assert val[2] < val[0] < steps["train_loss"].iloc[0] - 0.3, val  # it learns
    assert list(steps["lr"]) == [lr_at(s, cfg) for s in range(30)]
    assert (steps["payload_bytes"] == trace.meta["payload_bytes_per_step"]).all()
    assert (steps[list(TIMING_COLUMNS)] >= 0).all().all()
    assert trace.meta["n_params"] == 64 * 64 + 32 * 64 + (12 * 64 * 64 + 2 * 64) + 64
    assert not (tmp_path / f"{trace.name}.ckpt").exists()  # deleted once complete
    if vid == "A":
        assert (steps["collective"] == "all_reduce").all() and len(trace.diagnostics) == 0
        assert (steps["compress_s"] == 0).all()
    else:
        assert set(trace.diagnostics["step"]) == {10, 20, 30}  # diag_every 10
        assert set(trace.diagnostics["source"]) == {"delta", "momentum", "grad"}
        shares = trace.diagnostics["share"]
        assert ((shares >= 0) & (shares <= 1 + 1e-9)).all()
    if vid in ("E", "E'"):
        # Calibration covers 0-based steps 4..7; the clip rates exist from step 8 on.
        assert steps["clip_rate"].iloc[:7].isna().all()
        assert steps["clip_rate"].iloc[8:].notna().all()
        assert (steps["clip_rate"].iloc[8:] > 0).all()
    else:
        assert "clip_rate" not in steps


def test_trace_metadata_describes_the_run(tiny_corpus, tmp_path):
    cfg = tiny_config(tiny_corpus, "B", steps=12)
    meta = read_trace(train(cfg, tmp_path, say=lambda _: None).trace_path).meta
    assert meta["name"] == "tiny-topk-k16-2d64-lr0.001-s0" == run_name(cfg)
    assert meta["config"] == cfg.to_dict()
    assert meta["variant_params"]["chunk"] == 64 and meta["variant_params"]["keep"] == 1 / 16
    assert meta["model"]["vocab"] == 64 and meta["model"]["vocab_real"] < 64
    assert meta["workers"] == 2 and meta["batch"] == 2 and meta["context"] == 32
    assert meta["tokenizer"] == "characters" and meta["corpus"] == "tiny"
    assert meta["hardware"]["device"] == "cpu" and meta["versions"]["torch"] == torch.__version__
    assert meta["payload_bytes_int64_per_step"] > meta["payload_bytes_per_step"]
    assert meta["wire_bytes_per_step"] == meta["payload_bytes_per_step"]  # (W-1) x payload, W=2
    assert meta["dense_bytes_per_step"] == 2 * meta["n_params"]
    assert meta["steps_planned"] == 12 and meta["rows"] == "every_step"
    assert meta["source_revision"]


def _without_timing(path) -> tuple[pd.DataFrame, pd.DataFrame]:
    trace = read_trace(path)
    return trace.steps.drop(columns=list(TIMING_COLUMNS)), trace.diagnostics


@pytest.mark.parametrize("vid", ["A", "E"])
def test_two_runs_give_identical_traces(tiny_corpus, tmp_path, vid):
    cfg = tiny_config(tiny_corpus, vid, steps=20, feedback="sent" if vid == "E" else "exact")
    a = _without_timing(train(cfg, tmp_path / "a", say=lambda _: None).trace_path)
    b = _without_timing(train(cfg, tmp_path / "b", say=lambda _: None).trace_path)
    pd.testing.assert_frame_equal(a[0], b[0], check_exact=True)
    pd.testing.assert_frame_equal(a[1], b[1], check_exact=True)
    other = _without_timing(
        train(
            tiny_config(tiny_corpus, vid, steps=20, seed=1), tmp_path / "c", say=lambda _: None
        ).trace_path
    )
    assert not np.array_equal(a[0]["train_loss"], other[0]["train_loss"])


def test_a_complete_trace_is_not_trained_again_unless_forced(tiny_corpus, tmp_path):
    cfg = tiny_config(tiny_corpus, "C", steps=5)
    said: list[str] = []
    first = train(cfg, tmp_path, say=said.append)
    again = train(cfg, tmp_path, say=said.append)
    assert first.status == "complete" and again.status == "skipped"
    assert "already complete" in said[-1]
    forced = train(cfg, tmp_path, force=True, say=said.append)
    assert forced.status == "complete" and forced.steps_done == 5


def test_a_diverging_run_stops_with_a_note(tiny_corpus, tmp_path):
    cfg = tiny_config(tiny_corpus, "A", steps=10, lr=1e30)
    result = train(cfg, tmp_path, say=lambda _: None)
    trace = read_trace(result.trace_path)
    assert result.steps_done < 10 and any(n.startswith("diverged") for n in trace.meta["notes"])
    assert trace.steps["train_loss"].notna().all()
