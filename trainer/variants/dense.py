"""Variant A: dense AdamW on the mean gradient over all W workers (spec §4, step 3).

Every worker sends its whole gradient; the exchange averages them (an all-reduce) and AdamW
steps the shared weights with the mean, as single-process AdamW on the W-worker batch would.
"""

import time

import torch

from trainer.config import RunConfig
from trainer.variants.exchange import Exchange, Message
from trainer.variants.gradient_exchange import (
    GradientExchange,
    NamedParams,
    Outbox,
    Received,
    StepRecord,
)

ADAMW_BETAS = (0.9, 0.95)  # the reference's (spec §4); torch's default (0.9, 0.999) is not
ADAMW_EPS = 1e-8


class Dense(GradientExchange):
    """torch's AdamW over the shared weights, fed the all-reduced mean gradient."""

    state_key = "optimizer"

    def __init__(self, named_params: NamedParams, cfg: RunConfig, exchange: Exchange) -> None:
        self.exchange = exchange
        self.params = named_params
        self.optimizer = torch.optim.AdamW(
            [p for _, p in named_params],
            lr=cfg.lr,
            betas=ADAMW_BETAS,
            eps=ADAMW_EPS,
            weight_decay=cfg.weight_decay,
        )

    def compress(self, grads: dict[str, torch.Tensor], lr: float, step0: int) -> Outbox:
        """Nothing to compress: every local worker's gradients, averaged on the way."""
        message = Message([grads[name] for name, _ in self.params], "mean")
        return Outbox([message], held=time.perf_counter())

    def apply(self, outbox: Outbox, received: Received, lr: float, step0: int) -> StepRecord:
        for (_, param), mean in zip(self.params, received.tensors[0], strict=True):
            param.grad = mean
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        for _, param in self.params:
            param.grad = None
        device = self.params[0][1].device
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return StepRecord(
            comm_s=received.comm_s,
            exchange_bytes=received.sent_bytes,
            update_s=time.perf_counter() - outbox.held - received.comm_s,
        )

    def state_dict(self) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state)
