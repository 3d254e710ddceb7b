"""B's DeMo update (top-k) against the reference optimizer's step, restated, in the same run.

The reference is bloc97/DeMo `demo.py` as spec §6.3 restates it: per parameter, decay and add
the gradient, a 2-D DCT over tiles (1-D over runs for vectors) with the basis cached per size as
the reference's TransformDCT does, `torch.topk` per chunk, the local estimate scattered ("mean")
and decoded out of delta, then all workers' (index, value) pairs concatenated, scatter-reduced
("mean") into zeros, decoded, and p <- p - lr * sign. Both sides run W workers in one process on
the `shakespeare` preset's parameters, the same gradients, the same chunk (64) and k per chunk;
the reference's aggregate is decoded once (every rank would decode the same). What is timed on
B's side is the trainer's own `DeMo.step` (compression, the in-process exchange, error feedback,
update), as a training step runs it; steps alternate between the two so a load spike hits both.

    .venv/bin/python benchmarks/bench_demo_update.py [--steps 15] [--threads 1]

Prints each side's median seconds per step and the ratio B / reference (goal: <= 0.6).
"""

import argparse
import statistics
import time

import torch

from trainer.config import make_config
from trainer.data.corpus import load_corpus
from trainer.loop.run import Trainer, setup_torch
from trainer.variants.chunking import k_per_chunk, side_divisor
from trainer.variants.dct import dct_matrix

GOAL = 0.60
WARMUP = 2


class ReferenceDeMo:
    """The reference's per-parameter step for W workers held in one process (spec §6.3)."""

    def __init__(self, params: list[torch.nn.Parameter], workers: int, chunk: int, topk: int,
                 decay: float):  # fmt: skip
        self.params, self.workers, self.chunk, self.topk, self.decay = (
            params, workers, chunk, topk, decay)  # fmt: skip
        self.delta = [torch.zeros(workers, *p.shape) for p in params]
        self.basis: dict[int, torch.Tensor] = {}

    def _basis(self, n: int) -> torch.Tensor:
        if n not in self.basis:  # the reference builds each size's basis once, and keeps it
            self.basis[n] = dct_matrix(n)
        return self.basis[n]

    def _chunks(self, shape: torch.Size) -> tuple[int, ...]:
        if len(shape) > 1:
            return (side_divisor(shape[0], self.chunk),
                    side_divisor(shape[1], self.chunk))  # fmt: skip
        return (side_divisor(shape.numel(), self.chunk),)

    def encode(self, x: torch.Tensor, chunks: tuple[int, ...]) -> torch.Tensor:
        if len(chunks) == 2:
            h, w = chunks
            tiles = x.reshape(x.shape[0] // h, h, x.shape[1] // w, w).permute(0, 2, 1, 3)
            coef = self._basis(h) @ tiles @ self._basis(w).T
            return coef.reshape(*coef.shape[:2], h * w)
        return x.reshape(-1, chunks[0]) @ self._basis(chunks[0]).T

    def decode(self, coef: torch.Tensor, shape: torch.Size, chunks: tuple[int, ...]):
        if len(chunks) == 2:
            h, w = chunks
            tiles = coef.reshape(*coef.shape[:2], h, w)
            x = self._basis(h).T @ tiles @ self._basis(w)
            return x.permute(0, 2, 1, 3).reshape(shape)
        return (coef @ self._basis(chunks[0])).reshape(shape)

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor], lr: float) -> None:
        for p, delta, grad in zip(self.params, self.delta, grads, strict=True):
            chunks = self._chunks(p.shape)
            idxs, vals = [], []
            for w in range(self.workers):  # each rank's own part of the step
                d = delta[w]
                d.mul_(self.decay).add_(grad[w], alpha=lr)
                coef = self.encode(d, chunks)
                k = min(max(self.topk, 1), coef.shape[-1])
                idx = torch.topk(coef.abs(), k, dim=-1, sorted=False).indices
                val = coef.gather(-1, idx)
                local = torch.zeros_like(coef).scatter_reduce(
                    -1, idx, val, reduce="mean", include_self=False
                )
                d.sub_(self.decode(local, d.shape, chunks))
                idxs.append(idx)
                vals.append(val)
            idx, val = torch.cat(idxs, -1), torch.cat(vals, -1)  # the all-gather's result
            total = torch.zeros_like(coef).scatter_reduce(
                -1, idx, val, reduce="mean", include_self=False
            )
            p.sub_(torch.sign(self.decode(total, p.shape, chunks)), alpha=lr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15, help="measured steps per side")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--workers", type=int, default=None, help="default: the preset's 8")
    args = parser.parse_args()
    setup_torch(args.threads)
    workers = {"workers": args.workers} if args.workers else {}
    cfg = make_config(
        "shakespeare", "B", diag_every=10**9, eval_every=10**9, threads=args.threads, **workers
    )
    trainer = Trainer(cfg, load_corpus("shakespeare"))
    demo, names = trainer.demo, [name for name, _ in trainer.params]
    params = [p for _, p in trainer.params]
    m = cfg.chunk * cfg.chunk if cfg.chunk_mode == "2d" else cfg.chunk
    topk = k_per_chunk(m, cfg.keep)  # B's k per 64 x 64 tile, as a count
    reference = ReferenceDeMo([p.detach().clone() for p in params], cfg.workers, cfg.chunk,
                              topk, cfg.decay)  # fmt: skip
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(cfg.workers, *p.shape, generator=gen) * 1e-2 for p in params]
    by_name = dict(zip(names, grads, strict=True))
    lr = cfg.lr
    ours, theirs = [], []
    for step in range(args.steps + WARMUP):
        started = time.perf_counter()
        demo.step(by_name, lr, step)
        mine = demo.last_timing["compress_s"] + demo.last_timing["update_s"]
        mine += demo.last_timing["comm_s"]  # the in-process exchange is part of the step
        elapsed = time.perf_counter() - started
        started = time.perf_counter()
        reference.step(grads, lr)
        ref = time.perf_counter() - started
        if step >= WARMUP:
            ours.append(min(mine, elapsed))
            theirs.append(ref)
    b, r = statistics.median(ours), statistics.median(theirs)
    ratios = [o / t for o, t in zip(ours, theirs, strict=True)]
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    print(
        f"shakespeare preset, B top-k: {cfg.workers} workers in one process, chunk "
        f"{cfg.chunk} {cfg.chunk_mode}, k = {topk} per chunk, {args.threads} thread(s), "
        f"{args.steps} measured steps each"
    )
    print(f"reference (restated bloc97/DeMo step)  {r:.4f} s per step (median)")
    print(f"B (trainer DeMo.step)                  {b:.4f} s per step (median)")
    verdict = "ok" if b / r <= GOAL else "over goal"
    print(
        f"B / reference = {b / r:.2f}x (per-step ratios 25-75%: {q1:.2f}-{q3:.2f}); "
        f"goal <= {GOAL:.2f}: {verdict}"
    )


if __name__ == "__main__":
    main()
