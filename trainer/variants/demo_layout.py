"""DeMo's layout: which tensors form each group, and which positions each group sends.

Building the groups (one Member per tensor, grouped by chunk shape and k, with their buffers and
first band) and re-pointing a group at new positions (D after calibration, G at an epoch or a
choice, the optics over the band) is set-up work, not the step's arithmetic. Both the step
(trainer/variants/demo.py) and a checkpoint restore (trainer/variants/demo_state.py) need it, so
it lives here, where both take it without importing each other.
"""

from dataclasses import dataclass

import torch

from trainer.config import RunConfig
from trainer.variants.chunking import k_per_chunk, make_chunker
from trainer.variants.dct import dct_matrix, transform_rows
from trainer.variants.demo_groups import OPTICS_VARIANTS, ROW_T_MAX_VALUES, Group, Member
from trainer.variants.moving import SUBSPACE_MAX_M, epoch_of, rotating_positions
from trainer.variants.optics import OpticsEmulator, chunk_full_scale, readout_sigma
from trainer.variants.selection import FIXED_SHAPES, band_positions


@dataclass
class Layout:
    """A DeMo's groups, and its members in parameter order."""

    members: list[Member]
    groups: list[Group]
    group_index: dict[str, int]  # member name -> its group's index in `groups`


def build_layout(
    named_params: list[tuple[str, torch.nn.Parameter]],
    cfg: RunConfig,
    local: int,
    device: torch.device,
    rule: str,
    k_overrides: dict[str, int],
) -> Layout:
    """Group the tensors by (chunk shape, k), in order of first appearance, with zeroed deltas
    for this process's `local` workers and each group's first band. Pops `k_overrides`."""
    members_by_key: dict[tuple, list[Member]] = {}
    all_members: list[Member] = []
    for name, param in named_params:
        if param.dtype != torch.float32:
            raise ValueError(f"DeMo works in float32; {name} is {param.dtype}")
        chunker = make_chunker(tuple(param.shape), cfg.chunk_mode, cfg.chunk, rule)
        k = k_overrides.pop(name, k_per_chunk(chunker.m, cfg.keep))
        if not 1 <= k <= chunker.m:
            raise ValueError(f"k for {name} must lie in [1, {chunker.m}], got {k}")
        key = (chunker.chunk_shape, k)
        group_members = members_by_key.setdefault(key, [])
        start = sum(mm.chunker.chunks for mm in group_members)
        member = Member(name, param, chunker, start)
        group_members.append(member)
        all_members.append(member)
    if k_overrides:
        raise ValueError(f"k_overrides names unknown tensors: {sorted(k_overrides)}")
    if cfg.variant == "moving" and cfg.band == "subspace":
        for member in all_members:
            if member.chunker.m > SUBSPACE_MAX_M:
                raise ValueError(
                    f"G subspace keeps an m x m covariance per tensor, so chunks of at most "
                    f"{SUBSPACE_MAX_M}; {member.name} has {member.chunker.m} (use 1-D chunks)"
                )
    if cfg.variant in OPTICS_VARIANTS:
        for member in all_members:
            for side in member.chunker.chunk_shape:
                if side & (side - 1) or side > cfg.native:
                    raise ValueError(
                        f"the optics accepts power-of-2 chunk sides <= native "
                        f"({cfg.native}); {member.name} has chunk {member.chunker.chunk_shape}"
                    )

    pre_calib_shape = cfg.band if cfg.band in FIXED_SHAPES else "low"
    groups: list[Group] = []
    group_index: dict[str, int] = {}
    for (chunk_shape, k), members in members_by_key.items():
        rows = sum(mm.chunker.chunks for mm in members)
        mats = tuple(dct_matrix(side, device=device) for side in chunk_shape)
        if len(mats) == 2 and chunk_shape[0] == chunk_shape[1]:
            mats = (mats[0], mats[0])
        group = Group(
            chunk_shape=chunk_shape,
            k=k,
            members=members,
            mats=mats,
            delta=torch.zeros(local, rows, *chunk_shape, device=device),
            shadow=torch.zeros(rows, *chunk_shape, device=device),
        )
        group.diag_bands = {
            shape: band_positions(chunk_shape, k, shape, cfg.seed).to(device)
            for shape in FIXED_SHAPES
        }
        groups.append(group)
        for member in members:
            group_index[member.name] = len(groups) - 1
        if cfg.variant != "topk":
            shape = cfg.band if cfg.band in FIXED_SHAPES else pre_calib_shape
            set_shared_band(group, band_positions(chunk_shape, k, shape, cfg.seed), device)
        if cfg.variant == "calib" or (cfg.variant == "moving" and cfg.band == "recal"):
            for member in members:
                member.energy = torch.zeros(group.m, dtype=torch.float64, device=device)
        if cfg.variant == "moving" and cfg.band == "subspace":
            for member in members:
                member.cov = torch.zeros(group.m, group.m, dtype=torch.float64, device=device)
    return Layout(all_members, groups, group_index)


def set_shared_band(group: Group, positions: torch.Tensor, device: torch.device) -> None:
    """One band for every chunk row of `group` (B, C, E, E', F; D and G before their first)."""
    group.band = positions.to(device)
    group.pos_rows = group.band.expand(group.rows, group.k)
    group.t_band = transform_rows(group.chunk_shape, positions).to(device)


def set_member_bands(group: Group) -> None:
    """D after calibration: each tensor its own frozen positions, so no shared band."""
    group.band = None
    group.t_band = None
    group.pos_rows = torch.cat(
        [mm.positions.expand(mm.chunker.chunks, group.k) for mm in group.members]
    )


def set_rotating(gi: int, group: Group, step: int, cfg: RunConfig, device: torch.device) -> None:
    """G rotating: the positions of the epoch holding `step`, per chunk row. A pure function
    of (seed, epoch, group, row), so every worker and process computes the same."""
    epoch = epoch_of(step, cfg.select_every)
    if group.epoch == epoch:
        return
    positions = rotating_positions(group.m, group.k, cfg.seed, epoch, 0, group.rows, gi)
    group.band = None
    group.t_band = None
    group.pos_rows = positions.to(device)
    group.epoch = epoch
    if len(group.chunk_shape) == 1 and group.rows * group.k * group.m <= ROW_T_MAX_VALUES:
        # each row's k DCT rows: k MACs per value, where the full DCT would cost m
        basis = group.mats[0]
        group.row_t = torch.index_select(basis, 0, group.pos_rows.reshape(-1)).view(
            group.rows, group.k, group.m
        )


def set_member_rows(group: Group, recal: bool) -> None:
    """G recal / subspace after a choice: each tensor sends its own k band rows (recal: at its
    positions; subspace: rows that are not DCT rows)."""
    group.band = None
    group.t_band = None
    group.member_rows = True
    if recal:
        group.pos_rows = torch.cat(
            [mm.positions.expand(mm.chunker.chunks, group.k) for mm in group.members]
        )
    else:
        group.pos_rows = None


def apply_choice(
    groups: list[Group], choice: dict[str, torch.Tensor], recal: bool, device: torch.device
) -> None:
    """G recal / subspace: every process takes the chooser's new band (positions for recal,
    band rows for subspace) and starts accumulating the next choice from zero."""
    for group in groups:
        for mm in group.members:
            if recal:
                mm.positions = choice[mm.name].to(device)
                mm.rows_t = transform_rows(group.chunk_shape, mm.positions).to(device)
                mm.energy.zero_()
            else:
                mm.rows_t = choice[mm.name].to(device)
                mm.cov.zero_()
        set_member_rows(group, recal)


def build_emulators(groups: list[Group], cfg: RunConfig, device: torch.device) -> None:
    """E, E' once calibrated: each group's optics over its band, at its tensors' full scale."""
    for group in groups:
        sigma = readout_sigma(chunk_full_scale(group.chunk_shape), cfg.enob)
        group.emulator = OpticsEmulator(group.t_band, sigma, cfg.planes)
        refresh_scale_rows(group, device)


def refresh_scale_rows(group: Group, device: torch.device) -> None:
    """Each chunk row's input full scale, from its tensor's `scale_in`."""
    scales = [
        torch.full((mm.chunker.chunks, 1), mm.scale_in, dtype=torch.float32) for mm in group.members
    ]
    group.scale_rows = torch.cat(scales).to(device)
