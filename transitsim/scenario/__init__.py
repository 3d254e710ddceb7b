"""Scenario YAML -> validated objects: traces, networks (or a grid of them), compute, targets.

One module per job: `quantities` (values with units), `network_models` and `models` (the pydantic
format), `specs` (a network model -> NetworkSpec), `grid` and `networks` (expansion), `traces`
(trace files), `yaml_source` (YAML plumbing and one-line errors), `loader`, `schema`.
"""

from transitsim.scenario.grid import MAX_GRID_POINTS
from transitsim.scenario.loader import load_scenario
from transitsim.scenario.models import (
    MAX_SCALE_PARAMS,
    OUTPUT_FILES,
    FaultModel,
    OutputsModel,
    Placement,
    ScaleModel,
    Scenario,
    StragglersModel,
    TraceEntry,
    TraceFile,
)
from transitsim.scenario.network_models import GridModel, LinkModel, NetworkModel
from transitsim.scenario.networks import (
    network_from_dict,
    network_placement,
    network_preset,
    scenario_to_networks,
)
from transitsim.scenario.schema import scenario_json_schema

__all__ = [
    "MAX_GRID_POINTS",
    "MAX_SCALE_PARAMS",
    "OUTPUT_FILES",
    "FaultModel",
    "GridModel",
    "LinkModel",
    "NetworkModel",
    "OutputsModel",
    "Placement",
    "ScaleModel",
    "Scenario",
    "StragglersModel",
    "TraceEntry",
    "TraceFile",
    "load_scenario",
    "network_from_dict",
    "network_placement",
    "network_preset",
    "scenario_json_schema",
    "scenario_to_networks",
]
