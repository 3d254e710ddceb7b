"""What one step exchanges (an Exchange), and whether a network can carry it.

Apart from exchange.py, which times an exchange, so that the question "is this exchange
well-formed here?" reads on its own and the timing module stays one job.
"""

import math
from dataclasses import dataclass

import numpy as np

from transitsim.base.errors import TransitsimError
from transitsim.network.spec import COLLECTIVE_ALGOS, NetworkSpec
from transitsim.network.stages import padded_dense_bytes

TRANSFORM_PLACES = (None, "pluggable", "switch")


@dataclass(frozen=True)
class Exchange:
    """What one step exchanges: which collective, and the bytes each worker puts on the line."""

    algo: str  # one of COLLECTIVE_ALGOS
    payload_bytes: int  # bytes one worker contributes on the line (after any transform)
    dense_bytes: int = 0  # bytes entering the transform (host lanes); 0 = no transform
    transform_at: str | None = None  # None | "pluggable" | "switch"
    loopback: bool = False  # switch_sum: each sender also gets its own transformed result


def _is_count(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 0


def validate_exchange(network: NetworkSpec, exchange: Exchange) -> None:
    """One-line TransitsimError for an exchange this network cannot carry."""
    if not isinstance(exchange, Exchange):
        raise TransitsimError(f"expected an Exchange, got {type(exchange).__name__}")
    if exchange.algo not in COLLECTIVE_ALGOS:
        raise TransitsimError(
            f"unknown collective {exchange.algo!r} (expected one of {', '.join(COLLECTIVE_ALGOS)})"
        )
    if not _is_count(exchange.payload_bytes):
        raise TransitsimError(
            f"payload_bytes must be an integer >= 0, got {exchange.payload_bytes!r}"
        )
    if not _is_count(exchange.dense_bytes):
        raise TransitsimError(f"dense_bytes must be an integer >= 0, got {exchange.dense_bytes!r}")
    if exchange.transform_at not in TRANSFORM_PLACES:
        raise TransitsimError(
            f"transform_at must be None, 'pluggable' or 'switch', got {exchange.transform_at!r}"
        )
    if exchange.transform_at is not None:
        if exchange.dense_bytes <= 0 or exchange.payload_bytes <= 0:
            raise TransitsimError(
                f"transform_at {exchange.transform_at!r} needs dense_bytes > 0 "
                "and payload_bytes > 0"
            )
        if exchange.transform_at == "pluggable" and (
            network.pluggable is None or network.pluggable.transform is None
        ):
            raise TransitsimError(
                f"transform_at 'pluggable': network {network.name!r} has no pluggable transform"
            )
        if exchange.transform_at == "switch":
            if exchange.algo != "switch_sum":
                raise TransitsimError(
                    f"transform_at 'switch' works with switch_sum only, not {exchange.algo!r}"
                )
            if network.switch.transform is None:
                raise TransitsimError(
                    f"transform_at 'switch': network {network.name!r} has no switch transform"
                )
    if exchange.transform_at is not None:
        _check_readout(network, exchange)
    if exchange.algo == "switch_sum" and not network.switch.aggregator:
        raise TransitsimError(
            f"switch_sum needs a switch that sums: network {network.name!r} has aggregator off"
        )


def _check_readout(network: NetworkSpec, exchange: Exchange) -> None:
    """The band a transform sends is at most what it reads out: keep x its (padded) dense input.

    A payload larger than that cannot come out of this transform: the trace was made with a
    wider band than the network's transform keeps (TransformSpec.keep).
    """
    place = exchange.transform_at
    spec = network.pluggable.transform if place == "pluggable" else network.switch.transform
    assert spec is not None
    readout = math.ceil(spec.keep * padded_dense_bytes(spec, exchange.dense_bytes) * (1 + 1e-9))
    if exchange.payload_bytes > readout:
        raise TransitsimError(
            f"transform_at {place!r}: network {network.name!r}'s transform keeps {spec.keep:g} of "
            f"its {exchange.dense_bytes:,} dense bytes ({readout:,} B), but the payload is "
            f"{exchange.payload_bytes:,} B: raise transform keep or send a narrower band"
        )
