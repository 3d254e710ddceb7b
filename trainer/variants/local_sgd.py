"""DiLoCo (H), Streaming DiLoCo (H-s) and SparseLoCo (L): replicas that train apart and sync.

Every simulated worker is a replica: its own weights and its own inner AdamW state, trained on
its own batches. A process holds some of the W replicas (all of them on the simulated backend,
W / ranks on a torch.distributed one), stacked (L, *shape) per tensor, so the inner step is a
few elementwise operations per tensor and each replica's arithmetic does not depend on how
replicas map to processes. Every process also holds the shared (outer) weights theta and the
outer state, identical everywhere. On the steps of the schedule (trainer/variants/
local_sgd_schedule.py) a fragment's pseudo-gradients delta_w = theta - theta_w go through the
`Exchange` as `Message`s and the outer step updates theta:

- H: the mean delta over the W replicas (all-reduce); Nesterov SGD, torch's form:
  v <- mu v + delta; theta <- theta - lr_out (delta + mu v); then every replica takes theta.
- H-s: the same per fragment, each replica's delta rounded to 4-bit E3M0 before it is sent;
  the new theta lands tau steps later, mixed into each replica:
  theta_w <- alpha theta_w + (1 - alpha) theta (Streaming DiLoCo's merge; alpha = `mix`).
- L: error feedback e_w <- beta e_w + delta_w (beta = `decay`); per chunk (DeMo's chunking) the
  top-k of |e_w|, its values at 2 bits; e_w keeps everything not sent, rounding included; the
  sum of what all replicas sent over W (all-gather); theta <- theta - lr_out * that; no outer
  momentum; then every replica takes theta.

The model (trainer/loop/run.py) holds theta between steps, so evaluation, checkpoints and the
in-step check see the shared weights; `load_replica` puts a replica's weights in before its
worker's forward and backward.
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from trainer.config import RunConfig, is_local_sgd
from trainer.variants.accounting import local_schedule
from trainer.variants.chunking import Chunker, k_per_chunk, make_chunker
from trainer.variants.exchange import Exchange, Message, sparse_wires
from trainer.variants.gradient_exchange import GradientExchange, Outbox, Received, StepRecord
from trainer.variants.local_sgd_codecs import e3m0, two_bit
from trainer.variants.local_sgd_schedule import assign_fragments
from trainer.variants.selection import topk_mask

STATE_FORMAT = "transitsim-local-sgd-state-1"
INNER_BETAS = (0.9, 0.95)  # A's AdamW (trainer/loop/run.py), on every replica
INNER_EPS = 1e-8
PER_REPLICA = ("replica", "exp_avg", "exp_avg_sq", "error")


@dataclass(frozen=True)
class _Held:
    """What a step's compression leaves for its apply: the fragment synced (None: no sync)."""

    fragment: int | None
    inner_s: float
    compress_s: float = 0.0


class LocalSGD(GradientExchange):
    """The replicas this process holds, the shared weights and the outer optimiser state."""

    state_key = "local_sgd"

    def __init__(
        self,
        named_params: list[tuple[str, torch.nn.Parameter]],
        cfg: RunConfig,
        exchange: Exchange,
    ) -> None:
        if not is_local_sgd(cfg):
            raise ValueError(f"{cfg.variant!r} is not a local-SGD variant")
        if exchange.workers != cfg.workers:
            raise ValueError(f"the exchange joins {exchange.workers} workers, not {cfg.workers}")
        self.cfg, self.exchange = cfg, exchange
        self.local, self.offset, self.workers = exchange.local_workers, exchange.offset, cfg.workers
        self.names = [name for name, _ in named_params]
        shapes = {name: tuple(p.shape) for name, p in named_params}
        self.schedule = local_schedule(cfg)
        owner = assign_fragments(shapes, cfg.fragments)
        self.fragments = [[n for n in self.names if owner[n] == p] for p in range(cfg.fragments)]
        self.theta = {name: p.detach().clone() for name, p in named_params}
        stacked = {name: t.expand(self.local, *t.shape).clone() for name, t in self.theta.items()}
        self.replica = stacked
        self.exp_avg = {name: torch.zeros_like(t) for name, t in stacked.items()}
        self.exp_avg_sq = {name: torch.zeros_like(t) for name, t in stacked.items()}
        self.inner_t = 0
        # H, H-s: the averaged pseudo-gradient of each fragment in flight (sent, not landed)
        self.pending: dict[int, list[torch.Tensor]] = {}
        # What tells H, H-s and L apart, decided here once.
        sparse = self.sparse = cfg.variant == "sparseloco"
        streaming = cfg.variant == "streaming_diloco"
        self.quantise: Callable[[torch.Tensor], torch.Tensor] | None = e3m0 if streaming else None
        self.mix = cfg.mix if streaming else 0.0
        self.momentum = {} if sparse else {n: torch.zeros_like(t) for n, t in self.theta.items()}
        self.error = {n: torch.zeros_like(t) for n, t in stacked.items()} if sparse else {}
        self.chunkers: dict[str, Chunker] = {}
        if sparse:
            self.chunkers = {
                n: make_chunker(s, cfg.chunk_mode, cfg.chunk) for n, s in shapes.items()
            }

    # ------------------------------------------------------------------- weights in the model

    @torch.no_grad()
    def load_replica(self, i: int, params: list[tuple[str, torch.nn.Parameter]]) -> None:
        """Local replica i's weights into the model, for its worker's forward and backward."""
        for name, param in params:
            param.copy_(self.replica[name][i])

    @torch.no_grad()
    def load_shared(self, params: list[tuple[str, torch.nn.Parameter]]) -> None:
        """The shared weights theta into the model (between steps, and to evaluate)."""
        for name, param in params:
            param.copy_(self.theta[name])

    # ------------------------------------------------------------------------------- the step

    def compress(self, grads: dict[str, torch.Tensor], lr: float, step0: int) -> Outbox:
        """Inner AdamW on this process's replicas with grads[name] (L, *shape); then, if a sync
        starts at this step, its fragment's pseudo-gradients as the messages to send."""
        started = time.perf_counter()
        self._inner(grads, lr)
        inner_s = time.perf_counter() - started
        fragment = self.schedule.sync_fragment(step0 + 1)
        if fragment is None:
            return Outbox([], _Held(None, inner_s))
        began = time.perf_counter()
        names = self.fragments[fragment]
        deltas = [self.theta[n].unsqueeze(0) - self.replica[n] for n in names]
        if self.sparse:
            messages = [self._sparse_message(names, deltas)]
        else:
            if self.quantise is not None:
                deltas = [self.quantise(d) for d in deltas]
            messages = [Message(deltas, "mean")]
        return Outbox(messages, _Held(fragment, inner_s, time.perf_counter() - began))

    def apply(self, outbox: Outbox, received: Received, lr: float, step0: int) -> StepRecord:
        """The synced fragment's outer step (L at once; H and H-s wait in `pending` until the
        fragment lands), then the outer update that lands at this step, if any."""
        held: _Held = outbox.held
        outer_s = land_s = 0.0
        if held.fragment is not None:
            began = time.perf_counter()
            names = self.fragments[held.fragment]
            if self.sparse:
                for i, name in enumerate(names):
                    mean = received.tensors[0][2 * i].sum(0) / self.workers  # 0 where none sent
                    self.theta[name].sub_(
                        _from_chunks(self.chunkers[name], mean), alpha=self.cfg.outer_lr
                    )
            else:  # in flight for tau steps: the outer step needs the whole mean to have arrived
                self.pending[held.fragment] = [mean.clone() for mean in received.tensors[0]]
            outer_s = time.perf_counter() - began
        landing = self.schedule.landing_fragment(step0 + 1)
        if landing is not None:
            began = time.perf_counter()
            self._land(landing)
            land_s = time.perf_counter() - began
        return StepRecord(
            compress_s=held.compress_s / self.local,
            comm_s=received.comm_s,
            exchange_bytes=received.sent_bytes,
            update_s=(held.inner_s + land_s) / self.local + outer_s,
        )

    def _inner(self, grads: dict[str, torch.Tensor], lr: float) -> None:
        """One AdamW step per replica (torch.optim.AdamW's arithmetic, A's betas and decay)."""
        self.inner_t += 1
        beta1, beta2 = INNER_BETAS
        correction1 = 1 - beta1**self.inner_t
        correction2_sqrt = math.sqrt(1 - beta2**self.inner_t)
        for name in self.names:
            grad = grads[name]
            if grad.shape != self.replica[name].shape:
                raise ValueError(f"grads[{name!r}] has shape {tuple(grad.shape)}")
            weights, avg, avg_sq = self.replica[name], self.exp_avg[name], self.exp_avg_sq[name]
            weights.mul_(1 - lr * self.cfg.weight_decay)
            avg.lerp_(grad, 1 - beta1)
            avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (avg_sq.sqrt() / correction2_sqrt).add_(INNER_EPS)
            weights.addcdiv_(avg, denom, value=-lr / correction1)

    def _nesterov(self, name: str, delta: torch.Tensor) -> None:
        """torch.optim.SGD(nesterov=True)'s step on theta with the averaged pseudo-gradient."""
        mu, lr = self.cfg.outer_momentum, self.cfg.outer_lr
        if mu == 0:
            self.theta[name].sub_(delta, alpha=lr)
            return
        velocity = self.momentum[name]
        velocity.mul_(mu).add_(delta)
        self.theta[name].sub_(delta.add(velocity, alpha=mu), alpha=lr)

    def _sparse_message(self, names: list[str], deltas: list[torch.Tensor]) -> Message:
        """L: feed each delta into its error buffer, send its 2-bit top-k per chunk, keep the
        rest in the buffer; one message for all tensors, [sent_1, chosen_1, sent_2, ...]."""
        tensors: list[torch.Tensor] = []
        shapes: list[tuple[int, int]] = []
        for name, delta in zip(names, deltas, strict=True):
            error = self.error[name]
            error.mul_(self.cfg.decay).add_(delta)
            chunker = self.chunkers[name]
            k, m = k_per_chunk(chunker.m, self.cfg.keep), chunker.m
            chunks = chunker.to_chunks(error).reshape(self.local, chunker.chunks, m).contiguous()
            chosen = topk_mask(chunks, k)
            positions = chosen.reshape(-1, m).nonzero()[:, 1]
            positions = positions.reshape(self.local, chunker.chunks, k)
            quantised = two_bit(chunks.gather(-1, positions))
            sent = torch.zeros_like(chunks).scatter_(-1, positions, quantised)
            error.sub_(_from_chunks(chunker, sent))
            tensors += [sent, chosen]
            shapes.append((k, m))
        pack, unpack = sparse_wires(shapes)
        return Message(tensors, "gather", pack, unpack)

    def _land(self, fragment: int) -> None:
        """The fragment's outer step (H, H-s), then its shared weights into every replica:
        taken (H, L) or mixed (H-s)."""
        names = self.fragments[fragment]
        means = self.pending.pop(fragment, None)
        if means is not None:
            for name, mean in zip(names, means, strict=True):
                self._nesterov(name, mean)
        alpha = self.mix
        for name in names:
            if alpha == 0.0:
                self.replica[name].copy_(self.theta[name].expand_as(self.replica[name]))
            else:
                self.replica[name].mul_(alpha).add_(self.theta[name], alpha=1 - alpha)

    # ------------------------------------------------------------------------ checkpointing

    def state_dict(self) -> dict:
        """This process's state; `merge_states` joins all processes' into one of W replicas."""
        return {
            "format": STATE_FORMAT,
            "variant": self.cfg.variant,
            "workers": self.workers,
            "held": [self.offset, self.local],
            "theta": {n: t.clone() for n, t in self.theta.items()},
            "momentum": {n: t.clone() for n, t in self.momentum.items()},
            "inner_t": self.inner_t,
            "pending": {p: [t.clone() for t in means] for p, means in self.pending.items()},
            **{key: {n: t.clone() for n, t in getattr(self, key).items()} for key in PER_REPLICA},
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a state of all W replicas (or of exactly this process's)."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"not a local-SGD state (format {state.get('format')!r})")
        if state["variant"] != self.cfg.variant or state["workers"] != self.workers:
            raise ValueError(
                f"local-SGD state is for {state['variant']!r} with {state['workers']} replicas"
            )
        held = list(state["held"])
        if held == [self.offset, self.local]:
            offset = 0
        elif held == [0, self.workers]:
            offset = self.offset
        else:
            raise ValueError(f"local-SGD state holds replicas {held}, not this process's")
        device = next(iter(self.theta.values())).device
        for name in self.names:
            self.theta[name].copy_(state["theta"][name].to(device))
            if name in self.momentum:
                self.momentum[name].copy_(state["momentum"][name].to(device))
            for key in PER_REPLICA:
                mine = getattr(self, key)
                if name in mine:
                    mine[name].copy_(state[key][name].narrow(0, offset, self.local).to(device))
        self.inner_t = int(state["inner_t"])
        self.pending = {
            int(p): [t.to(device).clone() for t in means] for p, means in state["pending"].items()
        }

    @staticmethod
    def merge_states(states: list[dict]) -> dict:
        return merge_states(states)


def merge_states(states: list[dict]) -> dict:
    """All processes' states (any order) as the state of one process holding all W replicas."""
    states = sorted(states, key=lambda s: s["held"][0])
    merged = dict(states[0])
    merged["held"] = [0, states[0]["workers"]]
    for key in PER_REPLICA:
        merged[key] = {
            name: torch.cat([s[key][name].cpu() for s in states]) for name in states[0][key]
        }
    return merged


def _from_chunks(chunker: Chunker, chunks: torch.Tensor) -> torch.Tensor:
    """(..., chunks, m) back to the tensor's shape (2-D tiles are (h, w) inside)."""
    if chunker.two_d:
        chunks = chunks.reshape(*chunks.shape[:-1], chunker.h, chunker.w)
    return chunker.from_chunks(chunks)
