"""Scenarios: a complete file resolves to traces and NetworkSpecs; every mistake is one line that
names the file, the line and the key; fuzzed input never raises anything but TransitsimError."""

import copy
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import transitsim.scenario as sc
from transitsim.base.errors import TransitsimError
from transitsim.commands import validate_cmd
from transitsim.network import Exchange, LinkFault, simulate_exchange
from transitsim.network.spec import NetworkSpec
from transitsim.replay.compute import ComputeModel, Stragglers
from transitsim.scenario.presets import preset_names
from transitsim.traces.format import write_trace

REPO = Path(__file__).resolve().parents[1]

EXAMPLE = """\
name: wan-quickstart
description: Does a fixed band pay off across a WAN?
traces:
  - traces/A-adamw-*.parquet          # a glob: both seeds
  - path: traces/C-256-s0.parquet
    label: fixed band 256
networks:
  - 8x200g-switch                     # a preset, by name
  - preset: 2dc-wan                   # a preset with one key changed
    name: wan-400
    wan_link: {rate: "400 Gb/s"}
  - name: lab
    topology: switch
    workers: 8
    host_link: {rate: "100 Gb/s", latency: "1 us", length: "2 m"}
    pluggable:
      host_lane_rate: "800 Gb/s"
      line_rate: "100 Gb/s"
      transform: {size: 256, planes: 8, rate: "2 GHz", keep: 0.0625}
    switch: {forwarding_latency: "300 ns", aggregator: true, agg_slot_size: "4 KiB"}
    placement: {transform: pluggable, sum: receivers}
grid:
  network: {preset: 2dc-wan}
  sweep:
    wan_link.rate: ["100 Gb/s", "1 Tb/s"]
    wan_link.length: ["10 km", "3000 km"]
    workers: [8, 16]
compute: {model: flops, gpu_peak: "989 TFLOP/s", mfu: 0.4}
stragglers: {distribution: lognormal, mode: additive, scale: "2 ms", sigma: 0.5, seed: 7}
faults:
  - {link: "dc0<->dc1", down_at: "30 s", up_at: "45 s"}
targets: [3.5, "final:A-adamw"]
baseline: A
outputs: {dir: results/wan, files: [timeline, summary, report], table_format: csv}
"""


def write_test_trace(folder: Path, name: str, variant: str, seed: int) -> Path:
    n = 6
    steps = pd.DataFrame(
        {
            "step": np.arange(1, n + 1, dtype="int64"),
            "train_loss": np.linspace(5.0, 3.0, n),
            "val_loss": [np.nan] * (n - 1) + [3.0 + 0.01 * seed],
            "lr": [1e-3] * n,
            "payload_bytes": np.full(n, 1000, dtype="int64"),
            "collective": ["all_gather"] * n,
            "reducible": [False] * n,
            "compute_s": [0.1] * n,
            "compress_s": [0.01] * n,
        }
    )
    meta = {
        "name": f"{name}-s{seed}",
        "variant": variant,
        "seed": seed,
        "workers": 8,
        "batch": 4,
        "context": 16,
        "n_params": 1000,
        "dense_bytes_per_step": 2000,
        "rows": "every_step",
        "origin": "trainer",
        "status": "complete",
    }
    return write_trace(folder / f"{name}-s{seed}.parquet", steps, meta)


def make_traces(folder: Path) -> None:
    write_test_trace(folder / "traces", "A-adamw", "A", 0)
    write_test_trace(folder / "traces", "A-adamw", "A", 1)
    write_test_trace(folder / "traces", "C-256", "C", 0)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("scenario")
    make_traces(folder)
    return folder


def write_yaml(folder: Path, text: str, name: str = "s.yaml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_complete_example_resolves(workdir: Path) -> None:
    scenario = sc.load_scenario(write_yaml(workdir, EXAMPLE))
    assert scenario.name == "wan-quickstart"
    assert [t.name for t in scenario.trace_files] == ["A-adamw-s0", "A-adamw-s1", "C-256-s0"]
    assert scenario.label_of("C-256") == "fixed band 256"
    assert scenario.label_of("A-adamw") == "A-adamw"
    assert scenario.output_dir == workdir / "results/wan"

    points = sc.scenario_to_networks(scenario)
    assert len(points) == 3 + 2 * 2 * 2
    assert all(isinstance(spec, NetworkSpec) and spec.name == name for name, spec, _ in points)
    by_name = {name: (spec, params) for name, spec, params in points}
    wan = by_name["wan-400"][0]
    assert wan.wan_link.rate_bps == 400e9
    assert wan.wan_link.length_m == 1e6  # kept from the preset while rate changed
    lab = by_name["lab"][0]
    assert lab.host_link.latency_s == 1e-6 and lab.host_link.length_m == 2.0
    assert lab.pluggable.transform.passes_per_s == 2e9
    assert lab.switch.agg_slot_bytes == 4096 and lab.switch.agg_rate_bps == math.inf
    assert sc.network_placement(scenario, "lab") == sc.Placement("pluggable", "receivers")
    assert sc.network_placement(scenario, "8x200g-switch") == sc.Placement(None, "receivers")

    grid = [(spec, params) for name, (spec, params) in by_name.items() if params]
    assert len(grid) == 8
    spec, params = grid[-1]
    assert params == {"wan_link.rate": 1e12, "wan_link.length": 3e6, "workers": 16}
    assert spec.wan_link.rate_bps == 1e12 and spec.workers == 16
    assert {p["workers"] for _, p in grid} == {8, 16}

    compute = scenario.compute.to_compute_model()
    assert isinstance(compute, ComputeModel) and compute.kind == "flops"
    assert compute.peak_flops == pytest.approx(989e12) and compute.mfu == 0.4
    stragglers = scenario.stragglers.to_stragglers()
    assert isinstance(stragglers, Stragglers)
    assert stragglers.scale == pytest.approx(2e-3) and stragglers.mode == "additive"
    assert scenario.stragglers.seed == 7
    assert scenario.faults[0].to_link_fault() == LinkFault("dc0<->dc1", 30.0, 45.0)
    assert scenario.targets == [3.5, "final:A-adamw"]


def test_loading_is_deterministic(workdir: Path) -> None:
    path = write_yaml(workdir, EXAMPLE)
    first = sc.scenario_to_networks(sc.load_scenario(path))
    second = sc.scenario_to_networks(sc.load_scenario(path))
    assert first == second


def test_defaults_and_shorthands(workdir: Path) -> None:
    text = "traces: [traces/C-256-s0.parquet]\nnetworks: [2dc-wan]\ntargets: [3.2]\n"
    scenario = sc.load_scenario(write_yaml(workdir, text, "minimal.yaml"))
    assert scenario.name == "minimal"
    assert scenario.compute.to_compute_model() == ComputeModel(kind="trace")
    assert not scenario.stragglers.to_stragglers().random
    assert scenario.output_dir is None
    ((name, spec, params),) = sc.scenario_to_networks(scenario)
    assert name == "2dc-wan" and params == {} and spec.datacentres == 2


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_is_a_valid_network(name: str) -> None:
    spec = sc.network_preset(name)
    assert spec.name == name and spec.workers >= 1 and spec.host_link.rate_bps > 0


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_simulates(name: str) -> None:
    spec = sc.network_preset(name)
    result = simulate_exchange(spec, Exchange(algo="ring_allreduce", payload_bytes=1_000_000))
    assert 0 < result.time_s < 1.0


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(TransitsimError, match="8x200g-switch"):
        sc.network_preset("nope")


def test_network_from_dict_reports_the_key() -> None:
    with pytest.raises(TransitsimError, match=r"host_link\.rate: expected a rate"):
        sc.network_from_dict({"topology": "switch", "workers": 2, "host_link": {"rate": 5}})


BASE = """\
traces: [traces/A-adamw-s0.parquet]
networks:
  - name: lan
    topology: switch
    workers: 8
    host_link: {rate: "200 Gb/s"}
targets: [3.5]
"""

# (change to BASE, line, key path, fragment of the message)
ERRORS = [
    (
        ('"200 Gb/s"', '"fast"'),
        6,
        "networks[0].host_link.rate",
        'expected a rate like "200 Gb/s", got "fast"',
    ),
    (('"200 Gb/s"', "200"), 6, "networks[0].host_link.rate", "the unit is required"),
    (('"200 Gb/s"', '"-1 Gb/s"'), 6, "networks[0].host_link.rate", "must be positive"),
    (
        ('rate: "200 Gb/s"', 'rat: "200 Gb/s"'),
        6,
        "networks[0].host_link.rat",
        "unknown key (allowed: background, efficiency, latency, length, overhead, rate)",
    ),
    (("    workers: 8\n", ""), 3, "networks[0].workers", "missing required key"),
    (("workers: 8", "workers: '8'"), 5, "networks[0].workers", "valid integer"),
    (("workers: 8", "workers: 0"), 5, "networks[0].workers", "greater than or equal to 1"),
    (("topology: switch", "topology: ring"), 4, "networks[0].topology", 'got "ring"'),
    (("topology: switch", "topology: leaf_spine"), 3, "networks[0]", "hosts_per_rack"),
    (("A-adamw-s0", "missing"), 1, "traces[0].path", "trace file not found"),
    (("A-adamw-s0", "zz*"), 1, "traces[0].path", "no trace file matches"),
    (("[3.5]", "[3.5, -2]"), 7, "targets[1]", "expected a loss"),
    (("[3.5]", "[final:nope]"), 7, "targets[0]", "unknown configuration 'nope'"),
    (("[3.5]", "[]"), 7, "targets", "at least 1"),
    (
        ("  - name: lan\n", "  - preset: 9dc\n    name: lan\n"),
        3,
        "networks[0]",
        'preset "9dc" is unknown',
    ),
]
APPENDED = [
    ("bogus: 1\n", 8, "bogus", "unknown key (allowed: baseline, bucket_size, compute"),
    ("targets: [1]\n", 8, "targets", "duplicate key"),
    ("baseline: E\n", 8, "baseline", "unknown configuration 'E'"),
    ("compute: {model: flops, gpu_peak: '1 TFLOP/s'}\n", 8, "compute.mfu", "missing required key"),
    ("compute: {model: warp}\n", 8, "compute", 'unknown model "warp"'),
    (
        "compute: {model: scaled, factor: 2, mfu: 1}\n",
        8,
        "compute.mfu",
        "unknown key (allowed: factor, model)",
    ),
    (
        "compute: {model: flops, gpu_peak: '1 TB/s', mfu: 0.5}\n",
        8,
        "compute.gpu_peak",
        'unknown unit "TB/s"',
    ),
    ("stragglers: {mode: additive, scale: 3}\n", 8, "stragglers", "scale (mode additive)"),
    (
        "stragglers: {worker_factors: [1, 2]}\n",
        8,
        "stragglers.worker_factors",
        "2 factors for network lan of 8",
    ),
    (
        "faults: [{link: x, down_at: '5 s', up_at: '1 s'}]\n",
        8,
        "faults[0]",
        "up_at must come after",
    ),
    ("placement: {transform: pluggable}\n", 3, "networks[0].pluggable", "no pluggable.transform"),
    ("placement: {sum: switch}\n", 3, "networks[0].switch", "aggregator is off"),
    ("outputs: {files: [pdf]}\n", 8, "outputs.files[0]", 'got "pdf"'),
    ("scale: {params: 0}\n", 8, "scale.params", "positive whole number of parameters"),
    ("scale: {params: -1e9}\n", 8, "scale.params", "positive whole number of parameters"),
    ("scale: {params: 1.5}\n", 8, "scale.params", "got 1.5"),
    ("scale: {params: lots}\n", 8, "scale.params", 'got "lots"'),
    ("scale: {params: true}\n", 8, "scale.params", "got True"),
    ("scale: {params: 1e16}\n", 8, "scale.params", "less than or equal to"),
    ("scale: {}\n", 8, "scale.params", "missing required key"),
    ("scale: {params: 1e9, tokens: 5}\n", 8, "scale.tokens", "unknown key (allowed: params)"),
    ("on: 1\n", 8, "", 'key "on" must be text'),
    (
        "grid:\n  network: 2dc-wan\n  sweep:\n    wan_link.rate: ['1 Gb/s', slow]\n",
        11,
        'grid.sweep["wan_link.rate"][1]',
        'got "slow"',
    ),
    (
        "grid:\n  network: 2dc-wan\n  sweep:\n    wan_link.sped: ['1 Gb/s']\n",
        11,
        'grid.sweep["wan_link.sped"]',
        'unknown key "sped" in wan_link',
    ),
    (
        "grid:\n  network: 2dc-wan\n  sweep:\n    workers: [3]\n",
        11,
        "grid.sweep.workers[0]",
        "multiple of datacentres",
    ),
    (
        "grid:\n  network: 2dc-wan\n  sweep:\n    workers: []\n",
        11,
        "grid.sweep.workers",
        "at least 1",
    ),
]


def _expect(path: Path, line: int, key: str, fragment: str) -> None:
    with pytest.raises(TransitsimError) as info:
        sc.load_scenario(path)
    message = str(info.value)
    assert "\n" not in message
    prefix = f"{path}:{line}: {key}: " if key else f"{path}:{line}: "
    assert message.startswith(prefix), message
    assert fragment in message, message


@pytest.mark.parametrize(("change", "line", "key", "fragment"), ERRORS)
def test_errors_name_file_line_and_key(workdir: Path, change, line, key, fragment) -> None:
    old, new = change
    assert old in BASE
    _expect(write_yaml(workdir, BASE.replace(old, new, 1), "bad.yaml"), line, key, fragment)


@pytest.mark.parametrize(("extra", "line", "key", "fragment"), APPENDED)
def test_appended_errors_name_file_line_and_key(workdir: Path, extra, line, key, fragment) -> None:
    _expect(write_yaml(workdir, BASE + extra, "bad.yaml"), line, key, fragment)


@pytest.mark.parametrize(
    ("written", "params"),
    [("1e9", 10**9), ("7.0e9", 7 * 10**9), ("1_000_000_000", 10**9), ('"2,500,000"', 2_500_000)],
)
def test_scale_params_is_a_positive_whole_number(workdir: Path, written: str, params: int) -> None:
    scenario = sc.load_scenario(write_yaml(workdir, BASE + f"scale: {{params: {written}}}\n"))
    assert scenario.scale_params == params and isinstance(scenario.scale_params, int)


def test_no_scale_means_each_traces_own_size(workdir: Path) -> None:
    assert sc.load_scenario(write_yaml(workdir, BASE)).scale_params is None


def test_duplicate_network_names(workdir: Path) -> None:
    text = BASE.replace("networks:\n", "networks:\n  - {preset: 8x200g-switch, name: lan}\n")
    _expect(
        write_yaml(workdir, text, "dup.yaml"), 4, "networks[1].name", 'name "lan" is used twice'
    )


def test_yaml_problems_are_one_line(workdir: Path) -> None:
    _expect(write_yaml(workdir, BASE + "  : [\n", "y.yaml"), 8, "", "invalid YAML")
    _expect(write_yaml(workdir, "- 1\n", "y.yaml"), 1, "", "a scenario is a mapping")
    _expect(write_yaml(workdir, "", "y.yaml"), 1, "", "a scenario is a mapping")
    with pytest.raises(TransitsimError, match="no such scenario file"):
        sc.load_scenario(workdir / "absent.yaml")
    (workdir / "binary.yaml").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(TransitsimError, match="not a UTF-8"):
        sc.load_scenario(workdir / "binary.yaml")


def test_label_naming_two_configs_is_an_error(workdir: Path) -> None:
    text = BASE.replace(
        "traces: [traces/A-adamw-s0.parquet]", "traces: [{path: 'traces/*', label: all}]"
    )
    _expect(write_yaml(workdir, text, "l.yaml"), 1, "traces[0].label", "would name several configs")


def test_a_label_can_be_the_baseline(workdir: Path) -> None:
    text = BASE.replace(
        "traces: [traces/A-adamw-s0.parquet]",
        "traces: [{path: traces/C-256-s0.parquet, label: band}]",
    )
    scenario = sc.load_scenario(write_yaml(workdir, text + "baseline: band\n", "b.yaml"))
    assert scenario.baseline == "band"


def test_shipped_schema_is_the_generated_one() -> None:
    shipped = json.loads((REPO / "scenarios" / "scenario.schema.json").read_text())
    assert shipped == json.loads(json.dumps(sc.scenario_json_schema()))
    assert shipped["additionalProperties"] is False
    assert set(shipped["properties"]) == set(sc.Scenario.model_fields)
    rate = shipped["$defs"]["LinkModel"]["properties"]["rate"]
    assert rate["type"] == "string" and rate["examples"] == ["200 Gb/s"]
    network_items = shipped["properties"]["networks"]["items"]["anyOf"]
    assert set(network_items[0]["enum"]) == set(preset_names())


def test_validate_command(workdir: Path, tmp_path: Path) -> None:
    app = typer.Typer()
    validate_cmd.register(app)
    runner = CliRunner()
    good = write_yaml(workdir, EXAMPLE, "good.yaml")
    bad = write_yaml(workdir, BASE.replace('"200 Gb/s"', '"fast"'), "bad.yaml")
    result = runner.invoke(app, ["validate", str(good)], standalone_mode=False)
    assert result.return_value == 0 and "11 networks" in result.output
    result = runner.invoke(app, ["validate", "--json", str(good)], standalone_mode=False)
    assert json.loads(result.stdout)[0]["configs"] == ["A-adamw", "C-256"]
    result = runner.invoke(app, ["validate", str(good), str(bad)], standalone_mode=False)
    assert result.return_value == 2
    assert "bad.yaml:6: networks[0].host_link.rate" in result.output
    out = tmp_path / "schema.json"
    result = runner.invoke(app, ["scenario-schema", "-o", str(out)], standalone_mode=False)
    assert result.return_value == 0 and json.loads(out.read_text()) == sc.scenario_json_schema()


# ---------------------------------------------------------------------------------------------
# Fuzz: random keys, types, units and missing files never escape as anything but one line.

UNIT_WORDS = ["Gb/s", "GB/s", "ms", "us", "km", "m", "GHz", "KiB", "TFLOP/s", "furlong", ""]
VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**6), 10**6),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=12),
        st.builds(
            lambda n, u: f"{n} {u}".strip(),
            st.floats(-1e3, 1e30, allow_nan=False),
            st.sampled_from(UNIT_WORDS),
        ),
        st.sampled_from(
            ["traces/none.parquet", "traces/*.parquet", "final:A", "2dc-wan", "switch"]
        ),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


def _mutate(data, path, action, value):
    data = copy.deepcopy(data)
    if not path:
        return value if action == "set" else data
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "delete":
        del parent[last]
    elif action == "add" and isinstance(parent[last], dict):
        parent[last]["zz_" + str(value)[:8]] = value
    else:
        parent[last] = value
    return data


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_fuzz_only_transitsim_errors(workdir: Path, data) -> None:
    base = yaml.safe_load(EXAMPLE)
    mutated = base
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(mutated))))
        action = data.draw(st.sampled_from(["set", "delete", "add"]))
        mutated = _mutate(mutated, path, action, data.draw(VALUES))
    path = write_yaml(workdir, yaml.safe_dump(mutated, allow_unicode=True), "fuzz.yaml")
    try:
        scenario = sc.load_scenario(path)
    except TransitsimError as exc:
        message = str(exc)
        assert "\n" not in message
        assert re.match(rf"{re.escape(str(path))}:\d+: ", message), message
    else:
        for _, spec, _ in sc.scenario_to_networks(scenario):
            assert spec.host_link.rate_bps > 0 and spec.workers >= 1


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=80))
def test_fuzz_raw_text(workdir: Path, text: str) -> None:
    path = write_yaml(workdir, text, "raw.yaml")
    try:
        sc.load_scenario(path)
    except TransitsimError as exc:
        assert "\n" not in str(exc)


def test_the_verdict_tie_margin_is_a_scenario_key(workdir: Path) -> None:
    """verdict: {tie_margin: 0.05} reaches the run; the default is 1 %; a margin that is not a
    share in [0, 1) is one line naming the key."""
    assert sc.load_scenario(write_yaml(workdir, BASE, "v0.yaml")).verdict.tie_margin == 0.01
    text = BASE + "verdict: {tie_margin: 0.05}\n"
    assert sc.load_scenario(write_yaml(workdir, text, "v1.yaml")).verdict.tie_margin == 0.05
    for bad in ("1.5", "-0.1", '"1 %"', ".nan"):
        path = write_yaml(workdir, BASE + f"verdict: {{tie_margin: {bad}}}\n", "v2.yaml")
        with pytest.raises(TransitsimError) as info:
            sc.load_scenario(path)
        assert "\n" not in str(info.value) and "verdict.tie_margin" in str(info.value)
    path = write_yaml(workdir, BASE + "verdict: {margin: 0.05}\n", "v3.yaml")
    with pytest.raises(TransitsimError, match="verdict.margin"):
        sc.load_scenario(path)
