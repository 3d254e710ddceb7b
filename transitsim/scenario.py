"""Scenario YAML -> validated objects: traces, networks (or a grid of them), compute, targets.

Units are parsed here, once (`transitsim.units`); below this layer everything is SI floats in
`NetworkSpec`s. Every user mistake becomes one `TransitsimError` line naming the file, the line
and the key path, e.g.
`quickstart.yaml:12: networks[0].host_link.rate: expected a rate like "200 Gb/s", got "fast"`.
"""

import copy
import glob
import itertools
import json
import math
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from transitsim.compute import JITTER_DISTRIBUTIONS, JITTER_MODES, ComputeModel, Stragglers
from transitsim.errors import TransitsimError
from transitsim.metrics import resolve_config
from transitsim.network import LinkFault
from transitsim.network.spec import (
    COLLECTIVE_ALGOS,
    TOPOLOGIES,
    LinkSpec,
    NetworkSpec,
    PluggableSpec,
    SwitchSpec,
    TransformSpec,
)
from transitsim.network_presets import preset_dict, preset_names
from transitsim.scenario_yaml import (
    KeyPathIssue,
    check_keys,
    descend,
    error_message,
    fields_of,
    first_error,
    format_path,
    is_dict,
    line_of,
    read_yaml,
    visible_path,
)
from transitsim.trace import config_name, read_meta
from transitsim.units import (
    parse_bytes,
    parse_flop_rate,
    parse_frequency_hz,
    parse_length_m,
    parse_rate_bps,
    parse_time_s,
    show_value,
)

OUTPUT_FILES = ("timeline", "summary", "ladder", "sweep", "link_util", "report", "trace_events")
MAX_GRID_POINTS = 4096
MAX_SCALE_PARAMS = 10**15  # what-if model sizes beyond this are typos, not questions
_GLOB_CHARS = re.compile(r"[*?\[]")

# ---------------------------------------------------------------------------------------------
# Quantities with units: validated by transitsim.units, documented as strings in the JSON Schema.


def _via(parser: typing.Callable[[object], Any]) -> BeforeValidator:
    """Run a units parser inside pydantic, so its message lands at the right key."""

    def validate(value: object) -> Any:
        try:
            return parser(value)
        except TransitsimError as exc:
            raise ValueError(str(exc)) from None

    return BeforeValidator(validate)


def _unit_schema(example: str, description: str) -> WithJsonSchema:
    return WithJsonSchema(
        {"type": "string", "description": description, "examples": [example]}, mode="validation"
    )


Rate = Annotated[
    float, _via(parse_rate_bps), _unit_schema("200 Gb/s", "a rate: b/s, B/s, bps, with k M G T P")
]
Duration = Annotated[
    float, _via(parse_time_s), _unit_schema("5 ms", "a duration: s, ms, us, ns, min, h")
]
Length = Annotated[float, _via(parse_length_m), _unit_schema("1000 km", "a length: m, km")]
Frequency = Annotated[
    float, _via(parse_frequency_hz), _unit_schema("1 GHz", "a frequency: Hz, kHz, MHz, GHz, /s")
]
FlopRate = Annotated[
    float, _via(parse_flop_rate), _unit_schema("989 TFLOP/s", "a compute rate: FLOP/s, FLOPS")
]
Size = Annotated[
    int,
    _via(parse_bytes),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}],
            "description": "a size in bytes: B, kB, MB, GB, KiB, MiB, GiB, or a plain integer",
            "examples": ["4 KiB"],
        },
        mode="validation",
    ),
]


def _parse_target(value: object) -> float | str:
    """A target is a validation loss, or 'final:<config>': the final loss some config reached."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if math.isfinite(value) and value > 0:
            return float(value)
    if isinstance(value, str) and value.startswith("final:") and value[6:].strip():
        return "final:" + value[6:].strip()
    raise ValueError(f'expected a loss like 3.3 or "final:<config name>", got {show_value(value)}')


Target = Annotated[
    float | str,
    BeforeValidator(_parse_target),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "pattern": "^final:.+$"},
            ],
            "description": 'a validation loss, or "final:<config name>"',
        },
        mode="validation",
    ),
]


class _Strict(BaseModel):
    """No unknown keys, no silent type coercion ('yes' is not a bool), immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# ---------------------------------------------------------------------------------------------
# Networks


class LinkModel(_Strict):
    """One direction of a cable."""

    rate: Rate
    latency: Duration = Field("0 s", validate_default=True)
    length: Length = Field("0 m", validate_default=True)
    overhead: Duration = Field("0 s", validate_default=True)

    def to_spec(self) -> LinkSpec:
        return LinkSpec(
            rate_bps=self.rate,
            latency_s=self.latency,
            length_m=self.length,
            overhead_s=self.overhead,
        )


class TransformModel(_Strict):
    """An optical transform: `planes` passes per chunk of `size` inputs, at `rate` passes/s."""

    size: int = Field(256, ge=2, le=1 << 20)
    planes: int = Field(8, ge=1, le=64)
    rate: Frequency = Field("1 GHz", validate_default=True)
    latency: Duration = Field("0 s", validate_default=True)
    keep: float = Field(1 / 16, gt=0, le=1)
    input_bytes: int = Field(2, ge=1, le=8, description="bytes per dense input element (BF16: 2)")

    @model_validator(mode="after")
    def _power_of_two(self) -> "TransformModel":
        if self.size & (self.size - 1):
            raise ValueError(f"size must be a power of 2, got {self.size}")
        return self

    def to_spec(self) -> TransformSpec:
        return TransformSpec(
            size=self.size,
            planes=self.planes,
            passes_per_s=self.rate,
            latency_s=self.latency,
            keep=self.keep,
            input_bytes=self.input_bytes,
        )


class PluggableModel(_Strict):
    host_lane_rate: Rate
    line_rate: Rate
    transform: TransformModel | None = None


class SwitchModel(_Strict):
    forwarding_latency: Duration = Field("0 s", validate_default=True)
    store_and_forward: bool = False
    aggregator: bool = False
    agg_slots: int = Field(0, ge=0, description="in-flight aggregation slots; 0 = unbounded")
    agg_slot_size: Size = Field(0, description="bytes one slot holds; 0 = the whole message")
    agg_rate: Rate | None = Field(None, description="summing rate; absent = unlimited")
    transform: TransformModel | None = None


class PlacementModel(_Strict):
    """Where the transform is computed and where payloads are summed (absent = as the network)."""

    transform: Literal["none", "pluggable", "switch"] | None = None
    sum: Literal["receivers", "switch"] | None = None


class NetworkModel(_Strict):
    """A network as YAML writes it; `preset: NAME` starts from a named one and overrides keys."""

    name: str | None = Field(None, min_length=1)
    preset: str | None = None
    description: str = ""
    topology: Literal[TOPOLOGIES]
    workers: int = Field(ge=1, le=1_000_000)
    host_link: LinkModel
    pluggable: PluggableModel | None = None
    switch: SwitchModel = Field(default_factory=SwitchModel)
    hosts_per_rack: int = Field(0, ge=0)
    spine_link: LinkModel | None = None
    datacentres: int = Field(1, ge=1)
    wan_link: LinkModel | None = None
    wan_links: int = Field(1, ge=1)
    collective: Literal[COLLECTIVE_ALGOS] | None = None
    link_overrides: dict[str, LinkModel] = {}
    placement: PlacementModel | None = None

    @model_validator(mode="before")
    @classmethod
    def _expand_preset(cls, data: Any) -> Any:
        if isinstance(data, str):  # shorthand: a preset name
            data = {"preset": data}
        if isinstance(data, dict) and "preset" in data:
            name = data["preset"]
            if not isinstance(name, str) or name not in preset_names():
                known = ", ".join(preset_names())
                raise ValueError(f"preset {show_value(name)} is unknown (known: {known})")
            return _deep_merge({"name": name, **preset_dict(name)}, data)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> "NetworkModel":
        if self.topology == "leaf_spine":
            if self.hosts_per_rack < 1 or self.spine_link is None:
                raise ValueError("topology leaf_spine needs hosts_per_rack and spine_link")
            if self.workers % self.hosts_per_rack:
                raise ValueError(
                    f"workers ({self.workers}) must be a multiple of "
                    f"hosts_per_rack ({self.hosts_per_rack})"
                )
        if self.topology == "datacentres":
            if self.datacentres < 2 or self.wan_link is None:
                raise ValueError("topology datacentres needs datacentres >= 2 and wan_link")
            if self.workers % self.datacentres:
                raise ValueError(
                    f"workers ({self.workers}) must be a multiple of "
                    f"datacentres ({self.datacentres})"
                )
        return self


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` wins; nested mappings merge key by key (so one key of a preset can change)."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


class GridModel(_Strict):
    """A base network and lists of values for some of its keys: every combination is a network."""

    network: NetworkModel
    sweep: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(min_length=1)
    _raw_network: Any = PrivateAttr(None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_raw_network(cls, data: Any, handler: Any) -> "GridModel":
        """Grid values are substituted into the network as written (units still text)."""
        grid = handler(data)
        grid._raw_network = copy.deepcopy(data.get("network")) if isinstance(data, dict) else None
        return grid


# ---------------------------------------------------------------------------------------------
# Compute, stragglers, faults, traces, outputs


class FromTraceCompute(_Strict):
    """Compute seconds per step as measured in the trace."""

    model: Literal["from_trace"] = "from_trace"

    def to_compute_model(self) -> ComputeModel:
        return ComputeModel(kind="trace")


class ScaledCompute(_Strict):
    """Measured compute seconds times `factor` (e.g. 0.25 for a GPU four times faster)."""

    model: Literal["scaled"]
    factor: float = Field(gt=0, allow_inf_nan=False)

    def to_compute_model(self) -> ComputeModel:
        return ComputeModel(kind="scaled", factor=self.factor)


class FlopsCompute(_Strict):
    """6 * params * tokens / (gpu_peak * mfu) seconds per step, on a target GPU.

    params and tokens per worker step (batch * context) come from the trace's metadata.
    """

    model: Literal["flops"]
    gpu_peak: FlopRate
    mfu: float = Field(gt=0, le=1)

    def to_compute_model(self) -> ComputeModel:
        return ComputeModel(kind="flops", peak_flops=self.gpu_peak, mfu=self.mfu)


Compute = Annotated[FromTraceCompute | ScaledCompute | FlopsCompute, Field(discriminator="model")]


def _parse_params(value: object) -> int:
    """A parameter count: a whole number, written 1000000000, 1_000_000_000, 1.0e9 or "1e9"
    (YAML reads a bare 1e9 as text)."""
    number: float | int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value.strip().replace("_", "").replace(",", ""))
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or number < 1 or number != int(number):
        raise ValueError(
            f"expected a positive whole number of parameters like 1e9, got {show_value(value)}"
        )
    return int(number)


class ScaleModel(_Strict):
    """What-if scale: replay every trace as a model of `params` parameters.

    Bytes per step and compute (with compression and update) scale with params / the trace's
    n_params; loss per step is kept from the trace, so every row is marked extrapolated.
    """

    params: Annotated[
        int,
        Field(le=MAX_SCALE_PARAMS),
        BeforeValidator(_parse_params),
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "integer", "minimum": 1, "maximum": MAX_SCALE_PARAMS},
                    {"type": "string"},
                ],
                "description": "parameters of the what-if model: a whole number, e.g. 1e9",
                "examples": ["1e9"],
            },
            mode="validation",
        ),
    ]


class StragglersModel(_Strict):
    """Seeded per-step, per-worker compute jitter, plus fixed per-worker slowness.

    mode multiplicative: compute * (1 + X), `scale` a fraction (0.05); additive: compute + X,
    `scale` a duration ("2 ms"). X is exponential (mean scale) or lognormal (median scale,
    shape sigma). worker_factors: one multiplier per worker (a persistently slow machine).
    """

    distribution: Literal[JITTER_DISTRIBUTIONS] = "none"
    mode: Literal[JITTER_MODES] = "multiplicative"
    scale: Annotated[
        float,
        WithJsonSchema(
            {
                "anyOf": [{"type": "number", "minimum": 0}, {"type": "string"}],
                "description": 'a fraction (mode multiplicative) or a duration like "2 ms"',
            },
            mode="validation",
        ),
    ] = 0.0
    sigma: float = Field(0.5, ge=0, le=10)
    worker_factors: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] = []
    seed: int = Field(0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _scale_in_its_unit(cls, data: Any) -> Any:
        """The unit of `scale` depends on `mode`: parse it before the field is checked."""
        if not isinstance(data, dict) or "scale" not in data:
            return data
        scale = data["scale"]
        if data.get("mode") == "additive":
            try:
                return {**data, "scale": parse_time_s(scale)}
            except TransitsimError as exc:
                raise ValueError(f"scale (mode additive): {exc}") from None
        if isinstance(scale, bool) or not isinstance(scale, int | float):
            raise ValueError(f"scale: expected a fraction like 0.05, got {show_value(scale)}")
        if not math.isfinite(scale) or scale < 0:
            raise ValueError(f"scale: must be a non-negative fraction, got {show_value(scale)}")
        return {**data, "scale": float(scale)}

    def to_stragglers(self) -> Stragglers:
        return Stragglers(
            distribution=self.distribution,
            scale=self.scale,
            mode=self.mode,
            sigma=self.sigma,
            worker_factors=tuple(self.worker_factors),
        )


class FaultModel(_Strict):
    """A link outage on the replay clock: `link` carries nothing from down_at until up_at."""

    link: str = Field(
        min_length=1,
        description='a link of the simulated network: "u->v", "u->v#k" (one of parallel links) '
        'or "u<->v" (both directions)',
    )
    down_at: Duration
    up_at: Duration

    @model_validator(mode="after")
    def _ordered(self) -> "FaultModel":
        if self.up_at <= self.down_at:
            raise ValueError("up_at must come after down_at")
        return self

    def to_link_fault(self) -> LinkFault:
        return LinkFault(link=self.link, down_from_s=self.down_at, down_until_s=self.up_at)


class TraceEntry(_Strict):
    """A trace file or glob (relative to the scenario file); `label` renames its config."""

    path: str = Field(min_length=1)
    label: str | None = Field(None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"path": data} if isinstance(data, str) else data


class OutputsModel(_Strict):
    dir: str | None = Field(
        None, min_length=1, description="folder for results, relative to the scenario file"
    )
    files: list[Literal[OUTPUT_FILES]] = ["timeline", "summary", "ladder", "report"]
    table_format: Literal["parquet", "csv"] = "parquet"


@dataclass(frozen=True)
class TraceFile:
    """One resolved trace of a scenario (metadata read, rows not)."""

    path: Path
    name: str
    config: str
    variant: str
    seed: int
    workers: int
    n_params: int
    label: str | None


class Scenario(_Strict):
    """A whole scenario. `load_scenario` also resolves its trace files and networks."""

    name: str | None = Field(None, min_length=1, description="default: the file name's stem")
    description: str = ""
    traces: list[TraceEntry] = Field(min_length=1)
    networks: list[NetworkModel] = []
    grid: GridModel | None = None
    placement: PlacementModel = Field(default_factory=PlacementModel)
    compute: Compute = Field(default_factory=FromTraceCompute)
    scale: ScaleModel | None = Field(
        None, description="what-if model size; absent: each trace's own (no extrapolation)"
    )
    stragglers: StragglersModel = Field(default_factory=StragglersModel)
    faults: list[FaultModel] = []
    targets: list[Target] = Field(min_length=1)
    baseline: str | None = Field(None, description="a variant id or a config name (or label)")
    outputs: OutputsModel = Field(default_factory=OutputsModel)

    _source_path: Path | None = PrivateAttr(None)
    _trace_files: list[TraceFile] = PrivateAttr(default_factory=list)
    _expanded: list["_Point"] | None = PrivateAttr(None)

    @property
    def source_path(self) -> Path | None:
        """The YAML file this scenario came from (None when built in code)."""
        return self._source_path

    @property
    def base_dir(self) -> Path:
        """Relative paths in the scenario are relative to this folder."""
        return self._source_path.parent if self._source_path else Path.cwd()

    @property
    def scale_params(self) -> int | None:
        """The what-if parameter count replay should use (None: each trace's own)."""
        return self.scale.params if self.scale is not None else None

    @property
    def trace_files(self) -> list[TraceFile]:
        """The traces the entries resolved to, in order, without duplicates."""
        return list(self._trace_files)

    @property
    def output_dir(self) -> Path | None:
        """`outputs.dir` resolved against the scenario's folder (None: the caller decides)."""
        return self.base_dir / self.outputs.dir if self.outputs.dir else None

    def label_of(self, config: str) -> str:
        """The display name of a config: its label when an entry gave one."""
        for trace in self._trace_files:
            if trace.config == config and trace.label:
                return trace.label
        return config


# ---------------------------------------------------------------------------------------------
# Scenario -> NetworkSpecs


_Point = tuple[str, NetworkSpec, dict[str, Any], "Placement"]


@dataclass(frozen=True)
class Placement:
    """Where replay computes the transform (None: on the GPU) and where payloads are summed."""

    transform_at: str | None
    sum_at: str


def _placement(
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


def _network_spec(model: NetworkModel, name: str) -> NetworkSpec:
    """A validated network model as the simulator's NetworkSpec (SI units throughout)."""
    pluggable = model.pluggable
    switch = model.switch
    return NetworkSpec(
        name=name,
        topology=model.topology,
        workers=model.workers,
        host_link=model.host_link.to_spec(),
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
        spine_link=model.spine_link.to_spec() if model.spine_link else None,
        datacentres=model.datacentres,
        wan_link=model.wan_link.to_spec() if model.wan_link else None,
        wan_links=model.wan_links,
        collective=model.collective,
        link_overrides={key: link.to_spec() for key, link in model.link_overrides.items()},
    )


def _sweep_key_error(key: str) -> str | None:
    """Why `key` is not a dotted path into a network (None when it is)."""
    parts = key.split(".")
    if parts[0] in ("name", "preset", "description"):
        return f"{parts[0]} cannot be swept"
    models: list[Any] = [NetworkModel]
    for index, part in enumerate(parts):
        fields = fields_of(models)
        if part not in fields and not any(is_dict(m) for m in models):
            prefix = ".".join(parts[:index]) or "a network"
            allowed = ", ".join(sorted(fields))
            return f'unknown key "{part}" in {prefix} (allowed: {allowed})'
        models = descend(models, part)
    return None


def _set_dotted(raw: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of `raw` with the dotted `key` set (creating mappings on the way)."""
    result = copy.deepcopy(raw)
    node = result
    parts = key.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = copy.deepcopy(value)
    return result


def _get_dotted(model: Any, key: str) -> Any:
    value = model
    for part in key.split("."):
        value = value[part] if isinstance(value, dict) else getattr(value, part, None)
    return value


def _point_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _expand_grid(scenario: Scenario) -> list[_Point]:
    grid = scenario.grid
    assert grid is not None
    raw = grid._raw_network
    raw = {"preset": raw} if isinstance(raw, str) else raw
    base_name = grid.network.name or "grid"
    for key, values in grid.sweep.items():
        problem = _sweep_key_error(key)
        if problem:
            raise KeyPathIssue(("grid", "sweep", key), problem)
        for index, value in enumerate(values):  # each value alone, so errors point at it
            candidate = _set_dotted(raw, key, value)
            try:
                NetworkModel.model_validate(candidate)
            except ValidationError as exc:
                inner, message = first_error(exc, NetworkModel, candidate)
                detail = message if inner in ("", key) else f"{inner}: {message}"
                raise KeyPathIssue(("grid", "sweep", key, index), detail) from None
    keys = list(grid.sweep)
    count = math.prod(len(values) for values in grid.sweep.values())
    if count > MAX_GRID_POINTS:
        raise KeyPathIssue(
            ("grid", "sweep"), f"{count} points is too many (at most {MAX_GRID_POINTS})"
        )
    points = []
    for combination in itertools.product(*(grid.sweep[key] for key in keys)):
        candidate = raw
        for key, value in zip(keys, combination, strict=True):
            candidate = _set_dotted(candidate, key, value)
        label = ", ".join(f"{k}={_point_text(v)}" for k, v in zip(keys, combination, strict=True))
        name = f"{base_name}[{label}]"
        try:
            model = NetworkModel.model_validate(candidate)
        except ValidationError as exc:
            inner, message = first_error(exc, NetworkModel, candidate)
            raise KeyPathIssue(("grid", "sweep"), f"point {label}: {inner}: {message}") from None
        params = {}
        for key, value in zip(keys, combination, strict=True):
            parsed = _get_dotted(model, key)
            params[key] = value if isinstance(parsed, BaseModel) else parsed
        try:
            placement = _placement(model, scenario.placement, ())
        except KeyPathIssue as issue:
            inner = format_path(issue.path)
            raise KeyPathIssue(
                ("grid", "sweep"), f"point {label}: {inner}: {issue.message}"
            ) from None
        points.append((name, _network_spec(model, name), params, placement))
    return points


def _expand_networks(scenario: Scenario) -> list[_Point]:
    if not scenario.networks and scenario.grid is None:
        raise KeyPathIssue(
            ("networks",), "give at least one network (a preset name or a mapping) or a grid"
        )
    expanded: list[_Point] = []
    for index, model in enumerate(scenario.networks):
        name = model.name or f"network-{index + 1}"
        placement = _placement(model, scenario.placement, ("networks", index))
        expanded.append((name, _network_spec(model, name), {}, placement))
    if scenario.grid is not None:
        expanded.extend(_expand_grid(scenario))
    seen: set[str] = set()
    for index, (name, spec, _, _) in enumerate(expanded):
        in_list = index < len(scenario.networks)
        if name in seen:
            raise KeyPathIssue(
                ("networks", index, "name") if in_list else ("grid",),
                f'network name "{name}" is used twice: give each network its own name',
            )
        seen.add(name)
        factors = scenario.stragglers.worker_factors
        if factors and len(factors) != spec.workers:
            raise KeyPathIssue(
                ("stragglers", "worker_factors"),
                f"{len(factors)} factors for network {name} of {spec.workers} workers",
            )
    return expanded


def _expanded(scenario: Scenario) -> list[_Point]:
    if scenario._expanded is None:
        try:
            scenario._expanded = _expand_networks(scenario)
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


def network_from_dict(raw: Any) -> NetworkSpec:
    """A network written as in a scenario (or a preset name) as a NetworkSpec."""
    try:
        model = NetworkModel.model_validate(raw)
    except ValidationError as exc:
        inner, message = first_error(exc, NetworkModel, raw)
        raise TransitsimError(f"network: {inner}: {message}" if inner else message) from None
    return _network_spec(model, model.name or "network")


def network_preset(name: str) -> NetworkSpec:
    """A named preset (see `transitsim.network_presets`) as a NetworkSpec, for `--network`."""
    preset_dict(name)  # unknown names: one clear line listing the known ones
    return network_from_dict(name)


# ---------------------------------------------------------------------------------------------
# Traces


def _resolve_traces(scenario: Scenario, base_dir: Path) -> list[TraceFile]:
    files: list[TraceFile] = []
    seen: set[Path] = set()
    for index, entry in enumerate(scenario.traces):
        where = ("traces", index, "path")
        pattern = Path(entry.path).expanduser()
        pattern = pattern if pattern.is_absolute() else base_dir / pattern
        if _GLOB_CHARS.search(entry.path):
            matches = sorted(Path(p) for p in glob.glob(str(pattern), recursive=True))
            matches = [p for p in matches if p.is_file()]
            if not matches:
                raise KeyPathIssue(where, f"no trace file matches {pattern}")
        elif pattern.is_dir():
            matches = sorted(pattern.glob("*.parquet"))
            if not matches:
                raise KeyPathIssue(where, f"no *.parquet trace in folder {pattern}")
        elif not pattern.exists():
            raise KeyPathIssue(where, f"trace file not found: {pattern}")
        else:
            matches = [pattern]
        entry_configs = set()
        for path in matches:
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                meta = read_meta(path)
            except TransitsimError as exc:
                raise KeyPathIssue(where, str(exc)) from None
            config = config_name(meta["name"])
            entry_configs.add(config)
            files.append(
                TraceFile(
                    path=path,
                    name=meta["name"],
                    config=config,
                    variant=meta["variant"],
                    seed=meta["seed"],
                    workers=meta["workers"],
                    n_params=meta["n_params"],
                    label=entry.label,
                )
            )
        if entry.label and len(entry_configs) > 1:
            configs = ", ".join(sorted(entry_configs))
            raise KeyPathIssue(
                ("traces", index, "label"),
                f'label "{entry.label}" would name several configs ({configs}): '
                "give each its own entry",
            )
    labels: dict[str, str] = {}
    for trace in files:
        if trace.label and labels.setdefault(trace.config, trace.label) != trace.label:
            raise KeyPathIssue(
                ("traces",),
                f'config "{trace.config}" has two labels: '
                f'"{labels[trace.config]}" and "{trace.label}"',
            )
    return files


def _check_names(scenario: Scenario, files: list[TraceFile]) -> None:
    """Targets 'final:X' and the baseline must name one config: its name, its label, a variant
    with a single config, or a unique part of a name (as `transitsim.metrics` resolves them)."""
    variants = {trace.config: trace.variant for trace in files}
    labels = {trace.label for trace in files if trace.label}
    queries = [
        (("targets", i), t[6:]) for i, t in enumerate(scenario.targets) if isinstance(t, str)
    ]
    if scenario.baseline is not None:
        queries.append((("baseline",), scenario.baseline))
    for where, query in queries:
        if query in labels:
            continue
        try:
            resolve_config(query, variants)
        except TransitsimError as exc:
            raise KeyPathIssue(where, str(exc)) from None


# ---------------------------------------------------------------------------------------------
# Loading


def load_scenario(path: Path | str) -> Scenario:
    """Read, validate and resolve a scenario file; any mistake is one TransitsimError line."""
    path = Path(path)
    node, data = read_yaml(path)

    def fail(where: tuple[Any, ...], message: str, line: int | None = None) -> TransitsimError:
        key = format_path(where)
        prefix = f"{path}:{line or line_of(node, where)}:"
        return TransitsimError(f"{prefix} {key}: {message}" if key else f"{prefix} {message}")

    try:
        check_keys(node)
    except KeyPathIssue as issue:
        raise fail(issue.path, issue.message, issue.line) from None
    if not isinstance(data, dict):
        raise fail(
            (), f"a scenario is a mapping of keys (traces, networks, ...), got {show_value(data)}"
        )
    if "name" not in data:
        data = {"name": path.stem, **data}
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        errors = [(visible_path(e["loc"], data, Scenario, e["type"]), e) for e in exc.errors()]
        # by line; on one line an unknown key first (a typo also makes a key "missing")
        errors.sort(key=lambda item: (line_of(node, item[0]), item[1]["type"] != "extra_forbidden"))
        where, first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise fail(where, error_message(first, Scenario) + more) from None
    scenario._source_path = path
    try:
        scenario._expanded = _expand_networks(scenario)
        scenario._trace_files = _resolve_traces(scenario, path.parent)
        _check_names(scenario, scenario._trace_files)
    except KeyPathIssue as issue:
        raise fail(issue.path, issue.message) from None
    return scenario


# ---------------------------------------------------------------------------------------------
# JSON Schema of the format (editors validate and complete YAML with it)


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of scenario files, including the shorthands pydantic cannot see."""
    schema = Scenario.model_json_schema(mode="validation")
    defs = schema["$defs"]
    schema["properties"]["traces"]["items"] = {
        "anyOf": [{"type": "string"}, {"$ref": "#/$defs/TraceEntry"}]
    }
    preset_name = {"type": "string", "enum": preset_names()}
    schema["properties"]["networks"]["items"] = {
        "anyOf": [preset_name, {"$ref": "#/$defs/NetworkModel"}]
    }
    network = defs["NetworkModel"]
    required = network.pop("required", [])
    network["anyOf"] = [{"required": ["preset"]}, {"required": required}]
    network["properties"]["preset"] = {"anyOf": [preset_name, {"type": "null"}], "default": None}
    defs["GridModel"]["properties"]["network"] = {
        "anyOf": [preset_name, {"$ref": "#/$defs/NetworkModel"}]
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://transitsim.invalid/scenario.schema.json",
        "title": "transitsim scenario",
        **schema,
    }
