"""The layout's rules (issue 21): the import contracts hold, no import cycle, small modules.

`lint-imports` (pyproject.toml's contracts) also runs in .ci/run; this checks the same contracts
from the suite, and what the contracts cannot say: a cycle through a package's own __init__,
how many modules sit at transitsim's top, and how long a module may grow.
"""

import ast
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


def private_imports(source: str, package_names: tuple[str, ...] = PACKAGES) -> list[str]:
    """Every `_private` name one module takes from another of ours: `from a.b import _x`, and
    `b._x` where `b` is a module of ours imported by name."""
    tree = ast.parse(source)
    found = []
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            ours = node.level > 0 or node.module.split(".")[0] in package_names
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if ours and private:
                    found.append(f"{node.module}.{alias.name}")
                elif ours:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in package_names:
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    """Where two modules share a helper it is public in the module that owns it."""
    taken = {
        str(path.relative_to(ROOT)): names
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if (names := private_imports(path.read_text()))
    }
    assert taken == {}


def test_the_private_import_check_finds_one() -> None:
    """Not vacuous: a private name taken by `from` or through a module alias is found, a public
    one, a dunder and another package's private name are not."""
    source = (
        "from transitsim.replay.step import _hidden, shown, __version__\n"
        "from numpy import _core\n"
        "from transitsim.replay import steps\n"
        "steps._inner(1)\n"
        "steps.__name__\n"
    )
    assert private_imports(source) == ["transitsim.replay.step._hidden", "steps._inner"]


def test_sweep_imports_nothing_from_the_network() -> None:
    """Replay owns every replay decision: the sweep only schedules jobs."""
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)
    direct = graph.find_modules_directly_imported_by("transitsim.sweep")
    assert sorted(m for m in direct if m.startswith("transitsim.network")) == []


def str_failures(source: str) -> list[str]:
    """Where a function signals "not exact" with a bare string: it tests `isinstance(x, str)`,
    or its return annotation is a union with `str` among other types."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
            and "str" in {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
        ):
            found.append(f"isinstance at line {node.lineno}")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            returns = node.returns
            if isinstance(returns, ast.Constant) and isinstance(returns.value, str):
                returns = ast.parse(returns.value, mode="eval").body  # a quoted annotation
            members = [n for n in ast.walk(returns) if isinstance(n, ast.Name)]
            union = isinstance(returns, ast.BinOp) and isinstance(returns.op, ast.BitOr)
            kinds = {n.id for n in members} - {"None"}
            if union and "str" in kinds and len(kinds) > 1:
                found.append(f"{node.name} returns {ast.unparse(returns)}")
    return found


def test_no_network_function_signals_failure_with_a_string() -> None:
    """A fast path that cannot be exact returns NotExact(reason), never a bare str."""
    found = {
        str(path.relative_to(ROOT)): names
        for path in sorted((ROOT / "transitsim" / "network").rglob("*.py"))
        if (names := str_failures(path.read_text()))
    }
    assert found == {}


def test_the_string_failure_check_finds_one() -> None:
    source = (
        "def timed(x) -> 'Timing | str':\n    return 'no'\n"
        "def named(x) -> str | None:\n    return None\n"
        "if isinstance(y, str): pass\n"
        "if isinstance(y, (int, str)): pass\n"
    )
    assert str_failures(source) == [
        "timed returns Timing | str",
        "isinstance at line 5",
        "isinstance at line 6",
    ]


# Values of RunConfig.variant, .band and .feedback that a step might be tempted to branch on.
VARIANT_WORDS = {
    "adamw", "topk", "band", "calib", "optics", "optics_switch", "moving", "diloco",
    "streaming_diloco", "sparseloco", "recal", "rotating", "subspace", "sent", "loopback",
}  # fmt: skip
# The variants' step code: the one interface and its three implementations, and what they call.
STEP_MODULES = ("gradient_exchange", "dense", "demo", "local_sgd", "moving", "optics")
# Where a variant is decided, once per run: construction, config checks, resume's own checks.
DECIDED_ONCE = {"__init__", "of", "validate_config", "state_dict", "load_state_dict"}


def variant_branches(source: str) -> list[str]:
    """Comparisons with a variant word, and reads of `.variant`, inside any function that runs
    during a step (all but those that decide the variant once)."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef) or fn.name in DECIDED_ONCE:
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare):
                words = {
                    c.value
                    for side in (node.left, *node.comparators)
                    for c in ast.walk(side)
                    if isinstance(c, ast.Constant) and c.value in VARIANT_WORDS
                }
                found += [f"{fn.name} compares {word!r}" for word in sorted(words)]
            if isinstance(node, ast.Attribute) and node.attr == "variant":
                found.append(f"{fn.name} reads .variant")
    return found


def test_the_variants_compare_no_variant_strings_inside_a_step() -> None:
    """Variant kinds are types chosen at construction (trainer/variants/demo_kind.py)."""
    found = {
        name: names
        for name in STEP_MODULES
        if (names := variant_branches((ROOT / "trainer/variants" / f"{name}.py").read_text()))
    }
    assert found == {}


def test_the_variant_branch_check_finds_one() -> None:
    source = (
        "class DeMo:\n"
        "    def __init__(self, cfg):\n        self.topk = cfg.variant == 'topk'\n"
        "    def step(self, cfg):\n"
        "        if cfg.variant in ('moving', 'calib'): pass\n"
        "        return self.kind == 'A'\n"
    )
    assert variant_branches(source) == [
        "step compares 'calib'",
        "step compares 'moving'",
        "step reads .variant",
    ]


def test_no_command_imports_another() -> None:
    """Commands only wire: what two commands share lives in the package that owns it."""
    graph = grimp.build_graph("transitsim", include_external_packages=False, cache_dir=None)
    commands = {m for m in graph.modules if m.startswith("transitsim.commands.")}
    taken = {
        command: sorted(graph.find_modules_directly_imported_by(command) & commands)
        for command in sorted(commands)
    }
    assert {name: found for name, found in taken.items() if found} == {}
