"""The one place that picks a variant's GradientExchange from its config, once per run."""

import torch

from trainer.config import RunConfig, is_demo, is_local_sgd
from trainer.variants.demo import DeMo
from trainer.variants.dense import Dense
from trainer.variants.exchange import Exchange
from trainer.variants.gradient_exchange import GradientExchange
from trainer.variants.local_sgd import LocalSGD

NamedParams = list[tuple[str, torch.nn.Parameter]]


def build_exchange(
    named_params: NamedParams, cfg: RunConfig, wire: Exchange, collective: str
) -> GradientExchange:
    """Dense AdamW (A), DeMo (B..G) or local SGD (H, H-s, L) over `wire`; `collective` is the
    byte accounting's (a DeMo band is gathered under all_gather, summed otherwise)."""
    if is_local_sgd(cfg):  # a replica per worker
        return LocalSGD(named_params, cfg, wire)
    if is_demo(cfg):
        combine = "gather" if collective == "all_gather" else "sum"
        return DeMo(named_params, cfg, cfg.workers, exchange=wire, band_combine=combine)
    return Dense(named_params, cfg, wire)


def merge_exchange_states(key: str, states: list[dict]) -> dict:
    """All processes' states of the variant whose checkpoint key is `key`, as one."""
    by_key = {kind.state_key: kind for kind in (Dense, DeMo, LocalSGD)}
    return by_key[key].merge_states(states)
