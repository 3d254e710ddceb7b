"""Hostile networks (issue 27): one worker, fabrics at the worker maximum, keys a topology ignores,
and the API given what the CLI refuses (10**7 workers, nesting, /dev/zero, 10**5 targets).

Each is one line and exit 2 quickly (TransitsimError from the API), or a correct result.
"""

import dataclasses
import json
import time
from pathlib import Path

import pytest
from test_hostile_inputs import one_line_exit_2
from test_run_cli import run_cli, write_test_trace

import transitsim
from transitsim.base.errors import TransitsimError
from transitsim.network.limits import MAX_WORKERS
from transitsim.scenario import network_preset

FABRIC = {
    "name": "fabric",
    "topology": "fat_tree",
    "workers": 4096,
    "gpus_per_node": 8,
    "hosts_per_rack": 32,
    "racks_per_pod": 4,
    "host_link": {"rate": "400 Gb/s", "length": "10 m"},
    "nvlink": {"rate": "450 GB/s"},
}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile-networks")
    write_test_trace(folder / "traces", "A", 0)
    write_test_trace(folder / "traces", "C", 0)
    return folder


def scenario(work: Path, name: str, network: dict, targets: str = "[3.5]") -> str:
    path = work / name
    path.write_text(
        f"traces: [traces/]\nnetworks: [{json.dumps(network)}]\ntargets: {targets}\n",
        encoding="utf-8",
    )
    return str(path)


def test_one_worker_is_a_run_without_exchange(work: Path, capsys) -> None:
    """workers: 1 passed validate, then every job failed (KeyError on the link columns)."""
    trace = str(work / "traces" / "tiny-adamw-s0.parquet")
    argv = ["replay", trace, "--network", "8x200g-switch", "--set", "workers=1", "--json"]
    for extra in ([], ["--overlap", "buckets"]):
        code, stdout, stderr = run_cli([*argv, "--targets", "3.0", *extra], capsys)
        assert code == 0, stderr
        (row,) = json.loads(stdout)
        assert row["bytes_to_target"] == 0 and row["time_to_target_s"] > 0
    path = scenario(work, "one.yaml", {"preset": "8x200g-switch", "workers": 1})
    code, _, stderr = run_cli(["run", path, "--serial", "-q", "-o", str(work / "one")], capsys)
    assert code == 0, stderr
    assert (work / "one" / "summary.csv").exists()


def test_a_fabric_too_large_to_time_is_refused_up_front(work: Path, capsys) -> None:
    """fat_tree at the worker maximum timed out (44 s for each exchange at 4,096 GPUs)."""
    path = scenario(work, "ft.yaml", FABRIC)
    one_line_exit_2(["validate", path], capsys, "4,186,112 ring transfers", seconds=20)
    trace = str(work / "traces" / "tiny-adamw-s0.parquet")
    net = work / "ft-net.yaml"
    net.write_text(json.dumps(FABRIC), encoding="utf-8")
    argv = ["replay", trace, "--network", str(net), "--targets", "3.5"]
    one_line_exit_2(argv, capsys, "at most 262,144", seconds=20)
    flat = {**FABRIC, "gpus_per_node": 1, "hosts_per_rack": 32}  # a flat ring: seconds
    flat.pop("nvlink")
    code, _, stderr = run_cli(["validate", scenario(work, "flat.yaml", flat)], capsys)
    assert code == 0, stderr
    ok = scenario(work, "ok.yaml", FABRIC | {"workers": 1024})
    code, _, stderr = run_cli(["validate", ok], capsys)
    assert code == 0, stderr


IGNORED = [
    ("fat_tree", {"spine_link": {"rate": "1 Gb/s"}}, "spine_link has no effect"),
    ("fat_tree", {"datacentres": 2}, "datacentres has no effect"),
    ("rail_optimised", {"oversubscription": 4}, "oversubscription has no effect"),
    ("rail_optimised", {"wan_link": {"rate": "1 Gb/s"}}, "wan_link has no effect"),
    ("switch", {"oversubscription": 4}, "oversubscription has no effect"),
]


@pytest.mark.parametrize(("topology", "keys", "message"), IGNORED)
def test_keys_a_topology_ignores_are_refused(
    work: Path, capsys, topology: str, keys: dict, message: str
) -> None:
    """They were accepted silently: a spine_link on a fat_tree changed nothing."""
    network = {**FABRIC, "workers": 512, "topology": topology, **keys}
    if topology == "rail_optimised":
        del network["racks_per_pod"]  # a fat_tree key: refused on a rail fabric too
    if topology == "switch":
        network = {"preset": "8x200g-switch", **keys}
    one_line_exit_2(["validate", scenario(work, "ignored.yaml", network)], capsys, message)
    with pytest.raises(TransitsimError, match=message):
        transitsim.simulate(work / "traces" / "tiny-adamw-s0.parquet", network, targets=[3.5])
    spec = network_preset("8x200g-switch")
    field = next(iter(keys))
    if field in ("datacentres", "oversubscription"):  # a plain value on a built NetworkSpec too
        built = dataclasses.replace(spec, **{field: keys[field]})
        built = dataclasses.replace(built, topology=topology, gpus_per_node=8, hosts_per_rack=8)
        with pytest.raises(TransitsimError, match=message):
            transitsim.simulate(work / "traces" / "tiny-adamw-s0.parquet", built, targets=[3.5])


def nested(depth: int) -> dict:
    value: object = "x"
    for _ in range(depth):
        value = {"a": value}
    return value  # type: ignore[return-value]


def test_the_api_has_the_clis_bounds(work: Path) -> None:
    """Each was a MemoryError, a RecursionError, a hang or minutes of work from simulate()."""
    trace = work / "traces" / "tiny-adamw-s0.parquet"
    switch = network_preset("8x200g-switch")
    cases = [
        (
            dataclasses.replace(switch, workers=10**7),
            [3.5],
            f"workers must be at most {MAX_WORKERS:,}",
        ),
        (
            dataclasses.replace(switch, topology="rail_optimised", workers=10**6, gpus_per_node=8),
            [3.5],
            f"at most {MAX_WORKERS:,}",
        ),
        ({**FABRIC, "topology": "rail_optimised", "workers": 10**6}, [3.5], str(MAX_WORKERS)),
        (
            {
                "preset": "2dc-wan",
                "wan_link": {"rate": "1 Gb/s", "background": {"csv": "/dev/zero"}},
            },
            [3.5],
            "not a regular file",
        ),
        ({"preset": "8x200g-switch", "description": nested(5000)}, [3.5], "nested more than"),
        ({"preset": "8x200g-switch", "link_overrides": nested(3000)}, [3.5], "nested more than"),
        (switch, [3.0 + i * 1e-6 for i in range(100_000)], "100,000 loss targets"),
    ]
    for network, targets, message in cases:
        start = time.monotonic()
        with pytest.raises(TransitsimError, match=message):
            transitsim.simulate(trace, network, targets=targets)
        assert time.monotonic() - start < 10, message


def test_the_cli_bounds_the_targets_too(work: Path, capsys) -> None:
    """1,000 targets took a minute on one 8-row trace."""
    many = ",".join(f"{3.0 + i * 1e-4:.4f}" for i in range(65))
    trace = str(work / "traces" / "tiny-adamw-s0.parquet")
    argv = ["replay", trace, "--network", "8x200g-switch", "--targets", many]
    one_line_exit_2(argv, capsys, "65 loss targets is too many (at most 64)")
    path = scenario(work, "targets.yaml", {"preset": "8x200g-switch"}, f"[{many}]")
    one_line_exit_2(["validate", path], capsys, "targets", "64")
