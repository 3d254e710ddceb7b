"""Bring your own run, step 1: a small model of *yours*, trained with DDP on gloo and profiled.

Not this project's GPT: a 3-layer MLP learning a fixed random teacher on generated data, trained
by 2 processes on this machine with torch DistributedDataParallel over gloo. Rank 0 writes what a
researcher usually has on disk after a job:

- `profile/rank<R>.pt.trace.json.gz` from every rank: a torch.profiler (Kineto) trace of a few
  steps (`schedule(wait, warmup, active)`), written by `tensorboard_trace_handler`'s format;
- `losses.csv`: step, train_loss (every step) and val_loss (every --eval-every steps).

Then (same processes, same gloo group) `--calibrate` times all-reduce on loopback at a few sizes
and fits the link that transitsim should replay on (examples/byo_run/calibrate.py).

    python examples/byo_run/train.py -o out/byo_run          # ~1 minute on 2 cores
"""

import argparse
import csv
import os
import socket
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate import calibrate  # noqa: E402  (beside this file)

INPUTS, HIDDEN, CLASSES = 512, 1024, 16


def make_model() -> nn.Module:
    """The researcher's model: 1.6 M parameters, so one step all-reduces 6.3 MB of gradients."""
    return nn.Sequential(
        nn.Linear(INPUTS, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, CLASSES),
    )


def make_data(seed: int, batches: int, batch: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Generated data: inputs from N(0, 1), labels from a fixed random teacher network."""
    gen = torch.Generator().manual_seed(1234)
    teacher = torch.randn(INPUTS, CLASSES, generator=gen)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(batches):
        x = torch.randn(batch, INPUTS, generator=gen)
        out.append((x, (x @ teacher).argmax(dim=1)))
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def worker(rank: int, world: int, port: int, args: argparse.Namespace) -> None:
    """One rank: DDP training, profiled steps, losses (rank 0), calibration."""
    torch.set_num_threads(1)  # 2 ranks on 2 cores
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DDP(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    train = make_data(seed=rank, batches=args.steps, batch=args.batch)
    val = make_data(seed=10_000, batches=4, batch=256)
    out = Path(args.out)
    rows: list[dict[str, object]] = []
    wait, warmup, active = args.profile_from - 1 - 2, 2, args.profile_steps
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        on_trace_ready=lambda prof: prof.export_chrome_trace(
            str(out / "profile" / f"rank{rank}.pt.trace.json.gz")
        ),
        record_shapes=True,
    ) as prof:
        for step, (x, y) in enumerate(train, start=1):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            prof.step()
            row: dict[str, object] = {"step": step, "train_loss": loss.item(), "val_loss": ""}
            if step % args.eval_every == 0 or step == args.steps:
                with torch.no_grad():
                    vals = [nn.functional.cross_entropy(model(vx), vy) for vx, vy in val]
                row["val_loss"] = float(sum(vals) / len(vals))
            rows.append(row)
    if rank == 0:
        with (out / "losses.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=["step", "train_loss", "val_loss"])
            writer.writeheader()
            writer.writerows(rows)
    if args.calibrate:
        calibrate(rank, world, out / "loopback.yaml")
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", default="out/byo_run", help="folder for profile, losses")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--profile-from", type=int, default=20, help="first profiled step")
    parser.add_argument("--profile-steps", type=int, default=5, help="steps profiled")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-calibrate", dest="calibrate", action="store_false")
    args = parser.parse_args()
    (Path(args.out) / "profile").mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    mp.spawn(worker, args=(args.workers, free_port(), args), nprocs=args.workers, join=True)
    print(
        f"trained {args.steps} steps on {args.workers} gloo ranks in "
        f"{time.perf_counter() - started:.1f} s: {args.out}/losses.csv, {args.out}/profile/"
    )


if __name__ == "__main__":
    main()
