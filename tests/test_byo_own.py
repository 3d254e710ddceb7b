"""A user's own loop (issue 23, item 4): `ExchangeOptimizer` runs this project's B, C and E on
any nn.Module under torch.distributed, and `TraceRecorder` writes what it did as a trace that
replay reads."""

import math
import os
import socket
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from trainer.config import VARIANT_DEFAULTS, RunConfig  # noqa: E402
from trainer.own import ExchangeOptimizer, TraceRecorder  # noqa: E402
from trainer.variants.demo import DeMo  # noqa: E402
from transitsim.base.errors import TransitsimError  # noqa: E402
from transitsim.base.tables import variant_label  # noqa: E402
from transitsim.traces.format import read_trace  # noqa: E402

STEPS = 4


def make_model() -> "torch.nn.Module":
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def batch(rank: int, step: int) -> tuple:
    gen = torch.Generator().manual_seed(100 * rank + step)
    x = torch.randn(16, 32, generator=gen)
    return x, (x[:, :4]).argmax(dim=1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


VARIANTS = ("B", "C", "E")


def rank_main(rank: int, port: int, folder: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    for variant in VARIANTS:  # one process group for all: a spawn costs seconds
        train_one(rank, variant, folder)
    dist.barrier()
    dist.destroy_process_group()


def train_one(rank: int, variant: str, folder: str) -> None:
    model = make_model()
    opt = ExchangeOptimizer(model, variant=variant)
    recorder = TraceRecorder(
        Path(folder) / f"own-{variant}.parquet",
        workers=2,
        variant=variant,
        model=model,
        variant_params=opt.variant_params,
    )
    for step in range(STEPS):
        x, y = batch(rank, step)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        recorder.step(
            loss=loss.item(),
            payload_bytes=opt.last["payload_bytes"],
            compute_s=0.01,
            exchange_s=opt.last["comm_s"],
            compress_s=opt.last["compress_s"],
            update_s=opt.last["update_s"],
        )
    recorder.close()
    torch.save(model.state_dict(), Path(folder) / f"rank{rank}-{variant}.pt")


def simulated(variant: str) -> dict:
    """The same two workers in one process on the trainer's simulated backend."""
    model = make_model()
    params = [(n, p) for n, p in model.named_parameters()]
    cfg = RunConfig(**{**VARIANT_DEFAULTS[variant], "workers": 2, "diag_every": 10**9})
    demo = DeMo(params, cfg, 2)
    for step in range(STEPS):
        grads: dict = {name: [] for name, _ in params}
        for rank in range(2):
            model.zero_grad()
            x, y = batch(rank, step)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            for name, param in params:
                grads[name].append(param.grad.detach().clone())
        demo.step({k: torch.stack(v) for k, v in grads.items()}, cfg.lr, step)
    return model.state_dict()


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("own")
    mp.spawn(rank_main, args=(free_port(), str(folder)), nprocs=2, join=True)
    return folder


@pytest.mark.parametrize("variant", VARIANTS)
def test_two_gloo_ranks_train_a_users_model_as_the_simulated_backend_does(
    trained: Path, variant: str
) -> None:
    states = [torch.load(trained / f"rank{r}-{variant}.pt") for r in (0, 1)]
    reference = simulated(variant)
    lr = VARIANT_DEFAULTS[variant]["lr"]
    for name, value in reference.items():
        assert torch.equal(states[0][name], states[1][name]), name  # one update on every rank
        if variant in ("B", "E"):
            assert torch.equal(states[0][name], value), name  # bit for bit
        else:
            # C over 2 ranks (1 worker each) vs 2 workers in one process: the band's batched
            # matmuls differ in shape, and where an aggregate is ~0 its sign (the update is
            # lr x sign) may differ: a weight moves by at most 2 lr a step
            assert (states[0][name] - value).abs().max() <= 2 * lr * STEPS + 1e-6, name
    trace = read_trace(trained / f"own-{variant}.parquet")
    assert trace.variant == variant and trace.workers == 2 and len(trace.steps) == STEPS
    dense = trace.meta["dense_bytes_per_step"]
    payload = trace.steps["payload_bytes"]
    assert (payload > 0).all() and (payload < dense).all()  # compressed: less than the gradient
    assert (trace.steps["comm_s"] > 0).all()
    assert trace.steps["collective"].iloc[0] == "all_gather"
    assert bool(trace.steps["reducible"].iloc[0]) == (variant != "B")


def test_recorder_refuses_what_a_trace_cannot_hold(tmp_path) -> None:
    recorder = TraceRecorder(tmp_path / "r.parquet", workers=1, n_params=10)
    with pytest.raises(TransitsimError, match=r"compute_s must be a finite number in \[0, "):
        recorder.step(loss=1.0, payload_bytes=4, compute_s=-1.0)
    with pytest.raises(TransitsimError, match=r"payload_bytes must be a whole number in \[0, "):
        recorder.step(loss=1.0, payload_bytes=-4, compute_s=1.0)
    recorder.step(loss=1.0, payload_bytes=40, compute_s=0.5, step=3)
    with pytest.raises(TransitsimError, match="step 3 after step 3"):
        recorder.step(loss=1.0, payload_bytes=40, compute_s=0.5, step=3)
    recorder.step(loss=math.nan, payload_bytes=40, compute_s=0.5)
    path = recorder.close()
    trace = read_trace(path)
    assert trace.steps["step"].tolist() == [3, 4]
    assert trace.steps["train_loss"].tolist() == [1.0, math.inf]  # diverged, stored as inf
    with pytest.raises(TransitsimError, match="after close"):
        recorder.step(loss=1.0, payload_bytes=4, compute_s=1.0)
    with pytest.raises(TransitsimError, match="give the model or n_params"):
        TraceRecorder(tmp_path / "x.parquet", workers=1)


def test_a_recorder_left_by_an_exception_writes_an_incomplete_trace(tmp_path) -> None:
    with (
        pytest.raises(RuntimeError),
        TraceRecorder(tmp_path / "r.parquet", workers=2, model=make_model()) as recorder,
    ):
        recorder.step(loss=2.0, payload_bytes=100, compute_s=0.1, exchange_s=0.02)
        raise RuntimeError("the loop crashed")
    trace = read_trace(tmp_path / "r.parquet")
    assert trace.meta["status"] == "incomplete"
    assert trace.steps["wall_s"].iloc[0] == pytest.approx(0.12)


def test_a_recorded_dense_run_is_labelled_by_its_own_optimiser(tmp_path) -> None:
    """Issue 42, item 7: a user's dense run is "A dense all-reduce", not the design's AdamW."""
    for optimizer, label in ((None, "dense all-reduce"), ("SGD", "dense all-reduce (SGD)")):
        recorder = TraceRecorder(
            tmp_path / "a.parquet", workers=1, n_params=10, optimizer=optimizer
        )
        recorder.step(loss=1.0, payload_bytes=40, compute_s=0.5)
        assert variant_label(read_trace(recorder.close()).meta) == label


def train_alone(variant: str) -> tuple[list[int], dict]:
    """The loop above on one process, without a process group: rank 0's batches."""
    model = make_model()
    opt = ExchangeOptimizer(model, variant=variant)
    sent = []
    for step in range(STEPS):
        x, y = batch(0, step)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sent.append(opt.last["payload_bytes"])
        assert opt.last["comm_s"] == 0.0  # nothing crossed a wire
    return sent, model.state_dict()


def one_worker(variant: str) -> dict:
    """One worker on the trainer's simulated backend, with rank 0's batches."""
    model = make_model()
    params = [(n, p) for n, p in model.named_parameters()]
    cfg = RunConfig(**{**VARIANT_DEFAULTS[variant], "workers": 1, "diag_every": 10**9})
    demo = DeMo(params, cfg, 1)
    for step in range(STEPS):
        model.zero_grad()
        x, y = batch(0, step)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        demo.step({n: p.grad.detach().clone().unsqueeze(0) for n, p in params}, cfg.lr, step)
    return model.state_dict()


@pytest.mark.parametrize("variant", VARIANTS)
def test_one_process_records_the_bytes_it_would_send_to_its_peers(
    trained: Path, variant: str
) -> None:
    sent, state = train_alone(variant)
    two_ranks = read_trace(trained / f"own-{variant}.parquet").steps["payload_bytes"].tolist()
    assert min(sent) > 0 and sent == two_ranks  # the same accounting as with a peer
    for name, value in one_worker(variant).items():
        assert torch.equal(state[name], value), name  # and the same update as alone


def test_a_model_without_trainable_parameters_is_a_clear_error() -> None:
    model = make_model().requires_grad_(False)
    with pytest.raises(ValueError, match="ExchangeOptimizer: the model has no trainable param"):
        ExchangeOptimizer(model, variant="B")
