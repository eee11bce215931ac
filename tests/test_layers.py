"""Issue 24: the layers import downwards only, and no module imports itself through others (docs/ARCHITECTURE.md#rules).

Every import of ``ipintel`` counts, including those under ``TYPE_CHECKING`` and inside functions: an import
hidden in a function is still a dependency, and a cycle hidden there is still a cycle.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from types import MappingProxyType

import ipintel

PACKAGE = Path(ipintel.__file__).resolve().parent

# Lowest first. A module may import from its own layer and those below it. The first matching prefix decides.
LAYERS: list[tuple[str, ...]] = [
    ("ipintel", "ipintel.errors", "ipintel.encoding", "ipintel.addresses"),
    ("ipintel.infra", "ipintel.geodata"),
    ("ipintel.settings", "ipintel.logs", "ipintel.schema_files", "ipintel.schema_check", "ipintel.metrics"),
    ("ipintel.capabilities",),
    ("ipintel.service",),
    ("ipintel.web",),
    ("ipintel.api",),
    ("ipintel.app",),
    ("ipintel.supervisor", "ipintel.__main__"),
]


def module_name(path: Path) -> str:
    parts = ["ipintel", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    best = (-1, -1)  # (length of the matching prefix, layer)
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), index)
    assert best[1] >= 0, f"{module} is in no layer: add it to LAYERS"
    return best[1]


def imports_of(module: str) -> set[str]:
    """The ipintel modules ``module`` imports (a package's ``from x import name`` counts the submodule ``name``)."""
    tree = ast.parse(MODULES[module].read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("ipintel"):
            assert node.module is not None
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("ipintel"))
    return {name for name in found if name in MODULES and name != module}


@functools.cache
def import_graph() -> Mapping[str, AbstractSet[str]]:
    """Every module's ``imports_of``, read once when a test first asks (not when the module is collected: parsing
    every module takes about 0.5 s, which each pytest process, each xdist worker, would pay); read-only."""
    return MappingProxyType({module: frozenset(imports_of(module)) for module in MODULES})


def test_the_layers_know_every_module_and_the_graph_is_read() -> None:
    assert len(MODULES) > 80 and "ipintel.web.gate" in MODULES
    assert "ipintel.infra.limiter" in import_graph()["ipintel.web.gate"]  # a plain import is read
    assert {layer_of(module) for module in MODULES} == set(range(len(LAYERS)))


def test_no_module_imports_from_a_layer_above_it() -> None:
    upwards = [
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in import_graph().items()
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]
    assert upwards == []


def cycles_in(graph: Mapping[str, AbstractSet[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of ``graph`` closes, each as the path that closes it."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return cycles


def test_no_module_imports_itself_through_others() -> None:
    assert cycles_in(import_graph()) == []


def test_the_cycle_check_finds_a_loop_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles_in(graph) == [["a", "b", "c", "a"]]
    assert cycles_in({"a": {"b"}, "b": set()}) == []
