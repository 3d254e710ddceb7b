"""Networks as scenario YAML writes them (pydantic models), and grids of them."""

import copy
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    field_validator,
    model_validator,
)

from transitsim.base.errors import TransitsimError
from transitsim.base.units import show_value
from transitsim.network.background import (
    MAX_GREEDY_FLOWS,
    Background,
    check_share,
    read_background_csv,
)
from transitsim.network.limits import (
    MAX_DATACENTRES,
    MAX_GPUS_PER_NODE,
    MAX_WAN_LINKS,
    MAX_WORKERS,
)
from transitsim.network.spec import (
    COLLECTIVE_ALGOS,
    NCCL_DEFAULTS,
    NCCL_PROTOCOLS,
    TOPOLOGIES,
    HostSpec,
    LinkSpec,
    NcclSpec,
    ProtocolSpec,
    TransformSpec,
)
from transitsim.scenario.presets import preset_dict, preset_names
from transitsim.scenario.quantities import Duration, Frequency, Length, Rate, Size, StrictModel

# Beyond these a value is a typo, and it is refused with the limit (see transitsim.network.limits).
MAX_GRID_POINTS = 4096


class BackgroundModel(StrictModel):
    """Background traffic (network/background.py): a reserved share, constant (`share`) or a
    piecewise-constant series from a CSV (`csv`: a time_s column, seconds on the replay clock,
    increasing, and one of background_share, available_share or available_rate with units), and
    `greedy_flows` competing flows that share the rest max-min with the training flows."""

    csv: str | None = Field(
        None, min_length=1, description="the CSV file, relative to the scenario file"
    )
    share: float | None = Field(None, description="a constant reserved share, in [0, 1)")
    greedy_flows: int = Field(
        0,
        ge=0,
        le=MAX_GREEDY_FLOWS,
        description="competing flows that always have data: with N training flows on the link "
        "each gets 1/(N + greedy_flows) of it (simulated by the DES only)",
    )

    @field_validator("share", mode="before")
    @classmethod
    def _share(cls, value: Any) -> Any:
        return _checked_share(value)

    @model_validator(mode="after")
    def _one_series(self) -> "BackgroundModel":
        if self.csv is not None and self.share is not None:
            raise ValueError("give csv or share, not both")
        return self

    def to_background(self, rate_bps: float, base_dir: Path | None) -> Background | None:
        if self.csv is not None:
            path = Path(self.csv)
            if not path.is_absolute():
                path = (base_dir or Path.cwd()) / path
            series = read_background_csv(path, rate_bps)
        else:
            series = Background.constant(self.share or 0.0)
        if not self.greedy_flows and not any(series.shares):
            return None
        return Background(series.times_s, series.shares, self.greedy_flows)


def _checked_share(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return check_share(value, "background share")
        except TransitsimError as exc:
            raise ValueError(str(exc)) from None
    return value


class LinkModel(StrictModel):
    """One direction of a cable."""

    rate: Rate = Field(description='line rate of one direction, e.g. "200 Gb/s"')
    latency: Duration = Field(
        "0 s", validate_default=True, description="fixed latency on top of propagation"
    )
    length: Length = Field(
        "0 m", validate_default=True, description="cable length: light takes 4.9 us per km"
    )
    overhead: Duration = Field(
        "0 s",
        validate_default=True,
        description="per-message overhead (headers, protocol turn-around)",
    )
    efficiency: float = Field(
        1.0,
        gt=0,
        le=1,
        description="payload share of the rate after framing and protocol headers "
        "(TCP/IPv4/Ethernet at MTU 1500: 0.956)",
    )
    background: (
        Annotated[
            Annotated[float, Tag("number")] | Annotated[BackgroundModel, Tag("mapping")],
            Discriminator(
                lambda value: "mapping" if isinstance(value, dict | BaseModel) else "number"
            ),
        ]
        | None
    ) = Field(
        None,
        description="other traffic on the link: the share of its payload capacity it holds, "
        "in [0, 1) (a reserved share: training flows share the rest max-min), or "
        "{csv: FILE} for a series over time, or {greedy_flows: K} for competing flows",
    )

    @field_validator("background", mode="before")
    @classmethod
    def _share(cls, value: Any) -> Any:
        return _checked_share(value)

    def to_spec(self, base_dir: Path | None = None) -> LinkSpec:
        """The simulator's LinkSpec; a background CSV is read here (relative to base_dir)."""
        background = None
        if isinstance(self.background, BackgroundModel):
            background = self.background.to_background(self.rate, base_dir)
        elif self.background is not None and self.background > 0:
            background = Background.constant(self.background)
        return LinkSpec(
            rate_bps=self.rate,
            latency_s=self.latency,
            length_m=self.length,
            overhead_s=self.overhead,
            efficiency=self.efficiency,
            background=background,
        )


class TransformModel(StrictModel):
    """An optical transform: `planes` passes per chunk of `size` inputs, at `rate` passes/s."""

    size: int = Field(256, ge=2, le=1 << 20, description="inputs per chunk (a power of 2)")
    planes: int = Field(8, ge=1, le=64, description="passes per chunk: one per bit plane")
    rate: Frequency = Field(
        "1 GHz",
        validate_default=True,
        description="passes per second (one pass: one plane of one chunk)",
    )
    latency: Duration = Field(
        "0 s", validate_default=True, description="fixed latency of the transform"
    )
    keep: float = Field(
        1 / 16, gt=0, le=1, description="share of each chunk's outputs read out and sent"
    )
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


class PluggableModel(StrictModel):
    """The module at a host port: host-side lanes, the optical line, maybe a transform."""

    host_lane_rate: Rate = Field(description='the module\'s host-side lanes, e.g. "800 Gb/s"')
    line_rate: Rate = Field(description="the module's optical line rate")
    transform: TransformModel | None = Field(
        None, description="the transform the module computes (absent: it passes data through)"
    )


class SwitchModel(StrictModel):
    """Every switch of the network: forwarding, and optionally summing (in-network aggregation)."""

    forwarding_latency: Duration = Field(
        "0 s", validate_default=True, description="latency of forwarding one packet"
    )
    store_and_forward: bool = Field(
        False, description="hold each packet whole before forwarding it (false: cut-through)"
    )
    aggregator: bool = Field(False, description="the switch sums reducible messages")
    agg_slots: int = Field(0, ge=0, description="in-flight aggregation slots; 0 = unbounded")
    agg_slot_size: Size = Field(0, description="bytes one slot holds; 0 = the whole message")
    agg_rate: Rate | None = Field(None, description="summing rate; absent = unlimited")
    transform: TransformModel | None = Field(
        None, description="a transform at the switch port: the band made in the switch"
    )


class HostModel(StrictModel):
    """Each host's endpoint, in series with its links (LogGP's o and G at the host): what moving
    a message costs the machine (a gloo/TCP rank's CPU and kernel; on a GPU, its channels and
    copy engines), shared by the ranks placed on it. Absent: free, as the links alone."""

    per_message: Duration = Field(
        "0 s",
        validate_default=True,
        description='fixed cost of every message a rank on the host sends, e.g. "20 us"',
    )
    rate: Rate | None = Field(
        None,
        description="payload rate the host moves each way (one for what its ranks send, one "
        "for what they receive), shared max-min by their flows; absent: unlimited",
    )
    ranks_per_host: int = Field(
        1,
        ge=1,
        le=MAX_WORKERS,
        description="consecutive ranks that share one host (must divide workers)",
    )

    def to_spec(self) -> HostSpec:
        return HostSpec(
            per_message_s=self.per_message,
            rate_bps=self.rate if self.rate is not None else float("inf"),
            ranks_per_host=self.ranks_per_host,
        )


class ProtocolModel(StrictModel):
    """One NCCL protocol as the NCCL mode charges it; a key left out keeps NCCL's default
    (docs/engine.md "NCCL mode" gives them with their sources)."""

    efficiency: float | None = Field(
        None,
        gt=0,
        le=1,
        description="payload share of the wire (defaults: ll 0.5, ll128 0.9375, simple 1)",
    )
    latency: Duration | None = Field(
        None, description="added to every link's latency while this protocol runs"
    )
    channel_rate: Rate | None = Field(
        None,
        description="most payload one channel moves per second (default: none; NCCL's tuner caps)",
    )
    channel_bytes: Size | None = Field(
        None, description="fewest bytes one channel is given: fewer channels below C x this"
    )
    nvlink_latency: Duration | None = Field(
        None,
        description="what latency is on NVLink links (defaults: ll 0.3, ll128 0.95, simple 1.7 us)",
    )
    base_latency: Duration | None = Field(
        None, description="charged once per collective (defaults: ll 6.6, ll128 14, simple 8.4 us)"
    )

    def to_spec(self, protocol: str) -> ProtocolSpec:
        default = NCCL_DEFAULTS[protocol]
        return ProtocolSpec(
            efficiency=default.efficiency if self.efficiency is None else self.efficiency,
            latency_s=default.latency_s if self.latency is None else self.latency,
            channel_rate_bps=(
                default.channel_rate_bps if self.channel_rate is None else self.channel_rate
            ),
            channel_bytes=default.channel_bytes
            if self.channel_bytes is None
            else int(self.channel_bytes),
            nvlink_latency_s=(
                default.nvlink_latency_s if self.nvlink_latency is None else self.nvlink_latency
            ),
            base_latency_s=default.base_latency_s
            if self.base_latency is None
            else self.base_latency,
        )


class NcclModel(StrictModel):
    """NCCL's protocols and channels (docs/engine.md "NCCL mode"): each exchange runs on
    `channels` parallel rings with one protocol, its efficiency and latency applied to the
    links; `auto` takes what NCCL's own tuner predicts fastest (tuner: engine, the engine's
    least time)."""

    protocol: Literal[(*NCCL_PROTOCOLS, "auto")] = Field(
        "auto", description="ll, ll128, simple, or auto (the fastest of `protocols`)"
    )
    protocols: list[Literal[NCCL_PROTOCOLS]] = Field(
        list(NCCL_PROTOCOLS),
        min_length=1,
        description="the protocols auto chooses from (NCCL_PROTO)",
    )
    channels: int = Field(1, ge=1, le=64, description="parallel rings (NCCL's channels)")
    algorithm: Literal["auto"] | None = Field(
        None,
        description="auto: an all-reduce runs as the fastest of ring, double binary tree and "
        "(where the switch sums: NVLS) the switch sum; absent: the exchange's own",
    )
    thresholds: list[Size] = Field(
        [],
        description="payload sizes where auto switches protocol, one fewer than protocols, "
        "increasing: the first protocol below the first, ...; empty: the fastest",
    )
    tuner: Literal["nccl", "engine"] = Field(
        "nccl",
        description="who picks for auto: NCCL's cost model (tuning.cc), or engine (least time)",
    )
    gpu: Literal["volta", "ampere", "hopper", "blackwell"] = Field(
        "hopper", description="the GPU generation whose per-channel caps NCCL's tuner reads"
    )
    cpu: Literal["intel", "amd"] = Field(
        "intel", description="the hosts' CPU vendor: NCCL's LL cap across nodes reads it"
    )
    ll: ProtocolModel = Field(default_factory=ProtocolModel, description="LL's values")
    ll128: ProtocolModel = Field(default_factory=ProtocolModel, description="LL128's values")
    simple: ProtocolModel = Field(default_factory=ProtocolModel, description="Simple's values")

    def to_spec(self) -> NcclSpec:
        return NcclSpec(
            protocol=self.protocol,
            channels=self.channels,
            algorithm=self.algorithm,
            protocols=tuple(p for p in NCCL_PROTOCOLS if p in self.protocols),
            thresholds=tuple(float(t) for t in self.thresholds),
            tuner=self.tuner,
            gpu=self.gpu,
            cpu=self.cpu,
            ll=self.ll.to_spec("ll"),
            ll128=self.ll128.to_spec("ll128"),
            simple=self.simple.to_spec("simple"),
        )


class PlacementModel(StrictModel):
    """Where the transform is computed and where payloads are summed (absent = as the network).

    sum: "receivers" all-gathers reducible payloads (the fixed bands of C/D/E/F), "switch" sums
    them in an aggregating switch, "ring" all-reduces them on a ring (hierarchical across
    datacentres), as A's dense gradient is: the fair comparison of a band with A.
    """

    transform: Literal["none", "pluggable", "switch"] | None = Field(
        None,
        description="where E and E' make their band: none (on the GPU), pluggable or switch; "
        "absent: where the network has a transform",
    )
    sum: Literal["receivers", "switch", "ring"] | None = Field(
        None,
        description="where reducible bands are summed: receivers (all-gather), switch or ring "
        "(all-reduce); absent: the switch when it sums, else receivers",
    )


class NetworkModel(StrictModel):
    """A network as YAML writes it; `preset: NAME` starts from a named one and overrides keys."""

    name: str | None = Field(
        None, min_length=1, description="the network's name in every output (default: the preset)"
    )
    preset: str | None = Field(
        None, description="start from this named network; the keys given here override its own"
    )
    description: str = Field("", description="free text")
    topology: Literal[TOPOLOGIES] = Field(description="how the hosts are connected")
    workers: int = Field(ge=1, le=MAX_WORKERS, description="hosts: data-parallel workers")
    host_link: LinkModel = Field(description="each host's link to its switch, each way")
    pluggable: PluggableModel | None = Field(
        None, description="a network pluggable at every host port"
    )
    switch: SwitchModel = Field(default_factory=SwitchModel, description="every switch")
    hosts_per_rack: int = Field(
        0,
        ge=0,
        le=MAX_WORKERS,
        description="leaf_spine: hosts under each leaf; fat_tree: GPUs under each leaf",
    )
    spine_link: LinkModel | None = Field(
        None, description="leaf_spine: each leaf-spine link, each way"
    )
    datacentres: int = Field(
        1, ge=1, le=MAX_DATACENTRES, description="datacentres: sites the hosts split evenly over"
    )
    wan_link: LinkModel | None = Field(
        None, description="datacentres: one direction of each WAN link"
    )
    wan_links: int = Field(
        1, ge=1, le=MAX_WAN_LINKS, description="parallel WAN links between each pair of sites"
    )
    collective: Literal[COLLECTIVE_ALGOS] | None = Field(
        None, description="this collective for every variant (absent: each variant's own)"
    )
    link_overrides: dict[str, LinkModel] = Field(
        {},
        description='links unlike the rest, by name: "u->v" (one direction), "u->v#k" (one of '
        'parallel links) or "u<->v" (both directions)',
    )
    placement: PlacementModel | None = Field(
        None, description="this network's placement (instead of the scenario's)"
    )
    gpus_per_node: int = Field(
        0,
        ge=0,
        le=MAX_GPUS_PER_NODE,
        description="rail_optimised, fat_tree: GPUs per node, one NIC each",
    )
    nodes: int | None = Field(
        None,
        ge=1,
        le=MAX_WORKERS,
        description="rail_optimised, fat_tree: the nodes; sets workers = nodes x gpus_per_node "
        "(so --set nodes=4 scales a calibrated or preset cluster)",
    )
    nvlink: LinkModel | None = Field(
        None, description="each GPU's link to its node's NVLink switch (absent: host_link)"
    )
    racks_per_pod: int = Field(0, ge=0, description="fat_tree: leaves per pod (0: one pod)")
    oversubscription: float = Field(
        1.0, ge=1, allow_inf_nan=False, description="fat_tree: below / above each tier's uplink"
    )
    host: HostModel | None = Field(
        None,
        description="each host's endpoint: per_message cost, rate each way, ranks_per_host "
        "(absent: none, the links alone)",
    )
    nccl: NcclModel | None = Field(
        None,
        description="NCCL's protocols (LL, LL128, Simple) and channels (absent: off, the links "
        "alone)",
    )

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
            data = _deep_merge({"name": name, **preset_dict(name)}, data)
        return _workers_of_nodes(data)

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
        if self.topology in ("rail_optimised", "fat_tree"):
            if self.gpus_per_node < 1:
                raise ValueError(f"topology {self.topology} needs gpus_per_node >= 1")
            if self.workers % self.gpus_per_node:
                raise ValueError(
                    f"workers ({self.workers}) must be a multiple of "
                    f"gpus_per_node ({self.gpus_per_node})"
                )
        if self.topology == "fat_tree" and (
            self.hosts_per_rack < 1 or self.hosts_per_rack % self.gpus_per_node
        ):
            raise ValueError(
                "topology fat_tree needs hosts_per_rack (GPUs per leaf), a multiple of "
                "gpus_per_node"
            )
        if self.host is not None and self.workers % self.host.ranks_per_host:
            raise ValueError(
                f"host.ranks_per_host ({self.host.ranks_per_host}) must divide "
                f"workers ({self.workers})"
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


def _workers_of_nodes(data: Any) -> Any:
    """`nodes: N` on a fabric of multi-GPU nodes is N x gpus_per_node workers: it wins over the
    workers written (a preset's, a calibrated file's), as a --set of it means to."""
    if not isinstance(data, dict) or data.get("nodes") is None:
        return data
    nodes, per_node = data["nodes"], data.get("gpus_per_node", 0)
    if data.get("topology") not in ("rail_optimised", "fat_tree"):
        raise ValueError(
            "nodes is for the rail_optimised and fat_tree topologies, multi-GPU nodes (else: "
            "workers; transitsim calibrate node writes a node that scales by nodes)"
        )
    whole = isinstance(nodes, int) and not isinstance(nodes, bool)
    if whole and nodes >= 1 and isinstance(per_node, int) and per_node >= 1:
        return {**data, "workers": nodes * per_node}
    return data  # the fields' own checks say what is wrong


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` wins; nested mappings merge key by key (so one key of a preset can change)."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


class GridModel(StrictModel):
    """A base network and lists of values for some of its keys: every combination is a network."""

    network: NetworkModel = Field(description="the base network: a preset name or a mapping")
    sweep: dict[str, Annotated[list[Any], Field(min_length=1, max_length=MAX_GRID_POINTS)]] = Field(
        min_length=1,
        max_length=64,
        description='dotted key -> its values, e.g. host_link.rate: ["1 Gb/s", "10 Gb/s"] '
        "(placement.sum and placement.transform sweep where the work is done)",
    )
    _raw_network: Any = PrivateAttr(None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_raw_network(cls, data: Any, handler: Any) -> "GridModel":
        """Grid values are substituted into the network as written (units still text)."""
        grid = handler(data)
        grid._raw_network = copy.deepcopy(data.get("network")) if isinstance(data, dict) else None
        return grid
