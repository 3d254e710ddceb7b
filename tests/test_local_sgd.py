"""The local-SGD variants H (DiLoCo), H-s (Streaming DiLoCo) and L (SparseLoCo), by hand.

Bytes of every sync step from the formulas of docs/local-sgd.md on shapes small enough to count;
no payload on inner steps; the outer Nesterov step on two replicas of one parameter against the
formula and against torch.optim.SGD; the staggered fragment schedule and the tau-step landing;
SparseLoCo's error feedback keeping exactly what was not sent; the codecs' levels; checkpoint
states merged over processes; and short real runs whose traces say what the schedule says.
"""

import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trainer.config import make_config  # noqa: E402
from trainer.loop.run import train  # noqa: E402
from trainer.variants.accounting import byte_accounting, index_bytes  # noqa: E402
from trainer.variants.exchange import LocalExchange  # noqa: E402
from trainer.variants.local_sgd import LocalSGD, merge_states  # noqa: E402
from trainer.variants.local_sgd_codecs import e3m0, two_bit  # noqa: E402
from trainer.variants.local_sgd_schedule import Schedule, assign_fragments  # noqa: E402
from transitsim.base.errors import TransitsimError  # noqa: E402
from transitsim.traces.format import read_trace  # noqa: E402

torch.set_num_threads(1)
WORDS = "the a cat dog sat on mat ran to house big small red blue and then".split()
# One matrix of two 64 x 64 tiles and one vector of two 64-runs: 8,320 values.
SMALL = {"w": (64, 128), "v": (128,)}


def cfg_for(vid: str, **overrides):
    settings = dict(steps=40, threads=1, workers=4)
    return make_config("synthetic", vid, **{**settings, **overrides})


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    rng = random.Random(0)
    text = " ".join(rng.choice(WORDS) + ("." if rng.random() < 0.1 else "") for _ in range(6000))
    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text(text)
    return str(path)


# --- bytes -------------------------------------------------------------------------------


def test_diloco_sends_the_dense_model_in_bf16_on_each_sync():
    acc = byte_accounting(SMALL, cfg_for("H", inner_steps=10), 8)
    (sync,) = acc.syncs
    assert sync.payload_bytes == sync.payload_int64_bytes == 8320 * 2 == 16_640
    assert sync.wire_bytes == 2 * 7 / 8 * 16_640 == 29_120.0
    assert (acc.collective, acc.reducible) == ("all_reduce", True)
    assert acc.payload_bytes == 1_664  # the mean per step over a round of 10
    assert acc.at_step(10) == (16_640, 16_640, 29_120.0) and acc.at_step(20)[0] == 16_640


def test_streaming_diloco_sends_one_fragment_at_four_bits_plus_a_scale_byte():
    cfg = cfg_for("H-s", inner_steps=10, fragments=2, overlap=1)
    acc = byte_accounting(SMALL, cfg, 8)
    assert [s.tensors for s in acc.syncs] == [("w",), ("v",)]
    # w: 8,192 values at 4 bits + 1 exponent byte; v: 128 at 4 bits + 1
    assert [s.payload_bytes for s in acc.syncs] == [8192 // 2 + 1, 128 // 2 + 1] == [4097, 65]
    assert [s.wire_bytes for s in acc.syncs] == [2 * 7 / 8 * 4097, 2 * 7 / 8 * 65]
    assert acc.at_step(5) == (65, 65, 2 * 7 / 8 * 65)  # fragment 1 at 5 (mod 10)
    assert acc.at_step(10)[0] == 4097 and acc.at_step(15)[0] == 65
    odd = byte_accounting({"x": (3, 5)}, cfg_for("H-s", inner_steps=10, fragments=1), 8)
    assert odd.syncs[0].payload_bytes == math.ceil(15 / 2) + 1 == 9  # a half byte rounds up


def test_sparseloco_sends_two_bit_values_positions_and_a_scale_per_chunk():
    acc = byte_accounting(SMALL, cfg_for("L", inner_steps=10), 8)
    (sync,) = acc.syncs
    # w: 2 tiles of 4,096, k = 64: 64 values at 2 bits = 16 B, 64 positions at 2 B, 2 B scale
    w_bytes = 2 * (16 + 64 * 2 + 2)
    # v: 2 runs of 64, k = round(64 / 64) = 1: 1 B of values, 1 B position, 2 B scale
    v_bytes = 2 * (1 + 1 + 2)
    assert (index_bytes(4096), index_bytes(64)) == (2, 1)
    assert sync.payload_bytes == w_bytes + v_bytes == 300
    assert sync.payload_int64_bytes == 2 * (16 + 64 * 8 + 2) + 2 * (1 + 8 + 2) == 1_082
    assert sync.wire_bytes == 7 * 300
    assert (acc.collective, acc.reducible) == ("all_gather", False)
    three = byte_accounting(SMALL, cfg_for("L", inner_steps=10, keep=3 / 100), 8)
    assert three.syncs[0].payload_bytes == 2 * (31 + 123 * 2 + 2) + 2 * (1 + 2 * 1 + 2)


RUNS = {
    "H": dict(inner_steps=5),
    "H-s": dict(inner_steps=6, fragments=3, overlap=2),
    "L": dict(inner_steps=5),
}


@pytest.fixture(scope="module")
def traces(tiny_corpus, tmp_path_factory):
    """One short run of each variant, evaluated every step (20 steps at a tiny scale)."""
    out = tmp_path_factory.mktemp("runs")
    runs = {}
    for vid, extra in RUNS.items():
        cfg = replace(cfg_for(vid, **extra), dataset=tiny_corpus, block=32, steps=20, eval_every=1)
        runs[vid] = (cfg, read_trace(train(cfg, out / vid, say=lambda _: None).trace_path))
    return runs


def test_the_trace_carries_each_sync_steps_bytes_and_zero_on_inner_steps(traces):
    for vid, (cfg, trace) in traces.items():
        steps = trace.steps
        acc_syncs = trace.meta["local_sgd"]["sync_payload_bytes"]
        schedule = Schedule(cfg.inner_steps, cfg.fragments, cfg.overlap)
        for _, row in steps.iterrows():
            fragment = schedule.sync_fragment(int(row["step"]))
            if fragment is None:
                assert row["payload_bytes"] == row["wire_bytes"] == 0, (vid, row["step"])
                assert not row["outer_sync"] and row["lands_step"] == 0
            else:
                assert row["payload_bytes"] == acc_syncs[fragment] > 0, (vid, row["step"])
                assert row["outer_sync"] and row["sync_fragment"] == fragment
                assert row["lands_step"] == row["step"] + cfg.overlap
        assert steps["outer_sync"].sum() == {"H": 4, "H-s": 10, "L": 4}[vid]
        assert trace.meta["variant"] == vid and trace.meta["status"] == "complete"
        assert trace.meta["local_sgd"]["inner_steps"] == cfg.inner_steps
        assert trace.meta["local_sgd"]["overlap_steps"] == cfg.overlap
        shapes = _shapes(trace)
        named = [name for names in trace.meta["local_sgd"]["fragment_tensors"] for name in names]
        assert sorted(named) == sorted(shapes)
        assert sum(math.prod(s) for s in shapes.values()) == trace.meta["n_params"]


def test_every_variant_learns_and_evaluates_the_shared_weights(traces):
    """The loss falls for each, and the validation loss moves only on the steps where an outer
    update has landed: the shared weights are what is evaluated."""
    for vid, (cfg, trace) in traces.items():
        val = trace.steps["val_loss"].to_numpy()
        assert val[-1] < val[0] - 0.05, (vid, val[0], val[-1])
        schedule = Schedule(cfg.inner_steps, cfg.fragments, cfg.overlap)
        landed = np.array([schedule.landing_fragment(t) is not None for t in range(2, 21)])
        moved = np.diff(val) != 0
        assert not moved[~landed].any() and moved[landed].all(), vid


def _shapes(trace) -> dict[str, tuple[int, ...]]:
    from trainer.model import ModelShape, param_shapes

    return param_shapes(
        ModelShape(**{k: trace.meta["model"][k] for k in ModelShape.__annotations__})
    )


# --- the outer step ----------------------------------------------------------------------


class Replicas:
    """Two replicas of one parameter, the inner step switched off (lr 0), synced every step."""

    def __init__(self, vid: str, shape=(1,), **overrides) -> None:
        cfg = cfg_for(vid, workers=2, inner_steps=1, **overrides)
        self.param = torch.nn.Parameter(torch.ones(shape))
        self.local = LocalSGD([("w", self.param)], cfg, LocalExchange(2))

    def sync(self, values) -> float:
        self.local.replica["w"].copy_(torch.tensor(values, dtype=torch.float32).view(2, -1))
        zero = {"w": torch.zeros_like(self.local.replica["w"])}
        self.local.step(zero, 0.0, self.local.inner_t)
        return self.local.theta["w"]


def test_outer_nesterov_step_on_two_replicas_of_one_parameter_is_the_formula():
    run = Replicas("H")
    lr, mu = 0.7, 0.9
    theta, v = 1.0, 0.0
    reference = torch.nn.Parameter(torch.ones(1))
    sgd = torch.optim.SGD([reference], lr=lr, momentum=mu, nesterov=True)
    for replicas in ([0.8, 0.6], [0.5, 0.3], [0.2, 0.4]):
        delta = theta - sum(replicas) / 2  # the averaged pseudo-gradient
        v = mu * v + delta
        theta = theta - lr * (delta + mu * v)
        got = run.sync(replicas)
        assert float(got) == pytest.approx(theta, rel=1e-6, abs=1e-7)
        reference.grad = reference.detach() - torch.tensor([sum(replicas) / 2])
        sgd.step()
        assert float(got) == pytest.approx(float(reference.detach()), rel=1e-6, abs=1e-7)
        assert torch.equal(run.local.replica["w"], got.expand(2, 1))  # both take theta
    assert float(got) == pytest.approx(0.07797, abs=1e-5)  # 1 -> 0.601 -> 0.16357 -> 0.07797


def test_outer_momentum_zero_is_plain_sgd_and_l_has_no_momentum():
    run = Replicas("H", outer_momentum=0.0, outer_lr=0.5)
    assert float(run.sync([0.8, 0.6])) == pytest.approx(1 - 0.5 * 0.3)
    with pytest.raises(TransitsimError, match="no outer momentum"):
        cfg_for("L", outer_momentum=0.9)


def test_streaming_fragments_are_staggered_and_land_tau_steps_late():
    schedule = Schedule(inner_steps=10, fragments=5, overlap=3)
    starts = [schedule.sync_fragment(t) for t in range(1, 23)]
    assert starts == [
        None, 1, None, 2, None, 3, None, 4, None, 0,
        None, 1, None, 2, None, 3, None, 4, None, 0, None, 1,
    ]  # fmt: skip
    lands = [schedule.landing_fragment(t) for t in range(1, 16)]
    assert lands == [None, None, None, None, 1, None, 2, None, 3, None, 4, None, 0, None, 1]
    assert schedule.sync_steps(0, 40) == [10, 20, 30, 40]
    assert schedule.sync_steps(3, 40) == [6, 16, 26, 36]
    diloco = Schedule(inner_steps=50)
    assert [t for t in range(1, 201) if diloco.sync_fragment(t) is not None] == [50, 100, 150, 200]
    with pytest.raises(ValueError):
        Schedule(inner_steps=10, fragments=3)
    with pytest.raises(TransitsimError, match="must divide inner_steps"):
        cfg_for("H-s", inner_steps=10, fragments=3)


def test_fragments_balance_whole_tensors_by_size():
    shapes = {"a": (10,), "b": (40,), "c": (30,), "d": (20,), "e": (5,)}
    # b 40 -> 0; c 30 -> 1; d 20 -> 1 (30 < 40); a 10 -> 0 (40 < 50); e 5 -> 0 (tie: lowest)
    assert assign_fragments(shapes, 2) == {"a": 0, "b": 0, "c": 1, "d": 1, "e": 0}
    assert assign_fragments(shapes, 1) == dict.fromkeys(shapes, 0)
    with pytest.raises(ValueError, match="empty"):
        assign_fragments(shapes, 6)


def test_a_streaming_fragment_update_waits_tau_steps_then_mixes_into_the_replicas():
    cfg = cfg_for("H-s", workers=2, inner_steps=4, fragments=2, overlap=1, mix=0.5)
    a = torch.nn.Parameter(torch.ones(3))
    b = torch.nn.Parameter(torch.ones(2))
    local = LocalSGD([("a", a), ("b", b)], cfg, LocalExchange(2))
    assert local.fragments == [["a"], ["b"]]
    zero = {"a": torch.zeros(2, 3), "b": torch.zeros(2, 2)}
    local.replica["b"].copy_(torch.tensor([[0.5, 0.5], [0.25, 0.25]]))
    local.step(zero, 0.0, 1)  # step 2 = fragment 1 (b) starts; nothing lands yet
    assert torch.equal(local.theta["b"], torch.ones(2)) and 1 in local.pending
    local.replica["b"].copy_(torch.tensor([[0.0, 0.0], [0.0, 0.0]]))  # training went on
    local.step(zero, 0.0, 2)  # step 3: b lands
    delta = e3m0(torch.tensor([[0.5, 0.5], [0.75, 0.75]])).mean(0)  # what was sent
    theta_b = 1 - 0.7 * (delta + 0.9 * delta)
    assert torch.allclose(local.theta["b"], theta_b)
    assert torch.allclose(local.replica["b"], (0.5 * 0.0 + 0.5 * theta_b).expand(2, 2))
    assert torch.equal(local.theta["a"], torch.ones(3)) and not local.pending


# --- SparseLoCo's error feedback -----------------------------------------------------------


def test_sparseloco_error_feedback_keeps_what_was_not_sent():
    cfg = cfg_for("L", workers=2, inner_steps=1, chunk_mode="1d", chunk=8, keep=2 / 8, decay=0.5)
    param = torch.nn.Parameter(torch.zeros(16))
    local = LocalSGD([("w", param)], cfg, LocalExchange(2))
    gen = torch.Generator().manual_seed(3)
    old_error = torch.randn(2, 16, generator=gen)
    local.error["w"].copy_(old_error)
    replicas = torch.randn(2, 16, generator=gen)
    local.replica["w"].copy_(replicas)
    before = (0.5 * old_error + (0.0 - replicas)).view(2, 2, 8)  # beta e + delta, per chunk
    local.step({"w": torch.zeros(2, 16)}, 0.0, 0)
    after = local.error["w"].view(2, 2, 8)
    top2 = before.abs().topk(2, dim=-1).indices
    chosen = torch.zeros_like(before, dtype=torch.bool).scatter_(-1, top2, True)
    # Not chosen: carried in full, bit for bit. Chosen: only the 2-bit rounding error remains.
    assert torch.equal(after[~chosen], before[~chosen])
    sent = two_bit(before.gather(-1, top2))
    assert torch.allclose(after.gather(-1, top2), before.gather(-1, top2) - sent, atol=1e-7)
    # The shared weights moved by the mean of what both replicas sent (outer lr 1).
    dense = torch.zeros_like(before).scatter_(-1, top2, sent)
    assert torch.allclose(local.theta["w"], -dense.sum(0).reshape(16) / 2, atol=1e-7)
    assert torch.equal(local.replica["w"], local.theta["w"].expand(2, 16))


def test_codecs_round_to_their_levels():
    x = torch.tensor([[1.0, 0.75, 0.74, -0.3, 0.01, 1 / 128, 0.0078, 0.0]])
    assert e3m0(x).tolist() == [[1.0, 1.0, 0.5, -0.25, 1 / 64, 1 / 64, 0.0, 0.0]]
    assert e3m0(torch.tensor([[0.5, 0.2], [3.0, 0.0]])).tolist() == [[0.5, 0.25], [4.0, 0.0]]
    assert e3m0(torch.zeros(1, 3)).tolist() == [[0.0, 0.0, 0.0]]
    levels = {abs(v) for v in e3m0(torch.randn(1, 4000)).flatten().tolist()}
    assert len(levels) <= 8  # zero and seven powers of two
    assert two_bit(torch.tensor([[3.0, -1.0, 0.4, -3.0]])).tolist() == [[3.0, -1.0, 1.0, -3.0]]
    assert two_bit(torch.zeros(1, 4)).tolist() == [[0.0] * 4]
    assert len(set(two_bit(torch.randn(1, 64)).flatten().tolist())) <= 4


# --- checkpoints and runs ------------------------------------------------------------------


class Half:
    """The exchange of a process holding `local` of W replicas from `offset` (state only)."""

    backend, world = "gloo", 2

    def __init__(self, workers: int, local: int, offset: int) -> None:
        self.workers, self.local_workers, self.offset, self.rank = workers, local, offset, offset


def test_states_of_two_processes_merge_into_the_state_of_one():
    cfg = cfg_for("L", workers=4, inner_steps=1)
    params = [("w", torch.nn.Parameter(torch.zeros(64, 64)))]
    whole = LocalSGD(params, cfg, LocalExchange(4))
    whole.replica["w"].copy_(torch.randn(4, 64, 64))
    whole.error["w"].copy_(torch.randn(4, 64, 64))
    whole.exp_avg_sq["w"].copy_(torch.rand(4, 64, 64))
    halves = [LocalSGD(params, cfg, Half(4, 2, offset)) for offset in (0, 2)]
    for half in halves:
        half.load_state_dict(whole.state_dict())  # each takes its two replicas
        assert torch.equal(half.replica["w"], whole.replica["w"][half.offset : half.offset + 2])
    merged = merge_states([halves[1].state_dict(), halves[0].state_dict()])
    for key in ("replica", "error", "exp_avg_sq"):
        assert torch.equal(merged[key]["w"], whole.state_dict()[key]["w"]), key
    assert merged["held"] == [0, 4]


def test_local_sgd_configs_refuse_what_they_cannot_run():
    with pytest.raises(TransitsimError, match="overlap"):
        cfg_for("H", inner_steps=10, overlap=2)
    with pytest.raises(TransitsimError, match="outer_bits"):
        cfg_for("H-s", inner_steps=10, outer_bits=16)
    with pytest.raises(TransitsimError, match="inner_steps"):
        cfg_for("H", inner_steps=500)
    assert make_config("synthetic", "h-S", steps=50).variant == "streaming_diloco"


def test_one_replica_synced_every_step_with_outer_lr_1_is_adamw(tiny_corpus, tmp_path):
    """H with W = 1, H = 1, lr_out = 1 and no momentum sets theta to the replica's AdamW step
    each step: A's run (torch.optim.AdamW) to rounding. Checks the inner optimiser, the
    replica's weights in the forward pass and the shared weights evaluated."""
    common = dict(dataset=tiny_corpus, block=32, steps=12, eval_every=4, threads=1, workers=1)
    adamw = make_config("synthetic", "A", **common)
    diloco = make_config(
        "synthetic", "H", inner_steps=1, outer_lr=1.0, outer_momentum=0.0, **common
    )
    a = read_trace(train(adamw, tmp_path / "a", say=lambda _: None).trace_path).steps
    h = read_trace(train(diloco, tmp_path / "h", say=lambda _: None).trace_path).steps
    for column in ("train_loss", "val_loss"):
        sim, got = a[column].dropna().to_numpy(), h[column].dropna().to_numpy()
        assert len(sim) == len(got) > 2
        np.testing.assert_allclose(got, sim, rtol=1e-5)
    assert a["train_loss"].iloc[-1] < a["train_loss"].iloc[0]


def test_the_local_sgd_grid_lists_h10_h50_hs_and_l_at_three_seeds_then_adamw():
    from trainer.cli import build_parser, config_from_args
    from trainer.naming import run_name
    from trainer.record import commands

    runs = commands("shakespeare-mini", Path("out"), 50, 1, "local-sgd")
    adamw = [config_from_args(build_parser().parse_args(argv[3:])) for _, argv in runs[12:]]
    assert [(cfg.variant, cfg.seed) for cfg in adamw] == [("adamw", 0), ("adamw", 1), ("adamw", 2)]
    runs = runs[:12]
    configs = [config_from_args(build_parser().parse_args(argv[3:])) for _, argv in runs]
    names = [run_name(cfg) for cfg in configs]
    assert len(runs) == 12 and len(set(names)) == 12
    shapes = {(cfg.variant, cfg.inner_steps, cfg.fragments, cfg.overlap) for cfg in configs}
    assert shapes == {
        ("diloco", 10, 1, 0),
        ("diloco", 50, 1, 0),
        ("streaming_diloco", 50, 5, 5),
        ("sparseloco", 10, 1, 0),
    }
    assert sorted(cfg.seed for cfg in configs) == [0] * 4 + [1] * 4 + [2] * 4
    assert [cfg.seed for cfg in configs[:4]] == [0] * 4  # seed 0 of every configuration first
