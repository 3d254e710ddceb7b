"""The layout's rules (issue 21): the import contracts hold, no import cycle, small modules.

`lint-imports` (pyproject.toml's contracts) also runs in .ci/run; this checks the same contracts
from the suite, and what the contracts cannot say: a cycle through a package's own __init__,
how many modules sit at transitsim's top, and how long a module may grow.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("transitsim", "trainer")
MAX_TOP_LEVEL_MODULES = 12
MAX_MODULE_LINES = 600


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every cycle of direct imports between modules (TYPE_CHECKING imports included)."""
    edges = nx.DiGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            edges.add_edge(module, imported)
    return [sorted(cycle) for cycle in nx.simple_cycles(edges)]


def test_the_import_contracts_hold() -> None:
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    done = subprocess.run(
        [lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_no_module_is_in_an_import_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)
    assert import_cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    """The check above is not vacuous: a two-module cycle and a longer one are both found."""
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a")
    assert import_cycles(graph) == [["pkg.a", "pkg.b"]]
    graph.remove_import(importer="pkg.b", imported="pkg.a")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg")  # through the package's own __init__
    graph.add_import(importer="pkg", imported="pkg.a")
    assert import_cycles(graph) == [["pkg", "pkg.a", "pkg.b", "pkg.c"]]


def test_transitsim_has_few_top_level_modules() -> None:
    modules = sorted(p.name for p in (ROOT / "transitsim").glob("*.py"))
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, modules


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_over_the_size_limit(package: str) -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / package).rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}
