"""Issue 44 item 3: the cluster presets against the real nccl-tests tables of the same hardware,
no calibration (benchmarks/bench_presets.py; docs/engine.md quotes its output).

The issue's targets: within 15 % at every size of at least 1 MiB (both tables), within 30 %
below 1 MiB (the 2 x DGX A100 table). Where they hold today they are held here at their
tolerance; the rows where they do not (docs/engine.md "Hardware presets" says which and why:
the real tables are slower there than NCCL's own cost model predicts) are held at the error
they have, so that neither gets worse unnoticed."""

import re
from pathlib import Path

import pytest
from bench_scripts import load_bench
from cli_run import run_cli

from transitsim.base.errors import TransitsimError
from transitsim.scenario import network_from_dict

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "nccl-tests"
MIB = 1 << 20
# preset -> [(first size, last size, |error| bound)]: the targets where met
HELD = {
    "dgx-a100x2": [(256 * MIB, 4 << 30, 0.15), (MIB, 128 * MIB, 0.25), (8, MIB - 1, 0.50)],
    "p5": [(MIB, 4 * MIB, 0.15), (8 * MIB, 32 * MIB, 0.20), (64 * MIB, 16 << 30, 0.15)],
}


def _bench():
    return load_bench("bench_presets")


@pytest.fixture(scope="module")
def bench():
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is not here")
    return _bench()


@pytest.mark.parametrize("preset", sorted(HELD))
def test_the_preset_predicts_the_real_table(bench, preset: str) -> None:
    comparison = next(c for c in bench.COMPARISONS if c.preset == preset)
    lines = bench.lines(comparison, SHARED)
    assert len(lines) >= 20
    for first, last, bound in HELD[preset]:
        rows = [x for x in lines if first <= x.size <= last]
        assert rows, (preset, first, last)
        for x in rows:
            assert abs(x.error) <= bound, (preset, x.size, x.error)


def test_the_doc_quotes_what_the_bench_prints(bench) -> None:
    doc = (ROOT / "docs" / "engine.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- bench_presets -->\n(.*?)\n<!-- /bench_presets -->", doc, re.S)
    assert block, "docs/engine.md: no bench_presets block"
    assert block.group(1).strip() == "\n".join(bench.table_lines(SHARED)).strip()


def test_nodes_scales_a_cluster_as_workers_does():
    """`nodes: N` (`--set nodes=4`) on a fabric of multi-GPU nodes is N x gpus_per_node workers,
    the same network as `workers` gives; elsewhere it is refused in one line."""
    by_nodes = network_from_dict({"preset": "dgx-a100x2", "nodes": 4, "name": "x"})
    by_workers = network_from_dict({"preset": "dgx-a100x2", "workers": 32, "name": "x"})
    assert by_nodes == by_workers and by_nodes.workers == 32
    with pytest.raises(TransitsimError, match="nodes is for the rail_optimised"):
        network_from_dict({"preset": "8x200g-switch", "nodes": 4})
    code, stdout, stderr = run_cli(
        ["collective", "-n", "dgx-a100x2", "--set", "nodes=4", "--algo", "ring-allreduce",
         "--bytes", "1 MiB"]
    )  # fmt: skip
    assert code == 0 and "32 workers" in stdout, stderr
