"""The whole scenario model: compute, scale, stragglers, faults, traces, targets, outputs.

Also the plain records a loaded scenario resolves to (`TraceFile`, `Placement`).
"""

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PrivateAttr, WithJsonSchema, model_validator

from transitsim.analysis.metrics import MAX_TARGETS
from transitsim.base.errors import TransitsimError
from transitsim.base.units import parse_time_s, show_value
from transitsim.network import LinkFault
from transitsim.network.spec import NetworkSpec
from transitsim.overlap import DDP_BUCKET_BYTES, OVERLAP_MODES
from transitsim.replay.compute import JITTER_DISTRIBUTIONS, JITTER_MODES, ComputeModel, Stragglers
from transitsim.replay.fitted import FittedStragglers
from transitsim.replay.request import MAX_SCALE_PARAMS
from transitsim.scenario.network_models import GridModel, NetworkModel, PlacementModel
from transitsim.scenario.quantities import Duration, FlopRate, Size, StrictModel, Target

OUTPUT_FILES = ("timeline", "summary", "ladder", "sweep", "link_util", "report", "trace_events")


class FromTraceCompute(StrictModel):
    """Compute seconds per step as measured in the trace."""

    model: Literal["from_trace"] = Field(
        "from_trace", description="compute seconds per step as the trace measured them"
    )

    def to_compute_model(self) -> ComputeModel:
        return ComputeModel(kind="trace")


class ScaledCompute(StrictModel):
    """Measured compute seconds times `factor` (e.g. 0.25 for a GPU four times faster)."""

    model: Literal["scaled"] = Field(description="the trace's compute seconds times factor")
    factor: float = Field(
        gt=0,
        allow_inf_nan=False,
        description="multiplier on the measured compute seconds (0.25: a GPU four times faster)",
    )

    def to_compute_model(self) -> ComputeModel:
        return ComputeModel(kind="scaled", factor=self.factor)


class FlopsCompute(StrictModel):
    """6 * params * tokens / (gpu_peak * mfu) seconds per step, on a target GPU.

    params and tokens per worker step (batch * context) come from the trace's metadata.
    """

    model: Literal["flops"] = Field(
        description="6 x parameters x tokens per worker step / (gpu_peak x mfu) seconds a step"
    )
    gpu_peak: FlopRate = Field(description='the target GPU\'s peak rate, e.g. "989 TFLOP/s"')
    mfu: float = Field(
        gt=0, le=1, description="model FLOP utilisation: the share of gpu_peak achieved, in (0, 1]"
    )

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


class ScaleModel(StrictModel):
    """What-if scale: replay every trace as a model of `params` parameters.

    Bytes per step and compute (with compression and update) scale with params / the trace's
    n_params; loss per step is kept from the trace, so every row is marked extrapolated.
    """

    params: Annotated[
        int,
        Field(
            le=MAX_SCALE_PARAMS,
            description="parameters of the what-if model: a whole number, e.g. 1e9",
        ),
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


class StragglersModel(StrictModel):
    """Seeded per-step, per-worker compute jitter, plus fixed per-worker slowness.

    mode multiplicative: compute * (1 + X), `scale` a fraction (0.05); additive: compute + X,
    `scale` a duration ("2 ms"). X is exponential (mean scale) or lognormal (median scale,
    shape sigma). worker_factors: one multiplier per worker (a persistently slow machine).
    """

    distribution: Literal[JITTER_DISTRIBUTIONS] = Field(
        "none",
        description="the jitter X of each worker's step: none, exponential (mean scale) or "
        "lognormal (median scale, shape sigma)",
    )
    mode: Literal[JITTER_MODES] = Field(
        "multiplicative", description="multiplicative: compute x (1 + X); additive: compute + X"
    )
    scale: Annotated[
        float,
        WithJsonSchema(
            {
                "anyOf": [{"type": "number", "minimum": 0}, {"type": "string"}],
                "description": 'a fraction (mode multiplicative) or a duration like "2 ms"',
            },
            mode="validation",
        ),
    ] = Field(
        0.0,
        description="the jitter's size: a fraction (mode multiplicative, e.g. 0.05) or a "
        'duration (mode additive, e.g. "2 ms")',
    )
    sigma: float = Field(0.5, ge=0, le=10, description="lognormal: the standard deviation of ln X")
    worker_factors: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] = Field(
        [],
        description="one compute multiplier per worker (1.5: a persistently slow machine); "
        "empty: every worker alike",
    )
    seed: int = Field(0, ge=0, description="seed of the jitter (the same seed, the same run)")
    from_: str | None = Field(
        None,
        alias="from",
        min_length=1,
        description="a trace imported from several ranks' profiles (a file, or a folder holding "
        "one; relative to the scenario): its fitted per-rank factors and jitter "
        "(profile.stragglers), in place of distribution, scale, mode and worker_factors",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_alone(cls, data: Any) -> Any:
        """`from` brings the fitted jitter and factors: they are not given beside it."""
        if isinstance(data, dict) and "from" in data:
            given = sorted(set(data) - {"from", "seed"})
            if given:
                raise ValueError(
                    f"from: the trace's fitted stragglers replace {', '.join(given)}: give "
                    "either from (and seed) or those"
                )
        return data

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


class FaultModel(StrictModel):
    """A link outage on the replay clock: `link` carries nothing from down_at until up_at."""

    link: str = Field(
        min_length=1,
        description='a link of the simulated network: "u->v", "u->v#k" (one of parallel links) '
        'or "u<->v" (both directions)',
    )
    down_at: Duration = Field(
        description="when the link goes down, on the replay clock (from the first step's start)"
    )
    up_at: Duration = Field(description="when the link carries traffic again (after down_at)")

    @model_validator(mode="after")
    def _ordered(self) -> "FaultModel":
        if self.up_at <= self.down_at:
            raise ValueError("up_at must come after down_at")
        return self

    def to_link_fault(self) -> LinkFault:
        return LinkFault(link=self.link, down_from_s=self.down_at, down_until_s=self.up_at)


class TraceEntry(StrictModel):
    """A trace file or glob (relative to the scenario file); `label` renames its config."""

    path: str = Field(
        min_length=1,
        description="a trace file, folder or glob, relative to the scenario file (an entry may "
        "be this string alone)",
    )
    label: str | None = Field(
        None, min_length=1, description="the name every output gives this entry's configuration"
    )
    replicas: Literal["worker", "site"] = Field(
        "worker",
        description="local SGD (H, H-s, L): 'worker', a replica per worker as trained; 'site', "
        "one replica per datacentre, each site's workers all-reducing every step over its LAN "
        "(a trace recorded with as many replicas as the network has datacentres)",
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"path": data} if isinstance(data, str) else data


class OutputsModel(StrictModel):
    """Where a run's results go, and which files it writes."""

    dir: str | None = Field(
        None, min_length=1, description="folder for results, relative to the scenario file"
    )
    files: list[Literal[OUTPUT_FILES]] = Field(
        ["timeline", "summary", "ladder", "report"],
        description="which files to write (notes.txt, every note of the run, is always written)",
    )
    table_format: Literal["parquet", "csv"] = Field(
        "parquet", description="the timeline's file format"
    )


class VerdictModel(StrictModel):
    """How the verdict decides a winner (transitsim.analysis.outcomes has the tie rule)."""

    tie_margin: float = Field(
        0.01,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description="configurations less than this share apart in mean time to loss (0.01: "
        "1 %) are called a tie; further apart with overlapping intervals, 'cannot separate'",
    )


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
    replicas: str = "worker"  # the entry's layout of local-SGD replicas (replay's replicas)


@dataclass(frozen=True)
class Placement:
    """Where replay computes the transform (None: on the GPU) and where payloads are summed;
    whether the exchange overlaps backward on this network point (and in what buckets)."""

    transform_at: str | None
    sum_at: str
    overlap: str = "none"
    bucket_bytes: int = DDP_BUCKET_BYTES


NetworkPoint = tuple[str, NetworkSpec, dict[str, Any], Placement]


class Scenario(StrictModel):
    """A whole scenario. `load_scenario` also resolves its trace files and networks."""

    name: str | None = Field(None, min_length=1, description="default: the file name's stem")
    description: str = Field("", description="one line saying what the scenario asks")
    traces: list[TraceEntry] = Field(
        min_length=1, description="the traces to replay: paths or globs, or {path, label}"
    )
    networks: list[NetworkModel] = Field(
        [], description="networks to replay every trace on: preset names or network mappings"
    )
    grid: GridModel | None = Field(
        None,
        description="a base network and lists of values for some of its keys: every "
        "combination is a network point (after the listed networks)",
    )
    placement: PlacementModel = Field(
        default_factory=PlacementModel,
        description="where the band is made and summed on every network (a network's own "
        "placement wins)",
    )
    compute: Compute = Field(
        default_factory=FromTraceCompute,
        description="seconds of GPU work a step, by key model: from_trace (the default), "
        "scaled or flops",
    )
    scale: ScaleModel | None = Field(
        None, description="what-if model size; absent: each trace's own (no extrapolation)"
    )
    stragglers: StragglersModel = Field(
        default_factory=StragglersModel,
        description="seeded per-step, per-worker compute jitter and slow workers",
    )
    faults: list[FaultModel] = Field([], description="link outages on the replay clock")
    overlap: Literal[OVERLAP_MODES] | list[Literal[OVERLAP_MODES]] = Field(
        "none",
        description="none: the exchange follows backward; buckets: each gradient bucket (A) or "
        "tensor (DeMo) is exchanged as soon as backward makes it ready; a list: replay each "
        "network both ways (an axis)",
    )
    bucket_size: Size = Field(
        DDP_BUCKET_BYTES, gt=0, description="DDP bucket cap for overlap (default 25 MiB, as DDP's)"
    )
    targets: list[Target] = Field(
        min_length=1,
        max_length=MAX_TARGETS,
        description='validation losses to reach, or "final:<config>" (that configuration\'s '
        "mean final loss over its seeds)",
    )
    baseline: str | None = Field(None, description="a variant id or a config name (or label)")
    outputs: OutputsModel = Field(
        default_factory=OutputsModel, description="where the results go, and which files"
    )
    verdict: VerdictModel = Field(
        default_factory=VerdictModel, description="how the verdict calls a tie"
    )

    _source_path: Path | None = PrivateAttr(None)
    _trace_files: list[TraceFile] = PrivateAttr(default_factory=list)
    _expanded: list[NetworkPoint] | None = PrivateAttr(None)
    _stragglers_fit: FittedStragglers | None = PrivateAttr(None)

    @property
    def source_path(self) -> Path | None:
        """The YAML file this scenario came from (None when built in code)."""
        return self._source_path

    @property
    def base_dir(self) -> Path:
        """Relative paths in the scenario are relative to this folder."""
        return self._source_path.parent if self._source_path else Path.cwd()

    def stragglers_on(self, workers: int) -> tuple[Stragglers, str | None]:
        """The replay's stragglers on a network of `workers`: as written, or fitted from the
        trace `stragglers.from` names (replay/fitted.py; a note where its factors do not fit)."""
        if self._stragglers_fit is not None:
            return self._stragglers_fit.for_workers(workers)
        return self.stragglers.to_stragglers(), None

    @property
    def scale_params(self) -> int | None:
        """The what-if parameter count replay should use (None: each trace's own)."""
        return self.scale.params if self.scale is not None else None

    @property
    def overlap_modes(self) -> list[str]:
        """The overlap modes every network is replayed with, in order, without repeats."""
        modes = [self.overlap] if isinstance(self.overlap, str) else self.overlap
        return list(dict.fromkeys(modes))

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
