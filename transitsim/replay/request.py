"""What one replay is asked for: one frozen value, built at the edge, checked in one place.

A scenario, the command line and the notebook API each build a `ReplayRequest` (the network and
every option of the replay), and it travels whole through `transitsim.sweep` into
`transitsim.replay.replay.replay`. Its options are declared here and nowhere else; replay makes
the decisions that depend on the trace (which variants a transform placement applies to,
whether a sender needs its band back) from the request and the trace together.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.network import LinkFault, validate_network
from transitsim.network.exchange import fabric_for, resolve_faults
from transitsim.network.spec import COLLECTIVE_ALGOS, NetworkSpec
from transitsim.overlap import DDP_BUCKET_BYTES, OVERLAP_MODES
from transitsim.replay.compute import ComputeModel, Stragglers
from transitsim.replay.placement import (
    SUM_AT,
    TRANSFORM_AT,
    TRANSFORM_VARIANTS,
    TransformAsked,
    placement_for,
)
from transitsim.replay.sites import REPLICAS, check_site_layout
from transitsim.traces.format import Trace

MAX_SCALE_PARAMS = 10**15  # what-if model sizes beyond this are typos, not questions


@dataclass(frozen=True)
class ReplayRequest:
    """One replay's question, without the trace it is asked of.

    transform_at: where an optical transform makes the band (None: on the GPU, the trace's
    compress_s charged; "pluggable" or "switch": the host sends the dense delta and the
    module/switch transforms it). A plain placement applies to the optical variants E and E'; a
    {variant: placement} mapping names it per variant (placement.placement_for).
    sum_at: where reducible payloads are summed ("receivers", "switch", "ring").
    collective: force one of COLLECTIVE_ALGOS. stragglers: seeded per-step, per-worker compute
    jitter (from `seed`). faults: link outages on the replay clock. scale_params: what-if model
    size (bytes and compute scaled, losses kept, rows marked extrapolated). compute: the model
    that maps each row's measured compute to seconds. overlap "buckets": each step's exchange
    starts unit by unit as backward makes gradients ready (DDP buckets of `bucket_bytes` for A,
    one unit per tensor for DeMo); "none": after compute. replicas "site": a local-SGD trace
    with one replica per datacentre (replay/sites.py); "worker": a replica per worker.
    record_step: also simulate the last step with link use recorded (the report's link chart).
    reuse False simulates every step (the reference for reuse); method is passed to the network
    floor's simulate_exchange.
    """

    network: NetworkSpec
    compute: ComputeModel = field(default_factory=ComputeModel)
    transform_at: TransformAsked = None
    sum_at: str = "receivers"
    collective: str | None = None
    stragglers: Stragglers | None = None
    faults: tuple[LinkFault, ...] = ()
    scale_params: int | None = None
    seed: int = 0
    overlap: str = "none"
    bucket_bytes: int = DDP_BUCKET_BYTES
    replicas: str = "worker"
    record_step: bool = False
    reuse: bool = True
    method: str | None = None

    def transform_for(self, trace: Trace) -> str | None:
        """The transform placement as it applies to this trace's variant."""
        return placement_for(trace.variant, self.transform_at)


def check_request(trace: Trace, request: ReplayRequest) -> None:
    """Raise TransitsimError (one line) for anything replay cannot honour, before any work."""
    if not isinstance(trace, Trace):
        raise TransitsimError(
            f"replay needs a Trace (transitsim.traces.format.read_trace), got {trace!r}"
        )
    if not isinstance(request, ReplayRequest):
        raise TransitsimError(f"replay needs a ReplayRequest, got {type(request).__name__}")
    network = request.network
    if not isinstance(network, NetworkSpec):
        raise TransitsimError(f"replay needs a NetworkSpec, got {type(network).__name__}")
    if not isinstance(request.compute, ComputeModel):
        raise TransitsimError(
            f"compute must be a ComputeModel, got {type(request.compute).__name__}"
        )
    if request.stragglers is not None and not isinstance(request.stragglers, Stragglers):
        raise TransitsimError(
            f"stragglers must be a Stragglers, got {type(request.stragglers).__name__}"
        )
    _check_sum(request.sum_at, network)
    if request.collective is not None and request.collective not in COLLECTIVE_ALGOS:
        raise TransitsimError(
            f"collective {request.collective!r} is not one of {', '.join(COLLECTIVE_ALGOS)}"
        )
    _check_transform(trace, request)
    for fault in request.faults:
        if not isinstance(fault, LinkFault):
            raise TransitsimError(f"faults must be LinkFault objects, got {fault!r}")
    validate_network(network)
    resolve_faults(fabric_for(network), list(request.faults))  # unknown links, bad windows
    _check_count(
        "scale_params", request.scale_params, minimum=1, maximum=MAX_SCALE_PARAMS, optional=True
    )
    _check_count("seed", request.seed, minimum=0)
    if request.overlap not in OVERLAP_MODES:
        raise TransitsimError(
            f"overlap {request.overlap!r} is not one of {', '.join(OVERLAP_MODES)}"
        )
    _check_count("bucket_bytes", request.bucket_bytes, minimum=1)
    if request.replicas not in REPLICAS:
        raise TransitsimError(f"replicas {request.replicas!r} is not one of {', '.join(REPLICAS)}")
    if request.replicas == "site":
        check_site_layout(trace, network)


def _check_sum(sum_at: str, network: NetworkSpec) -> None:
    if sum_at not in SUM_AT:
        raise TransitsimError(f"sum_at {sum_at!r} is not one of {', '.join(SUM_AT)}")
    if sum_at == "switch" and not network.switch.aggregator:
        raise TransitsimError(
            f"sum_at 'switch' needs a switch that sums, and network {network.name!r} has none "
            "(switch.aggregator is off)"
        )


def _check_transform(trace: Trace, request: ReplayRequest) -> None:
    asked = request.transform_at
    if asked is not None and not isinstance(asked, str | Mapping):
        raise TransitsimError(f"transform_at: expected a placement or a dict, got {asked!r}")
    places = asked.values() if isinstance(asked, Mapping) else [asked]
    for place in places:  # every place asked is a real one, whichever variant it applies to
        if place is not None and place not in TRANSFORM_AT:
            raise TransitsimError(
                f"transform_at {place!r} is not one of None, {', '.join(TRANSFORM_AT)}"
            )
    transform_at = request.transform_for(trace)
    if transform_at is None:
        return
    network = request.network
    if trace.variant not in TRANSFORM_VARIANTS:
        raise TransitsimError(
            f"transform_at {transform_at!r}: variant {trace.variant} of {trace.name} does not "
            f"send a fixed band, so no transform can make it (only {TRANSFORM_VARIANTS})"
        )
    has_transform = (
        network.pluggable is not None and network.pluggable.transform is not None
        if transform_at == "pluggable"
        else network.switch.transform is not None
    )
    if not has_transform:
        raise TransitsimError(
            f"transform_at {transform_at!r}: network {network.name!r} has no optical "
            f"transform at the {transform_at}"
        )


def _check_count(
    name: str, value: object, *, minimum: int, maximum: int | None = None, optional: bool = False
) -> None:
    """An integer option (numpy integers too, never a bool) of at least `minimum` (and at most
    `maximum`, where bytes scaled by it must still fit the arrays)."""
    if optional and value is None:
        return
    if (
        not isinstance(value, int | np.integer) or isinstance(value, bool) or value < minimum  # type: ignore[operator]
    ):
        kind = "a positive integer" if minimum >= 1 else "a non-negative integer"
        raise TransitsimError(f"{name} must be {kind}, got {value!r}")
    if maximum is not None and value > maximum:  # type: ignore[operator]
        raise TransitsimError(f"{name} must be at most {maximum:,}, got {value:,}")
