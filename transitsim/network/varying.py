"""A network whose background traffic changes in time: when it changes, and the network frozen
between two changes (a constant network the exchange can be simulated and reused on).

Apart from background.py (one link's series, its CSV) because these read a whole NetworkSpec,
which itself holds Backgrounds.
"""

import dataclasses
import math
from typing import Any

from transitsim.network.background import Background
from transitsim.network.spec import NetworkSpec


def link_specs(network: NetworkSpec) -> list[Any]:
    """Every LinkSpec a network description holds (its cables' and overrides')."""
    links = [network.host_link, network.spine_link, network.wan_link, network.nvlink]
    return [link for link in links if link is not None] + list(network.link_overrides.values())


def varies(network: NetworkSpec) -> bool:
    """Whether some link of the network has background traffic that changes in time."""
    return any(
        link.background is not None and link.background.varies for link in link_specs(network)
    )


def change_times(network: NetworkSpec) -> list[float]:
    """Every time some link's share changes, in order (empty: none varies)."""
    times: set[float] = set()
    for link in link_specs(network):
        bg = link.background
        if bg is not None and bg.varies:
            times |= {t for i, t in enumerate(bg.times_s) if i and bg.shares[i] != bg.shares[i - 1]}
    return sorted(times)


def next_change_s(network: NetworkSpec, time_s: float) -> float:
    """The first time after `time_s` at which some link's share changes (inf: never)."""
    changes = [
        link.background.next_change_s(time_s)
        for link in link_specs(network)
        if link.background is not None and link.background.varies
    ]
    return min(changes, default=math.inf)


def frozen_network(network: NetworkSpec, time_s: float) -> NetworkSpec:
    """The network with every varying background held at its share at `time_s` (constant).

    The very same object when nothing varies, so caches keyed by it keep working.
    """
    if not varies(network):
        return network

    def freeze(link: Any) -> Any:
        if link is None or link.background is None or not link.background.varies:
            return link
        share = link.background.share_at(time_s)
        return dataclasses.replace(
            link, background=Background((0.0,), (share,), link.background.greedy_flows)
        )

    return dataclasses.replace(
        network,
        host_link=freeze(network.host_link),
        spine_link=freeze(network.spine_link),
        wan_link=freeze(network.wan_link),
        nvlink=freeze(network.nvlink),
        link_overrides={key: freeze(link) for key, link in network.link_overrides.items()},
    )
