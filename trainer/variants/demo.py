"""The DeMo step for variants B, C, D, E, E', F and G over W workers (spec §6, §8, §9).

All workers share one set of weights; each has its own momentum-with-residual `delta`. A process
holds some of the W workers (all of them on the simulated backend, one per rank on a
torch.distributed one): it compresses its workers' deltas, hands what they send to its
`Exchange` as `Message`s, and applies the same combined update as every other process. Tensors
are grouped by chunk shape and k: a group keeps every worker's delta of all its tensors in one
chunk-major buffer (W, rows, h, w) or (W, rows, m), so each step is a few large matmuls per
group instead of a loop over tensors or chunks. Every operation is row-wise (per chunk), so the
result is the per-tensor algorithm of the spec; only the noise draws of the optics depend on
tensor order, and they are drawn per tensor in parameter order.

Paths: a fixed band shared by all chunks of a group is computed as x @ T_band.T (k MACs per
value) when that is cheaper than the full separable DCT; otherwise the full DCT is taken and the
band gathered from it (top-k, calibrated bands, 64x64 tiles at k = 256).

Speed without changing a bit of the result: each group keeps its work buffers (transforms, masks,
quantised input) across steps, since fresh memory of this size is page-faulted in on every use;
top-k selects with a partition (`topk_mask`) and feeds back and aggregates densely through the
mask, with the same floating-point operations in the same order as scattering indices would do,
and transforms, selects and feeds back a cache-sized block of chunks at a time.
"""

import time
from dataclasses import dataclass

import torch

from trainer.config import RunConfig
from trainer.variants.accounting import chunk_rule
from trainer.variants.dct import dct_chunks, idct_chunks, sub_idct_chunks
from trainer.variants.demo_diagnostics import capture_energies, oob_shares, tally_oob
from trainer.variants.demo_groups import (
    TOPK_BLOCK_VALUES,
    Group,
    Member,
    grad_view,
    member_view,
    validate_config,
)
from trainer.variants.demo_kind import (
    Aggregate,
    BandAggregate,
    BandPending,
    DemoKind,
    Feedback,
    Pending,
    RowsAggregate,
    RowsPending,
    RowTAggregate,
    RowTPending,
    Selection,
    TopkAggregate,
    TopkPending,
)
from trainer.variants.demo_layout import (
    apply_choice,
    build_emulators,
    build_layout,
    refresh_scale_rows,
    set_member_bands,
    set_rotating,
)
from trainer.variants.demo_state import demo_state, load_state
from trainer.variants.demo_state import merge_states as merge_demo_states
from trainer.variants.diagnostics import EnergyTally
from trainer.variants.exchange import Exchange, LocalExchange, Message, sparse_wire
from trainer.variants.gradient_exchange import GradientExchange, Outbox, Received, StepRecord
from trainer.variants.moving import is_choice_step, subspace_step
from trainer.variants.optics import input_scale
from trainer.variants.selection import calibrated_positions, topk_mask


@dataclass
class _Held:
    """What a step's compression leaves for its apply."""

    pending: list[Pending]
    compress_s: float  # compression before the exchange, diagnostics included
    diag_s: float
    tally: EnergyTally | None
    oob: dict[str, float]


class DeMo(GradientExchange):
    """DeMo step for all variants B, C, D, E, E', F, G over W workers sharing one set of weights
    (spec §6.2), of which this process holds `exchange.local_workers`. Call
    `step(grads, lr, step)` once per optimiser step with this process's workers' gradients; it
    returns the step's StepRecord."""

    state_key = "demo"

    def __init__(
        self,
        named_params: list[tuple[str, torch.nn.Parameter]],
        cfg: RunConfig,
        workers: int,
        *,
        chunk_rule_override: str | None = None,
        k_overrides: dict[str, int] | None = None,
        exchange: Exchange | None = None,
        band_combine: str | None = None,
    ) -> None:
        """chunk_rule_override ("R" | "P2") and k_overrides (name -> k) exist for tests that
        compare variants or reproduce DeMo's reference; runs leave them unset. exchange: how
        the W workers meet (default: all in this process). band_combine: "sum" when the band
        is reduced on the way (E' at a switch), "gather" when every worker's band is received.
        """
        validate_config(cfg, workers)
        if not named_params:
            raise ValueError("DeMo needs at least one parameter")
        self.cfg = cfg
        self.workers = workers
        self.exchange = exchange if exchange is not None else LocalExchange(workers)
        if self.exchange.workers != workers:
            raise ValueError(f"the exchange joins {self.exchange.workers} workers, not {workers}")
        self.local = self.exchange.local_workers
        self.offset = self.exchange.offset
        if band_combine is None:
            band_combine = "sum" if cfg.variant == "optics_switch" else "gather"
        if band_combine not in ("sum", "gather"):
            raise ValueError(f"band_combine must be 'sum' or 'gather', got {band_combine!r}")
        self.band_combine = band_combine
        self.summed = band_combine == "sum"
        self.variant = cfg.variant
        self.kind = DemoKind.of(cfg)
        self.one_d = cfg.chunk_mode == "1d"  # the diagnostics count every tensor in 1-D
        self.device = named_params[0][1].device
        self._calib_end = cfg.calib_start + cfg.calib_steps
        self.calibrated = False
        self.optics_active = False
        self._clipped = 0
        self._clip_total = 0
        self._noise_gen = torch.Generator(device=self.device)
        self._noise_gen.manual_seed(cfg.seed + 777)

        rule = chunk_rule_override or chunk_rule(cfg.variant)
        k_overrides = dict(k_overrides or {})
        layout = build_layout(named_params, cfg, self.local, self.device, rule, k_overrides)
        self._members: list[Member] = layout.members
        self._groups: list[Group] = layout.groups
        self._group_index: dict[str, int] = layout.group_index

    # ----------------------------------------------------------------------------- set-up pieces

    def _choose(self) -> None:
        """G recal / subspace at the end of an R-step window: the chooser (the process holding
        worker 0) picks the new band from what it accumulated since the last choice -- the only
        comparisons of G, on its host -- and broadcasts it to every process."""
        choice = None
        if self.offset == 0:
            choice = {}
            for group in self._groups:
                for mm in group.members:
                    if self.kind.selection is Selection.RECAL:
                        choice[mm.name] = calibrated_positions(mm.energy, group.k).cpu()
                    else:
                        current = mm.rows_t if mm.rows_t is not None else group.t_band
                        choice[mm.name] = subspace_step(mm.cov, current).cpu()
        if self.exchange.world > 1:
            choice = self.exchange.broadcast_object(choice)
        apply_choice(self._groups, choice, self.kind.selection is Selection.RECAL, self.device)

    def _emulating(self, group: Group) -> bool:
        return self.optics_active and group.emulator is not None and not group.emulator.exact

    def _buffer(
        self, group: Group, name: str, shape: tuple[int, ...], dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        """Work memory of `group` kept across steps: a fresh buffer of this size is page-faulted
        in on every use, which costs about as much as the arithmetic done on it."""
        buf = group.buffers.get(name)
        if buf is None or buf.shape != shape or buf.dtype != dtype:
            buf = torch.empty(shape, dtype=dtype, device=self.device)
            group.buffers[name] = buf
        return buf

    # ------------------------------------------------------------------------------- the step

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def compress(self, grads: dict[str, torch.Tensor], lr: float, step0: int) -> Outbox:
        """Accumulate this process's stacked gradients grads[name] (L, *shape) into the deltas
        and compress them: one message per group."""
        cfg, kind = self.cfg, self.kind
        self._sync()
        started = time.perf_counter()
        # Diagnostics describe worker 0, which only the process holding it can see.
        diag = cfg.diag_every > 0 and (step0 + 1) % cfg.diag_every == 0 and self.offset == 0
        in_window = kind.calibrates and cfg.calib_start <= step0 < self._calib_end
        track_fs = kind.optics and (in_window or (self.calibrated and cfg.fs_every > 0))
        tally = EnergyTally() if diag else None
        oob: dict[str, float] = {}
        diag_s = 0.0

        self._accumulate(grads, lr)
        if kind.rotating:
            for gi, group in enumerate(self._groups):
                set_rotating(gi, group, step0, cfg, self.device)
        noise = self._draw_noise()
        pending = []
        for gi, group in enumerate(self._groups):
            compressed, group_diag_s = self._compress_group(
                group, noise.get(gi), in_window, track_fs, tally, grads, oob
            )
            pending.append(compressed)
            diag_s += group_diag_s
        held = _Held(pending, time.perf_counter() - started, diag_s, tally, oob)
        return Outbox([p.message for p in pending], held)

    def apply(self, outbox: Outbox, received: Received, lr: float, step0: int) -> StepRecord:
        """Feed back, aggregate, update the params in place; close the step's schedule."""
        held: _Held = outbox.held
        fed = time.perf_counter()
        aggregates = [
            self._feed_back(group, p, combined)
            for group, p, combined in zip(self._groups, held.pending, received.tensors, strict=True)
        ]
        self._sync()
        t_compressed = time.perf_counter()
        for group, aggregate in zip(self._groups, aggregates, strict=True):
            self._apply_update(group, aggregate, lr)
        chose = self._end_of_step(step0)
        self._sync()
        t_end = time.perf_counter()
        # compression, the exchange's local work and the feedback, less diagnostics and comm
        compress_s = held.compress_s + received.wall_s + (t_compressed - fed)
        return StepRecord(
            compress_s=(compress_s - held.diag_s - received.comm_s) / self.local,
            comm_s=received.comm_s,
            exchange_bytes=received.sent_bytes,
            update_s=t_end - t_compressed,
            diag_s=held.diag_s,
            broadcast=chose,
            diagnostics=held.tally.rows() if held.tally is not None else None,
            optics=oob_shares(held.oob) if held.oob else None,
            clip=(self._clipped, self._clip_total) if self.optics_active else None,
        )

    def _accumulate(self, grads: dict[str, torch.Tensor], lr: float) -> None:
        """delta <- decay * delta + lr * g (local workers); shadow likewise with the first's g."""
        for member in self._members:
            expected = (self.local, *member.chunker.shape)
            if member.name not in grads:
                raise ValueError(f"grads lacks {member.name!r}")
            if tuple(grads[member.name].shape) != expected:
                raise ValueError(
                    f"grads[{member.name!r}] has shape {tuple(grads[member.name].shape)}, "
                    f"expected {expected}"
                )
        decay = self.cfg.decay
        for group in self._groups:
            group.delta.mul_(decay)
            group.shadow.mul_(decay)
        for member in self._members:
            grad = grads[member.name]
            group = self._group_of(member)
            member_view(group.delta, member).add_(grad_view(grad, member), alpha=lr)
            member_view(group.shadow, member).add_(grad_view(grad[0], member), alpha=lr)

    def _group_of(self, member: Member) -> Group:
        return self._groups[self._group_index[member.name]]

    def _draw_noise(self) -> dict[int, torch.Tensor]:
        """Readout noise for every emulated tensor, drawn per tensor in parameter order with
        shape (P, W * chunks, k) (or (W * chunks, k)), then stacked per group as (P, L, rows, k).

        Every process draws all W workers' noise from the same generator and keeps its own
        workers' rows, so a worker's noise does not depend on how workers map to processes."""
        per_group: dict[int, list[torch.Tensor]] = {}
        for member in self._members:
            group = self._group_of(member)
            if not self._emulating(group) or group.emulator.sigma == 0.0:
                continue
            rows = self.workers * member.chunker.chunks
            draw = torch.randn(
                group.emulator.noise_shape(rows), generator=self._noise_gen, device=self.device
            )
            draw = draw.unflatten(-2, (self.workers, member.chunker.chunks))
            draw = draw.narrow(-3, self.offset, self.local)
            per_group.setdefault(self._group_index[member.name], []).append(draw)
        return {gi: torch.cat(draws, dim=-2) for gi, draws in per_group.items()}

    def _compress_group(
        self,
        group: Group,
        noise: torch.Tensor | None,
        in_window: bool,
        track_fs: bool,
        tally: EnergyTally | None,
        grads: dict[str, torch.Tensor],
        oob: dict[str, float],
    ) -> tuple[Pending, float]:
        """Transform, select, emulate: what this process's workers send for `group`, and the
        seconds spent on diagnostics. Adds E's out-of-band energies of worker 0 to `oob`."""
        L, k, m, kind = self.local, group.k, group.m, self.kind
        diag_s = 0.0
        delta_flat = group.delta.view(L, group.rows, m)
        use_band_matrix = group.band is not None and group.band_matrix_cheaper
        calib_energy = kind.calib and in_window
        per_row = group.row_t is not None
        need_coef = (not use_band_matrix and not group.member_rows and not per_row) or calib_energy
        if kind.topk:  # top-k transforms block by block as it selects (below)
            need_coef = tally is not None  # the diagnostics' energies need the whole coef
        full = group.delta.shape
        coef = None
        if need_coef:  # into reused buffers: "work" is free again once coef is done
            coef_buf, work = self._buffer(group, "coef", full), self._buffer(group, "work", full)
            coef = dct_chunks(group.delta, group.mats, out=coef_buf, work=work).view(L, -1, m)

        if tally is not None:
            t0 = time.perf_counter()
            capture_energies(
                group,
                coef,
                tally,
                grads,
                one_d=self.one_d,
                calib_band=kind.calib and self.calibrated,
                moving=kind.moving,
            )
            self._sync()
            diag_s = time.perf_counter() - t0

        if calib_energy:
            energy = coef.square().sum(0)
            for mm in group.members:
                mm.energy += energy[mm.start : mm.stop].sum(0, dtype=torch.float64)
        if kind.choosing and self.offset == 0:
            self._accumulate_choice(group, coef)
        if group.member_rows:  # G recal / subspace after a choice: each tensor its rows
            val = self._buffer(group, "member_val", (L, group.rows, k))
            for mm in group.members:
                torch.matmul(
                    delta_flat[:, mm.start : mm.stop], mm.rows_t.T, out=val[:, mm.start : mm.stop]
                )
            return RowsPending(Message([val], self.band_combine), val), diag_s
        if per_row:  # G rotating in 1-D: each row its own k DCT rows
            val = torch.bmm(delta_flat.transpose(0, 1), group.row_t.transpose(1, 2))
            val = val.transpose(0, 1).contiguous()  # (L, rows, k)
            return RowTPending(Message([val], self.band_combine), val), diag_s

        if track_fs:
            row_sq = delta_flat.square().sum(-1)
            for mm in group.members:
                mm.sumsq += float(row_sq[:, mm.start : mm.stop].sum(dtype=torch.float64))
                mm.count += L * mm.chunker.numel

        if kind.topk:
            return self._compress_topk(group), diag_s

        # Band selection (step 6).
        idx = group.pos_rows.expand(L, group.rows, k)
        val = delta_flat @ group.t_band.T if use_band_matrix else coef.gather(-1, idx)

        # What goes on the wire (step 7).
        tx = val
        if self._emulating(group):
            quantised = self._buffer(group, "quantised", delta_flat.shape)
            tx, clipped = group.emulator.readout(
                delta_flat, group.scale_rows, noise, work=quantised
            )
            self._clipped += clipped
            if group.emulator.planes is not None:
                self._clip_total += L * sum(mm.chunker.numel for mm in group.members)
            if self.offset == 0:  # the out-of-band diagnostics describe worker 0
                tally_oob(oob, group, delta_flat[0], val[0], tx[0])
        message = Message([tx], self.band_combine)
        return BandPending(message, idx, val, use_band_matrix), diag_s

    def _compress_topk(self, group: Group) -> TopkPending:
        """Top-k: selection (spec §6.2 step 6) as a mask of the chosen positions; what is sent
        is the masked coefficients `sent` (zeros elsewhere): the tensor that scattering the
        chosen (index, value) pairs would build. Top-k sends values exactly.

        Transform, selection and exact feedback (step 8) are all per chunk, so they run a block
        of TOPK_BLOCK_VALUES at a time: its half-transform, coefficients and magnitudes stay in
        cache from the forward DCT through the inverse one, where the whole group's buffers
        (tens of MiB for 64 x 64 tiles) would stream through memory once per pass. Each chunk's
        matmuls see the same operands, so the values are those of whole-group passes bit for
        bit; and what is sent does not depend on the exchange, so the feedback need not wait.
        """
        L, rows, m = self.local, group.rows, group.m
        chunks = group.delta.view(L * rows, *group.chunk_shape)
        sent = self._buffer(group, "sent", group.delta.shape).view_as(chunks)
        chosen = self._buffer(group, "chosen", (L * rows, m), torch.bool)
        block = (max(1, TOPK_BLOCK_VALUES // m), *group.chunk_shape)
        coef = self._buffer(group, "block_coef", block)
        work = self._buffer(group, "block_work", block)
        mag = self._buffer(group, "block_mag", block)
        for start in range(0, L * rows, block[0]):
            stop = min(start + block[0], L * rows)
            x, s, n = chunks[start:stop], sent[start:stop], stop - start
            c = dct_chunks(x, group.mats, out=coef[:n], work=work[:n])
            picked = topk_mask(c.view(n, m), group.k, scratch=mag[:n], out=chosen[start:stop])
            # The coefficients' bit patterns times 0 or 1: each chosen value exactly and +0.0
            # elsewhere, as torch.where(picked, c, 0) gives at several times the cost.
            torch.mul(c.view(torch.int32), picked.view_as(c), out=s.view(torch.int32))
            sub_idct_chunks(x, s, group.mats, work=work[:n])
        pack, unpack = sparse_wire(group.k, m)
        message = Message([sent.view(L, rows, m), chosen.view(L, rows, m)], "gather", pack, unpack)
        return TopkPending(message)

    def _feed_back(self, group: Group, pending: Pending, received: list[torch.Tensor]) -> Aggregate:
        """Error feedback (step 8) of this process's workers; returns what the update needs."""
        L, k, m = self.local, group.k, group.m
        full = group.delta.shape
        if isinstance(pending, TopkPending):  # fed back as it was compressed
            return TopkAggregate(*received)

        aggregate = received[0] if self.summed else received[0].sum(0)
        band_mean = aggregate / self.workers
        if isinstance(pending, RowsPending):  # G: exact feedback through each tensor's rows
            delta_flat = group.delta.view(L, group.rows, m)
            for mm in group.members:
                rows = delta_flat[:, mm.start : mm.stop]
                rows.sub_(pending.val[:, mm.start : mm.stop] @ mm.rows_t)
            return RowsAggregate(band_mean)
        if isinstance(pending, RowTPending):
            by_row = group.delta.view(L, group.rows, m).transpose(0, 1)  # (rows, L, m)
            by_row.sub_(torch.bmm(pending.val.transpose(0, 1), group.row_t))
            return RowTAggregate(band_mean)
        tx = pending.message.tensors[0]
        if self.kind.feedback is Feedback.SENT:
            fb = tx
        elif self.kind.feedback is Feedback.MEAN:
            fb = band_mean.expand(L, group.rows, k)
        else:
            fb = pending.val
        if pending.use_band_matrix:
            group.delta.view(L * group.rows, m).addmm_(
                fb.reshape(L * group.rows, k), group.t_band, alpha=-1.0
            )
        else:  # coef and work are free again: val, tx and fb are copies
            coef_buf, work = self._buffer(group, "coef", full), self._buffer(group, "work", full)
            sent = self._buffer(group, "sent", full)
            sent.view(L, group.rows, m).zero_().scatter_(-1, pending.idx, fb)
            group.delta.sub_(idct_chunks(sent, group.mats, out=coef_buf, work=work))
        return BandAggregate(band_mean, pending.use_band_matrix)

    def _apply_update(self, group: Group, aggregate: Aggregate, lr: float) -> None:
        """Aggregate (step 9), inverse transform and p <- p - lr * sign(u) (step 10)."""
        W, rows, m = self.workers, group.rows, group.m
        if isinstance(aggregate, TopkAggregate):
            sent, chosen = aggregate.sent, aggregate.chosen
            # The mean over the contributors of each position: all workers' (index, value)
            # pairs scatter-added worker 0 first, divided by the number of contributors (1 where
            # there are none). Added densely in the same worker order from +0, with +0 where a
            # worker did not pick the position, each sum is bit for bit the scattered one.
            total = self._buffer(group, "dense", (rows, m)).zero_()
            count_dtype = torch.uint8 if W < 256 else torch.int32  # integer adds are cheap
            count = self._buffer(group, "count", (rows, m), count_dtype).zero_()
            picks = chosen.view(torch.uint8)
            for w in range(W):
                total.add_(sent[w])
                count.add_(picks[w])
            divisor = self._buffer(group, "divisor", (rows, m)).copy_(count).clamp_(min=1)
            update = self._decode(group, total.div_(divisor))
        elif isinstance(aggregate, RowTAggregate):
            band_mean = aggregate.band_mean  # (rows, k)
            update = torch.bmm(band_mean.unsqueeze(1), group.row_t).view(rows, *group.chunk_shape)
        elif isinstance(aggregate, RowsAggregate):
            band_mean = aggregate.band_mean
            update = self._buffer(group, "dense", (rows, m))
            for mm in group.members:
                torch.matmul(
                    band_mean[mm.start : mm.stop], mm.rows_t, out=update[mm.start : mm.stop]
                )
            update = update.view(rows, *group.chunk_shape)
        else:
            band_mean = aggregate.band_mean
            if aggregate.use_band_matrix:
                update = (band_mean @ group.t_band).view(rows, *group.chunk_shape)
            else:
                dense = self._buffer(group, "dense", (rows, m)).zero_()
                dense.scatter_(-1, group.pos_rows, band_mean)
                update = self._decode(group, dense)
        signs = torch.sign(update)
        for mm in group.members:
            param_view = (
                mm.chunker.tiled_view(mm.param.data)
                if mm.chunker.two_d
                else mm.param.data.view(mm.chunker.chunks, mm.chunker.m)
            )
            param_view.add_(member_view(signs, mm), alpha=-lr)

    def _decode(self, group: Group, dense: torch.Tensor) -> torch.Tensor:
        """Inverse transform of the aggregate's coefficients (rows, m), in reused buffers."""
        shape = (group.rows, *group.chunk_shape)
        out, work = self._buffer(group, "update", shape), self._buffer(group, "update_work", shape)
        return idct_chunks(dense.view(shape), group.mats, out=out, work=work)

    def _end_of_step(self, step: int) -> bool:
        """Close calibration (§8.3, §9.2) or re-set the optics' full scale when due (§9.6);
        G recal / subspace: re-choose the band at the end of each R-step window. Returns
        whether it re-chose (the chooser broadcast the new band)."""
        cfg, kind = self.cfg, self.kind
        chose = kind.choosing and is_choice_step(step, cfg.select_every, cfg.steps)
        if chose:
            self._choose()
        if kind.calibrates and step == self._calib_end - 1:
            if kind.calib:
                self._total_energies()
                for group in self._groups:
                    for mm in group.members:
                        mm.positions = calibrated_positions(mm.energy, group.k)
                    set_member_bands(group)
                if self.offset != 0:  # the total now lives with worker 0's process
                    for mm in self._members:
                        mm.energy.zero_()
            else:
                self._reset_full_scale()
                build_emulators(self._groups, cfg, self.device)
                self.optics_active = True
            self.calibrated = True
        elif (
            kind.optics
            and self.calibrated
            and cfg.fs_every > 0
            and step + 1 > self._calib_end
            and (step + 1 - self._calib_end) % cfg.fs_every == 0
        ):
            self._reset_full_scale()
            for group in self._groups:
                refresh_scale_rows(group, self.device)
        return chose

    def _accumulate_choice(self, group: Group, coef: torch.Tensor | None) -> None:
        """G recal: worker 0's energy map (coef^2 per position); subspace: its chunk covariance
        (sum of x x^T). Multiply-accumulate only, on the chooser's own delta."""
        x0 = group.delta[0]
        if self.kind.selection is Selection.RECAL:
            c0 = coef[0] if coef is not None else dct_chunks(x0, group.mats).reshape(group.rows, -1)
            energy = c0.square()
            for mm in group.members:
                mm.energy += energy[mm.start : mm.stop].sum(0, dtype=torch.float64)
            return
        flat = x0.reshape(group.rows, group.m)
        for mm in group.members:
            rows = flat[mm.start : mm.stop]
            mm.cov += (rows.T @ rows).double()

    def _total_energies(self) -> None:
        """Calibration energy pooled over all W workers (every process's partial sums)."""
        if self.exchange.world == 1:
            return
        total = self.exchange.total(torch.cat([mm.energy for mm in self._members]))
        sizes = [mm.energy.numel() for mm in self._members]
        for mm, energy in zip(self._members, total.split(sizes), strict=True):
            mm.energy = energy.clone()

    def _reset_full_scale(self) -> None:
        """Input full scale from the delta RMS pooled over all W workers (§9.2, §9.6)."""
        sums = [(mm.sumsq, float(mm.count)) for mm in self._members]
        if self.exchange.world > 1:
            flat = torch.tensor(sums, dtype=torch.float64, device=self.device)
            sums = self.exchange.total(flat).tolist()
        for mm, (sumsq, count) in zip(self._members, sums, strict=True):
            mm.scale_in = input_scale(sumsq, int(count), self.cfg.kappa)
            mm.sumsq, mm.count = 0.0, 0

    # ------------------------------------------------------------------------- diagnostics

    def sent_positions(self, name: str) -> torch.Tensor | None:
        """The band positions tensor `name` sends now (k,), on CPU; None for top-k."""
        member = self._members[[mm.name for mm in self._members].index(name)]
        group = self._group_of(member)
        if group.band is not None:
            return group.band.cpu()
        return member.positions.cpu() if member.positions is not None else None

    def clip_counts(self) -> tuple[int, int]:
        """Cumulative (clipped, quantised) input values since the optics started (E, E')."""
        return self._clipped, self._clip_total

    # ------------------------------------------------------------------------ checkpointing

    def state_dict(self) -> dict:
        """This process's state (trainer/variants/demo_state.py), for a bit-exact resume."""
        return demo_state(self)

    def load_state_dict(self, state: dict) -> None:
        """Restore a state taken from a DeMo built with the same parameters and config."""
        load_state(self, state)

    @staticmethod
    def merge_states(states: list[dict]) -> dict:
        """All processes' states as one (trainer/variants/demo_state.py)."""
        return merge_demo_states(states)
