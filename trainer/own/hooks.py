"""This project's exchanges on any nn.Module (issue 23, item 4): DeMo top-k (B), a fixed DCT
band (C) and E's band (the emulated optical transform) as an optimiser.

DeMo replaces the data-parallel all-reduce: each worker keeps its own momentum-with-residual,
compresses it, and the workers exchange only what they keep. So the model is *not* wrapped in
DistributedDataParallel: every rank runs backward on its own batch, then
`ExchangeOptimizer.step()` compresses, exchanges (all_gather over the default process group,
trainer/distributed/exchange.py) and applies the same update on every rank. The algorithm is
trainer/variants/demo.py's, imported, with the design's defaults for the variant
(trainer/config.py VARIANT_DEFAULTS), so a user's run is the same B, C or E this project trains.

    opt = ExchangeOptimizer(model, variant="B")      # after dist.init_process_group, or alone
    loss.backward(); opt.step(); opt.zero_grad()
    opt.last["payload_bytes"], opt.last["comm_s"]    # what to hand a TraceRecorder

Alone (no process group) the step packs and counts its messages exactly as with peers, so
`payload_bytes` is what this worker would send them, not 0; `comm_s` is 0 (no wire).
"""

from dataclasses import replace
from typing import Any

import torch
import torch.distributed as dist

from trainer.config import VARIANT_DEFAULTS, RunConfig, check_config
from trainer.distributed.exchange import ProcessGroupExchange, SoloExchange
from trainer.loop.records import variant_params
from trainer.own.errors import OwnValueError
from trainer.variants.demo import DeMo
from transitsim.base.errors import TransitsimError

EXCHANGE_VARIANTS = ("B", "C", "E")


class ExchangeOptimizer:
    """DeMo with variant B, C or E over the ranks of the default process group (or 1 worker)."""

    def __init__(
        self, model: torch.nn.Module, variant: str = "B", lr: float | None = None, **overrides: Any
    ) -> None:
        """overrides: RunConfig fields (keep, chunk, chunk_mode, enob, seed, ...)."""
        if variant not in EXCHANGE_VARIANTS:
            choices = ", ".join(EXCHANGE_VARIANTS)
            raise TransitsimError(f"ExchangeOptimizer: variant {variant!r} is not one of {choices}")
        distributed = dist.is_available() and dist.is_initialized()
        workers = dist.get_world_size() if distributed else 1
        settings = {**VARIANT_DEFAULTS[variant], **overrides, "workers": workers}
        if lr is not None:
            settings["lr"] = lr
        try:
            cfg = replace(RunConfig(), **settings)
        except TypeError as exc:
            raise TransitsimError(f"ExchangeOptimizer: {exc}") from None
        cfg = replace(cfg, diag_every=10**9)  # no energy diagnostics in a user's loop
        check_config(cfg)
        self.cfg = cfg
        self.variant = variant
        self.params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not self.params:
            raise OwnValueError(
                "ExchangeOptimizer: the model has no trainable parameters (none requires grad): "
                "there is nothing to exchange"
            )
        device = self.params[0][1].device
        # alone, the same packing and byte count as with peers: the trace records what this
        # worker would send them (its exchange then takes no time: nothing crosses a wire)
        exchange = ProcessGroupExchange(workers, device) if distributed else SoloExchange(device)
        self.demo = DeMo(self.params, cfg, workers, exchange=exchange)
        self.lr = cfg.lr
        self.steps = 0
        self.last: dict[str, Any] = {}

    @property
    def variant_params(self) -> dict[str, Any]:
        """The parameters a trace names the run by (as the trainer records them)."""
        return variant_params(self.cfg)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for _, param in self.params:
            if set_to_none:
                param.grad = None
            elif param.grad is not None:
                param.grad.zero_()

    def step(self) -> None:
        """Compress, exchange and apply one update from each parameter's .grad."""
        grads = {}
        for name, param in self.params:
            grad = param.grad if param.grad is not None else torch.zeros_like(param)
            grads[name] = grad.detach().unsqueeze(0)  # this process holds one worker
        record = self.demo.step(grads, self.lr, self.steps)
        self.steps += 1
        self.last = {
            "payload_bytes": int(record.exchange_bytes),
            "comm_s": float(record.comm_s),
            "compress_s": float(record.compress_s),
            "update_s": float(record.update_s),
        }
