"""Where a replay makes and sums the bands: the decisions replay owns, in one place.

A scenario, the CLI and the notebook API say where an optical transform sits on the network and
where reducible payloads are summed; which of a run's variants that placement applies to, what
"auto" means on a given network, and whether a sender needs its own band back are decided here,
so that every edge gets the same answer.
"""

from collections.abc import Mapping
from typing import Any

from transitsim.base.errors import TransitsimError
from transitsim.network.spec import NetworkSpec

# Where reducible payloads (A's dense gradient, the fixed bands of C/D/E/F) are summed:
# "receivers" all-gathers them (each worker sums what it received; A is all-reduced anyway),
# "switch" sums them in an aggregating switch, "ring" all-reduces them on a ring
# (hierarchical across datacentres): a fair comparison of the band with A's all-reduce.
SUM_AT = ("receivers", "switch", "ring")
TRANSFORM_AT = ("pluggable", "switch")
# Variants whose payload is a fixed band of a chunked DCT, so an optical transform can make it.
TRANSFORM_VARIANTS = ("C", "D", "E", "E'", "F", "G")
# Variants trained with the (emulated) optical transform: a network-wide placement applies to these.
OPTICAL_VARIANTS = ("E", "E'")
# Error feedback modes that subtract the sender's own optical output, so need it back.
LOOPBACK_FEEDBACK = ("sent", "loopback")
# What the command line may ask for ("auto": what the hardware has; "none": on the GPU).
ASKED_TRANSFORM = ("auto", "none", *TRANSFORM_AT)
ASKED_SUM = ("auto", *SUM_AT)

# A placement as asked: one for the optical variants, or one per variant (a what-if for C/D/F).
TransformAsked = str | None | Mapping[str, str | None]


def placement_for(variant: str, transform_at: TransformAsked) -> str | None:
    """A transform placement as it applies to one variant's trace.

    A plain placement is network-wide: only the optical variants (E, E') were trained through
    the transform, so the others keep their band on the GPU. A mapping names the placement per
    variant, which is how a what-if asks for C, D or F's band made in the network.
    """
    if isinstance(transform_at, Mapping):
        return transform_at.get(variant)
    return transform_at if variant in OPTICAL_VARIANTS else None


def default_placement(network: NetworkSpec) -> tuple[str | None, str]:
    """(transform_at, sum_at) as a scenario places them when it does not say: the transform
    where the hardware has one (the pluggable first), sums in the switch when it can."""
    if network.pluggable is not None and network.pluggable.transform is not None:
        transform_at = "pluggable"
    else:
        transform_at = "switch" if network.switch.transform is not None else None
    return transform_at, "switch" if network.switch.aggregator else "receivers"


def resolve_placement(
    network: NetworkSpec, transform_at: str, sum_at: str
) -> tuple[str | None, str]:
    """The placement the command line asked for ("auto", "none" or a place), refused where the
    hardware is absent (as a scenario refuses it): otherwise every job would fail, one by one."""
    if transform_at not in ASKED_TRANSFORM:
        raise TransitsimError(f"--transform-at must be one of {', '.join(ASKED_TRANSFORM)}")
    if sum_at not in ASKED_SUM:
        raise TransitsimError(f"--sum-at must be one of {', '.join(ASKED_SUM)}")
    auto_transform, auto_sum = default_placement(network)
    transform = auto_transform if transform_at == "auto" else transform_at
    if sum_at == "switch" and not network.switch.aggregator:
        raise TransitsimError(
            f"--sum-at switch: network {network.name} has no summing switch (switch.aggregator "
            "is off; --set switch.aggregator=true adds one)"
        )
    if transform == "pluggable" and (network.pluggable is None or not network.pluggable.transform):
        raise TransitsimError(f"--transform-at pluggable: network {network.name} has none")
    if transform == "switch" and network.switch.transform is None:
        raise TransitsimError(f"--transform-at switch: network {network.name} has no transform")
    return (None if transform == "none" else transform), auto_sum if sum_at == "auto" else sum_at


def needs_loopback(meta: dict[str, Any]) -> bool:
    """Whether each sender must get its own optical band back: error feedback of the band sent
    ("sent", E's fix) or over a loopback ("loopback", E') subtracts what the optics produced.

    The network floor charges it where it costs: nothing extra without a transform, a copy back
    over the host lanes when the pluggable made the band, twice the bytes down when the switch
    made and summed it.
    """
    return (meta.get("variant_params") or {}).get("feedback") in LOOPBACK_FEEDBACK
