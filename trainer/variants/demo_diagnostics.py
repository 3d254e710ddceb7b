"""What the DeMo step measures besides its update: captured-energy shares per selector (spec §11)
and, for E and E', the energies behind the out-of-band diagnostics (issue 14).

Functions of a group's buffers (trainer/variants/demo_groups.py); trainer/variants/demo.py
calls them on worker 0 on the steps they are due, so the step's arithmetic never depends on them.
"""

import torch

from trainer.variants.dct import dct_chunks
from trainer.variants.demo_groups import Group, grad_view, member_view
from trainer.variants.diagnostics import EnergyTally, row_energies


def capture_energies(
    group: Group,
    coef: torch.Tensor | None,
    tally: EnergyTally,
    grads: dict[str, torch.Tensor],
    *,
    one_d: bool,
    calib_band: bool,
    moving: bool,
) -> None:
    """Worker 0's delta, shadow momentum and gradient energies per selector (spec §11).
    one_d: the run chunks in 1-D (every tensor counts); calib_band: D's calibrated band is
    known; moving: G, whose current band is a selector of its own."""
    included = [mm for mm in group.members if one_d or mm.chunker.two_d]
    if not included:
        return
    rows, m = group.rows, group.m
    grad0 = torch.zeros_like(group.shadow)
    for mm in group.members:
        member_view(grad0, mm).copy_(grad_view(grads[mm.name][0], mm))
    delta0 = coef[0] if coef is not None else dct_chunks(group.delta[0], group.mats)
    sources = {
        "delta": delta0.reshape(rows, m),
        "momentum": dct_chunks(group.shadow, group.mats).reshape(rows, m),
        "grad": dct_chunks(grad0, group.mats).reshape(rows, m),
    }
    bands = dict(group.diag_bands)
    if calib_band:
        bands["calib"] = group.pos_rows
    values = {}
    if moving:  # G: the band it sends at this step, "current"
        if group.member_rows and group.pos_rows is None:  # subspace: rows, not positions
            values = {"delta": group.delta[0], "momentum": group.shadow, "grad": grad0}
        else:
            bands["current"] = group.band if group.band is not None else group.pos_rows
    for source, c in sources.items():
        energies = row_energies(c, group.k, bands)
        if source in values:
            energies["current"] = member_rows_energy(group, values[source])
        names = list(energies)
        stacked = torch.stack([energies[n] for n in names]).double()
        for mm in included:
            sums = stacked[:, mm.start : mm.stop].sum(-1).tolist()
            values = dict(zip(names, sums, strict=True))
            total = values.pop("total")
            tally.add(mm.name, source, total, values)


def member_rows_energy(group: Group, x: torch.Tensor) -> torch.Tensor:
    """Per chunk row, the energy of x (rows, *chunk) in each tensor's band rows: ||x T^T||^2
    (T has orthonormal rows, so this is the energy the band keeps)."""
    flat = x.reshape(group.rows, group.m)
    return torch.cat(
        [(flat[mm.start : mm.stop] @ mm.rows_t.T).square().sum(-1) for mm in group.members]
    )


def tally_oob(
    oob: dict[str, float], group: Group, x0: torch.Tensor, val0: torch.Tensor, tx0: torch.Tensor
) -> None:
    """E, E' worker 0, before feedback: the energies behind the out-of-band diagnostics.

    x0 (rows, m) the delta, val0 the exact band, tx0 what the optics sent. tx0 - val0 is
    T_band applied to the optics' input error, so it is how much of the (mostly out-of-band)
    delta its quantisation, clipping and noise carry into the band; the noise-free readout
    of the same input separates quantisation and clipping from readout noise.
    """
    quiet, _ = group.emulator.readout(x0, group.scale_rows, None)
    after_sent = x0 - tx0 @ group.t_band
    sums = {
        "delta": x0.square().sum(),
        "band": val0.square().sum(),
        "sent_error": (tx0 - val0).square().sum(),
        "quant_error": (quiet - val0).square().sum(),
        "after_sent": after_sent.square().sum(),
    }
    for name, value in sums.items():
        oob[name] = oob.get(name, 0.0) + float(value.double())


def oob_shares(oob: dict[str, float]) -> dict[str, float]:
    """The last step's out-of-band diagnostics as shares of worker 0's delta energy.

    oob_sent_share: energy of (sent - exact band), all tensors; oob_quant_share: the same
    without readout noise (quantisation and clipping only); fb_removed_exact_share: the
    delta's energy that feedback of the exact band removes (the band's share);
    fb_removed_sent_share: what feedback of the values sent removes.
    """
    total = oob["delta"]
    if total <= 0:
        return {}
    return {
        "oob_sent_share": oob["sent_error"] / total,
        "oob_quant_share": oob["quant_error"] / total,
        "fb_removed_exact_share": oob["band"] / total,
        "fb_removed_sent_share": (total - oob["after_sent"]) / total,
    }
