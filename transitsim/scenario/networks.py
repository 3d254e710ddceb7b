"""A scenario's networks (listed ones, then grid points) as NetworkSpecs, names checked."""

import dataclasses
from typing import Any

from pydantic import ValidationError

from transitsim.base.errors import TransitsimError
from transitsim.network.spec import NetworkSpec
from transitsim.network.topology import build_topology
from transitsim.scenario.grid import expand_grid
from transitsim.scenario.models import NetworkPoint, Placement, Scenario
from transitsim.scenario.network_models import NetworkModel
from transitsim.scenario.presets import preset_dict
from transitsim.scenario.specs import network_spec, placement_of
from transitsim.scenario.yaml_source import KeyPathIssue, first_error, format_path


def expand_networks(scenario: Scenario) -> list[NetworkPoint]:
    if not scenario.networks and scenario.grid is None:
        raise KeyPathIssue(
            ("networks",), "give at least one network (a preset name or a mapping) or a grid"
        )
    expanded: list[NetworkPoint] = []
    for index, model in enumerate(scenario.networks):
        name = model.name or f"network-{index + 1}"
        placement = placement_of(model, scenario.placement, ("networks", index))
        try:
            spec = network_spec(model, name, scenario.base_dir)
        except TransitsimError as exc:  # a link's background CSV
            raise KeyPathIssue(("networks", index), str(exc)) from None
        expanded.append((name, spec, {}, placement))
    if scenario.grid is not None:
        expanded.extend(expand_grid(scenario))
    expanded = _overlap_axis(scenario, expanded)
    seen: set[str] = set()
    known_anywhere: set[str] = set()
    for index, (name, spec, _, _) in enumerate(expanded):
        in_list = index < len(scenario.networks)
        if name in seen:
            raise KeyPathIssue(
                ("networks", index, "name") if in_list else ("grid",),
                f'network name "{name}" is used twice: give each network its own name',
            )
        seen.add(name)
        known = _check_links(scenario, name, spec, ("networks", index) if in_list else ("grid",))
        known_anywhere |= known
        factors = scenario.stragglers.worker_factors
        if factors and len(factors) != spec.workers:
            raise KeyPathIssue(
                ("stragglers", "worker_factors"),
                f"{len(factors)} factors for network {name} of {spec.workers} workers",
            )
    for index, fault in enumerate(scenario.faults):
        if fault.link not in known_anywhere:
            sample = ", ".join(sorted(known_anywhere)[:4])
            raise KeyPathIssue(
                ("faults", index, "link"),
                f"no network has a link {fault.link!r} (links are named like {sample}, ...)",
            )
    return expanded


def link_names(spec: NetworkSpec) -> set[str]:
    """Every name a fault or a link override may use on this network: u->v, u<->v, u->v#k."""
    graph = build_topology(spec)
    known: set[str] = set()
    for a, b, data in graph.edges(data=True):
        known |= {f"{a}->{b}", f"{a}<->{b}"} | {name for name, _ in data["links"]}
    return known


def check_link_overrides(spec: NetworkSpec) -> None:
    """Overrides must name links of the network (else every job would fail later)."""
    if spec.link_overrides:
        build_topology(spec)  # raises TransitsimError naming the unknown link


def _check_links(scenario: Scenario, name: str, spec: NetworkSpec, where: tuple) -> set[str]:
    """The network's link names (empty when nothing needs them); overrides must name real links.
    A fault applies to the networks that have its link (a WAN outage leaves one-switch racks
    alone); a fault on a link no network has is refused once all networks are known."""
    if not spec.link_overrides and not scenario.faults:
        return set()
    try:
        return link_names(spec)
    except TransitsimError as exc:
        raise KeyPathIssue((*where, "link_overrides"), str(exc)) from None


def faults_on(spec: NetworkSpec, faults: tuple) -> tuple:
    """The faults whose link this network has."""
    if not faults:
        return ()
    known = link_names(spec)
    return tuple(fault for fault in faults if fault.link in known)


def overlap_name(name: str, mode: str) -> str:
    """A network point's name on an overlap axis: the overlapped one says so."""
    return f"{name} +overlap" if mode == "buckets" else name


def _overlap_axis(scenario: Scenario, points: list[NetworkPoint]) -> list[NetworkPoint]:
    """Every point once per overlap mode; with two modes the overlapped copy is named apart and
    both carry an `overlap` parameter (a text column: held, not run along)."""
    modes = scenario.overlap_modes
    axis = len(modes) > 1
    result: list[NetworkPoint] = []
    for name, spec, params, placement in points:
        for mode in modes:
            placed = dataclasses.replace(
                placement, overlap=mode, bucket_bytes=int(scenario.bucket_size)
            )
            if not axis:
                result.append((name, spec, params, placed))
                continue
            named = overlap_name(name, mode)
            result.append(
                (named, dataclasses.replace(spec, name=named), {**params, "overlap": mode}, placed)
            )
    return result


def _expanded(scenario: Scenario) -> list[NetworkPoint]:
    if scenario._expanded is None:
        try:
            scenario._expanded = expand_networks(scenario)
        except KeyPathIssue as issue:
            raise TransitsimError(f"{format_path(issue.path)}: {issue.message}") from None
    return scenario._expanded


def scenario_to_networks(scenario: Scenario) -> list[tuple[str, NetworkSpec, dict[str, Any]]]:
    """(name, NetworkSpec, grid parameters of that point) for every network, grid points last.

    Grid parameters map each swept key to its value in SI units (e.g. {"wan_link.rate": 1e11}).
    """
    return [(name, spec, dict(params)) for name, spec, params, _ in _expanded(scenario)]


def network_placement(scenario: Scenario, network_name: str) -> Placement:
    """Where replay should compute the transform and sum payloads on this network."""
    for name, _, _, placement in _expanded(scenario):
        if name == network_name:
            return placement
    raise TransitsimError(f'scenario has no network named "{network_name}"')


MAX_NESTING = 32  # a network mapping is a few levels deep (link_overrides.<link>.background)
MAX_VALUES = 200_000  # as a scenario document (yaml_source's bound on expanded aliases)


def check_plain_size(raw: Any, what: str = "network") -> None:
    """A mapping from Python (simulate's networks=...) is bounded as YAML is: nesting deeper than
    MAX_NESTING was a RecursionError in pydantic and deepcopy, and a mapping that holds itself
    never ends. Walked without recursion."""
    stack = [(raw, 0)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise TransitsimError(f"{what}: more than {MAX_VALUES:,} values (or one holds itself)")
        if isinstance(value, dict | list | tuple):
            if depth >= MAX_NESTING:
                raise TransitsimError(f"{what}: nested more than {MAX_NESTING} levels deep")
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)


def network_from_dict(raw: Any) -> NetworkSpec:
    """A network written as in a scenario (or a preset name) as a NetworkSpec."""
    check_plain_size(raw)
    try:
        model = NetworkModel.model_validate(raw)
    except ValidationError as exc:
        inner, message = first_error(exc, NetworkModel, raw)
        raise TransitsimError(f"network: {inner}: {message}" if inner else message) from None
    spec = network_spec(model, model.name or "network")
    check_link_overrides(spec)
    return spec


def network_preset(name: str) -> NetworkSpec:
    """A named preset (see `transitsim.scenario.presets`) as a NetworkSpec, for `--network`."""
    preset_dict(name)  # unknown names: one clear line listing the known ones
    return network_from_dict(name)
