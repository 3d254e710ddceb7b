"""Captured-energy diagnostics (spec §11): which share of a tensor's DCT energy each selector
would keep at the run's k, for worker 0's delta, plain momentum and gradient.

Per tensor the share pools all chunks (sum kept / sum all); a group's value is the energy-weighted
mean of its tensors' shares, which is sum kept / sum energy over the group's tensors.
"""

import torch

from trainer.variants.selection import topk_energy

SOURCES = ("delta", "momentum", "grad")
GROUPS = ("all", "attn", "mlp", "embed")
SELECTORS = ("topk", "low", "zigzag", "high", "random", "calib", "current")  # current: G now


def subgroup(name: str) -> str | None:
    """embed (wte*, wpe*), attn (".attn."), mlp (".fc." / ".out."), or None (e.g. LayerNorm)."""
    if name.startswith(("wte", "wpe")):
        return "embed"
    if ".attn." in name:
        return "attn"
    if ".fc." in name or ".out." in name:
        return "mlp"
    return None


def row_energies(
    coef: torch.Tensor, k: int, bands: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Per chunk row of coef (rows, m): "total" energy and the energy kept by each selector.

    bands maps a selector to positions, either (k,) shared by all rows or (rows, k) per row.
    "topk" is always included.
    """
    sq = coef.square()
    out = {"total": sq.sum(-1), "topk": topk_energy(sq, k)}
    for sel, pos in bands.items():
        if pos.dim() == 1:
            out[sel] = sq.index_select(-1, pos).sum(-1)
        else:
            out[sel] = sq.gather(-1, pos).sum(-1)
    return out


class EnergyTally:
    """Accumulates per-tensor energies of one diagnostics step and turns them into share rows."""

    def __init__(self) -> None:
        self._total: dict[tuple[str, str], float] = {}
        self._kept: dict[tuple[str, str, str], float] = {}

    def add(self, name: str, source: str, total: float, kept: dict[str, float]) -> None:
        """One tensor's energy for one source; tensors with zero energy count for nothing."""
        if total <= 0:
            return
        groups = ["all"]
        sub = subgroup(name)
        if sub is not None:
            groups.append(sub)
        for group in groups:
            key = (source, group)
            self._total[key] = self._total.get(key, 0.0) + total
            for sel, value in kept.items():
                kkey = (source, group, sel)
                self._kept[kkey] = self._kept.get(kkey, 0.0) + value

    def rows(self) -> list[dict]:
        """Rows {source, group, selector, share} in SOURCES x GROUPS x SELECTORS order.

        A group with zero energy is omitted; "calib" only appears when its kept energy is > 0.
        """
        rows = []
        for source in SOURCES:
            for group in GROUPS:
                total = self._total.get((source, group), 0.0)
                if total <= 0:
                    continue
                for sel in SELECTORS:
                    kept = self._kept.get((source, group, sel))
                    if kept is None or (sel == "calib" and kept <= 0):
                        continue
                    rows.append(
                        {"source": source, "group": group, "selector": sel, "share": kept / total}
                    )
        return rows
