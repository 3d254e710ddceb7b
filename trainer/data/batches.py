"""Per-worker shards and batches (spec §2.4) and the fixed validation batches (spec §2.5).

Each worker owns a contiguous, disjoint shard of the training ids and its own CPU generator
seeded seed·1000 + w, so a worker's batches depend only on the run seed and its index: the
generator states are all a checkpoint needs to continue the same stream.
"""

import numpy as np
import torch

from transitsim.base.errors import TransitsimError

EVAL_SEED = 12345

Batch = tuple[torch.Tensor, torch.Tensor]


def _windows(ids: np.ndarray, starts: torch.Tensor, block: int) -> Batch:
    """Inputs ids[j : j+block] and targets ids[j+1 : j+1+block] for every start j."""
    rows = starts.numpy()[:, None] + np.arange(block + 1)
    window = torch.from_numpy(ids[rows].astype(np.int64))
    return window[:, :-1], window[:, 1:]


class WorkerBatches:
    """The W workers' shards and generators; `next_batch(w)` draws worker w's next batch."""

    def __init__(self, train_ids: np.ndarray, workers: int, batch: int, block: int, seed: int):
        shard_len = len(train_ids) // workers
        self.high = shard_len - block - 1
        if self.high < 1:
            raise TransitsimError(
                f"corpus too small: {len(train_ids)} training tokens give {workers} shards of "
                f"{shard_len}, shorter than the context {block} + 2"
            )
        self.shards = [train_ids[w * shard_len : (w + 1) * shard_len] for w in range(workers)]
        self.generators = [torch.Generator().manual_seed(seed * 1000 + w) for w in range(workers)]
        self.batch, self.block = batch, block

    def next_batch(self, worker: int) -> Batch:
        starts = torch.randint(self.high, (self.batch,), generator=self.generators[worker])
        return _windows(self.shards[worker], starts, self.block)

    def state(self) -> list[torch.Tensor]:
        return [g.get_state() for g in self.generators]

    def load_state(self, states: list[torch.Tensor]) -> None:
        if len(states) != len(self.generators):
            raise TransitsimError("checkpoint holds a different number of worker generators")
        for generator, state in zip(self.generators, states, strict=True):
            generator.set_state(state)


def eval_batches(val_ids: np.ndarray, count: int, batch: int, block: int) -> list[Batch]:
    """The fixed validation batches: generator 12345, independent of the run seed (spec §2.5)."""
    high = len(val_ids) - block - 1
    if high < 1:
        raise TransitsimError(
            f"validation split too small: {len(val_ids)} tokens for a context of {block}"
        )
    generator = torch.Generator().manual_seed(EVAL_SEED)
    return [
        _windows(val_ids, torch.randint(high, (batch,), generator=generator), block)
        for _ in range(count)
    ]
