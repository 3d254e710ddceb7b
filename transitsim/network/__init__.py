"""The network floor: stages, topologies, collectives and their closed forms.

Knows nothing of traces or losses (never imports transitsim.traces or torch: an import-linter
contract). Replay asks it one question: how long does this exchange take on this network, for
these start times?
"""

from transitsim.network.background import Background, read_background_csv
from transitsim.network.closed_form import closed_form_time_s
from transitsim.network.exchange import (
    METHODS,
    Exchange,
    ExchangeResult,
    LinkFault,
    simulate_exchange,
    validate_exchange,
)
from transitsim.network.spec import (
    COLLECTIVE_ALGOS,
    FIBRE_S_PER_M,
    TOPOLOGIES,
    HostSpec,
    LinkSpec,
    NetworkSpec,
    PluggableSpec,
    SwitchSpec,
    TransformSpec,
    tcp_efficiency,
)
from transitsim.network.topology import build_topology, validate_network

__all__ = [
    "COLLECTIVE_ALGOS",
    "FIBRE_S_PER_M",
    "METHODS",
    "TOPOLOGIES",
    "Background",
    "Exchange",
    "ExchangeResult",
    "HostSpec",
    "LinkFault",
    "LinkSpec",
    "NetworkSpec",
    "PluggableSpec",
    "SwitchSpec",
    "TransformSpec",
    "build_topology",
    "closed_form_time_s",
    "read_background_csv",
    "simulate_exchange",
    "tcp_efficiency",
    "validate_exchange",
    "validate_network",
]
