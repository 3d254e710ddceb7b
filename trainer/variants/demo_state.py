"""DeMo checkpoint state: taken per process, merged into one W-worker state, restored by slice.

A process holds workers offset .. offset+L-1. Its state has their deltas and its partial sums
(calibration energy, full-scale sums, clip counts). `merge_states` joins the states of all
processes into the state a single process holding all W workers would have (the simulated
backend's format), so one checkpoint file restores any backend: `load_state` takes this
process's workers' deltas, and the partial sums go to the process that holds worker 0.
"""

from typing import Protocol

import torch

from trainer.config import RunConfig
from trainer.variants.demo_groups import Group, Member
from trainer.variants.demo_kind import DemoKind, Selection
from trainer.variants.demo_layout import build_emulators, set_member_bands, set_member_rows

STATE_FORMAT = "transitsim-demo-state-1"
PARTIAL_SUMS = ("energy", "sumsq", "count")


class DeMoLike(Protocol):
    """What a checkpoint reads and restores of a DeMo (trainer/variants/demo.py), named here so
    that this module, which demo.py imports, need not import it back."""

    cfg: RunConfig
    variant: str
    kind: DemoKind
    workers: int
    offset: int  # the first worker this process holds
    local: int  # how many workers it holds
    device: torch.device
    calibrated: bool
    optics_active: bool
    _groups: list[Group]
    _members: list[Member]
    _noise_gen: torch.Generator
    _clipped: int
    _clip_total: int


def demo_state(demo: DeMoLike) -> dict:
    """Everything a bit-exact resume needs, keyed by parameter name (parameter layout)."""
    delta, shadow = {}, {}
    for group in demo._groups:
        for mm in group.members:
            ch = mm.chunker
            delta[mm.name] = ch.from_chunks(group.delta[:, mm.start : mm.stop]).clone()
            shadow[mm.name] = ch.from_chunks(group.shadow[mm.start : mm.stop]).clone()
    members = demo._members
    return {
        "format": STATE_FORMAT,
        "variant": demo.variant,
        "workers": demo.workers,
        "held": [demo.offset, demo.local],
        "delta": delta,
        "shadow": shadow,
        "energy": {mm.name: mm.energy.clone() for mm in members if mm.energy is not None},
        "positions": {mm.name: mm.positions.clone() for mm in members if mm.positions is not None},
        "sumsq": {mm.name: mm.sumsq for mm in members},
        "count": {mm.name: mm.count for mm in members},
        "scale_in": {mm.name: mm.scale_in for mm in members},
        "calibrated": demo.calibrated,
        "optics_active": demo.optics_active,
        "noise_rng": demo._noise_gen.get_state(),
        "clip": [demo._clipped, demo._clip_total],
        # G: the band rows every process shares, and the chooser's covariance (worker 0's)
        "rows_t": {mm.name: mm.rows_t.clone() for mm in members if mm.rows_t is not None},
        "cov": {mm.name: mm.cov.clone() for mm in members if mm.cov is not None},
        "member_rows": [group.member_rows for group in demo._groups],
    }


def merge_states(states: list[dict]) -> dict:
    """The states of all processes (any order) as one state holding all W workers."""
    states = sorted(states, key=lambda s: s.get("held", [0])[0])
    if len(states) == 1:
        return {**states[0], "held": [0, states[0]["workers"]]}
    first = states[0]
    merged = dict(first)
    merged["held"] = [0, first["workers"]]
    merged["delta"] = {
        name: torch.cat([s["delta"][name].cpu() for s in states]) for name in first["delta"]
    }
    merged["energy"] = {
        name: sum(s["energy"][name].cpu() for s in states) for name in first["energy"]
    }
    merged["sumsq"] = {name: sum(s["sumsq"][name] for s in states) for name in first["sumsq"]}
    merged["count"] = {name: sum(s["count"][name] for s in states) for name in first["count"]}
    merged["clip"] = [sum(s["clip"][i] for s in states) for i in (0, 1)]
    return merged


def load_state(demo: DeMoLike, state: dict) -> None:
    """Restore a state of all W workers (or of exactly this process's) into `demo`."""
    if state.get("format") != STATE_FORMAT:
        raise ValueError(f"not a DeMo state (format {state.get('format')!r})")
    if state["variant"] != demo.variant or state["workers"] != demo.workers:
        raise ValueError(
            f"DeMo state is for variant {state['variant']!r} with {state['workers']} "
            f"workers, not {demo.variant!r} with {demo.workers}"
        )
    held = state.get("held", [0, state["workers"]])
    if held == [demo.offset, demo.local]:
        offset, owns_sums = 0, True  # this process's own state
    elif held == [0, demo.workers]:
        offset, owns_sums = demo.offset, demo.offset == 0
    else:
        raise ValueError(f"DeMo state holds workers {held}, not all {demo.workers} or this one's")
    names = [mm.name for mm in demo._members]
    if sorted(state["delta"]) != sorted(names):
        raise ValueError("DeMo state holds different tensors than this model")
    for group in demo._groups:
        for mm in group.members:
            ch = mm.chunker
            delta = state["delta"][mm.name].narrow(0, offset, demo.local)
            group.delta[:, mm.start : mm.stop].copy_(ch.to_chunks(delta.to(demo.device)))
            shadow = state["shadow"][mm.name].to(demo.device)
            group.shadow[mm.start : mm.stop].copy_(ch.to_chunks(shadow))
            if mm.name in state["energy"]:
                energy = state["energy"][mm.name].to(demo.device, torch.float64).clone()
                mm.energy = energy if owns_sums else torch.zeros_like(energy)
            if mm.name in state["positions"]:
                mm.positions = state["positions"][mm.name].to(demo.device).clone()
            mm.sumsq = float(state["sumsq"][mm.name]) if owns_sums else 0.0
            mm.count = int(state["count"][mm.name]) if owns_sums else 0
            mm.scale_in = float(state["scale_in"][mm.name])
    demo.calibrated = bool(state["calibrated"])
    demo.optics_active = bool(state["optics_active"])
    demo._noise_gen.set_state(state["noise_rng"])
    clip = [int(v) for v in state["clip"]] if owns_sums else [0, 0]
    demo._clipped, demo._clip_total = clip
    if demo.calibrated and demo.kind.calib:
        for group in demo._groups:
            set_member_bands(group)
    for mm in demo._members:
        if mm.name in state.get("rows_t", {}):
            mm.rows_t = state["rows_t"][mm.name].to(demo.device).clone()
        if mm.name in state.get("cov", {}):
            cov = state["cov"][mm.name].to(demo.device, torch.float64).clone()
            mm.cov = cov if owns_sums else torch.zeros_like(cov)
    member_rows = state.get("member_rows", [False] * len(demo._groups))
    for group, chosen in zip(demo._groups, member_rows, strict=True):
        if chosen:
            set_member_rows(group, demo.kind.selection is Selection.RECAL)
    if demo.optics_active:
        build_emulators(demo._groups, demo.cfg, demo.device)
