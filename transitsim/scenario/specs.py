"""One validated network model -> the simulator's NetworkSpec and its Placement."""

import math
from pathlib import Path

from transitsim.network.spec import NetworkSpec, PluggableSpec, SwitchSpec
from transitsim.network.topology import check_size_and_keys
from transitsim.scenario.models import Placement
from transitsim.scenario.network_models import NetworkModel, PlacementModel
from transitsim.scenario.yaml_source import KeyPathIssue


def placement_of(
    model: NetworkModel, default: PlacementModel, where: tuple[str | int, ...]
) -> Placement:
    """The network's placement, or the scenario's; absent: whatever hardware the network has."""
    own = model.placement or PlacementModel()
    transform = own.transform or default.transform
    total = own.sum or default.sum
    has_plug_transform = model.pluggable is not None and model.pluggable.transform is not None
    has_switch_transform = model.switch.transform is not None
    if transform is None:
        transform = (
            "pluggable" if has_plug_transform else "switch" if has_switch_transform else "none"
        )
    elif transform == "pluggable" and not has_plug_transform:
        raise KeyPathIssue(
            (*where, "pluggable"),
            'placement.transform is "pluggable" but the network has no pluggable.transform',
        )
    elif transform == "switch" and not has_switch_transform:
        raise KeyPathIssue(
            (*where, "switch"),
            'placement.transform is "switch" but the network has no switch.transform',
        )
    if total is None:
        total = "switch" if model.switch.aggregator else "receivers"
    elif total == "switch" and not model.switch.aggregator:
        raise KeyPathIssue(
            (*where, "switch"), 'placement.sum is "switch" but switch.aggregator is off'
        )
    return Placement(transform_at=None if transform == "none" else transform, sum_at=total)


def network_spec(model: NetworkModel, name: str, base_dir: Path | None = None) -> NetworkSpec:
    """A validated network model as the simulator's NetworkSpec (SI units throughout).

    base_dir: where relative files (a link's background CSV) are read from (None: the cwd)."""
    pluggable = model.pluggable
    switch = model.switch
    spec = NetworkSpec(
        name=name,
        topology=model.topology,
        workers=model.workers,
        host_link=model.host_link.to_spec(base_dir),
        pluggable=None
        if pluggable is None
        else PluggableSpec(
            host_lane_bps=pluggable.host_lane_rate,
            line_bps=pluggable.line_rate,
            transform=pluggable.transform.to_spec() if pluggable.transform else None,
        ),
        switch=SwitchSpec(
            forwarding_latency_s=switch.forwarding_latency,
            store_and_forward=switch.store_and_forward,
            aggregator=switch.aggregator,
            agg_slots=switch.agg_slots,
            agg_slot_bytes=switch.agg_slot_size,
            agg_rate_bps=switch.agg_rate if switch.agg_rate is not None else math.inf,
            transform=switch.transform.to_spec() if switch.transform else None,
        ),
        hosts_per_rack=model.hosts_per_rack,
        spine_link=model.spine_link.to_spec(base_dir) if model.spine_link else None,
        datacentres=model.datacentres,
        wan_link=model.wan_link.to_spec(base_dir) if model.wan_link else None,
        wan_links=model.wan_links,
        collective=model.collective,
        link_overrides={key: link.to_spec(base_dir) for key, link in model.link_overrides.items()},
        gpus_per_node=model.gpus_per_node,
        nvlink=model.nvlink.to_spec(base_dir) if model.nvlink else None,
        racks_per_pod=model.racks_per_pod,
        oversubscription=model.oversubscription,
        host=model.host.to_spec() if model.host is not None else None,
        nccl=model.nccl.to_spec() if model.nccl is not None else None,
    )
    check_size_and_keys(spec)  # keys its topology ignores; a fabric too large to time soon
    return spec
