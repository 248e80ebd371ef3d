"""The simulated device's modules, and the NKI interpreter's, import one another without a cycle (issue 21,
item 7): every import counts, the ones inside functions too, since a deferred import is how a cycle hides."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "neuronkit"


def _imports(folder: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same folder it imports, from each file's syntax tree."""
    prefix = ".".join(folder.relative_to(PACKAGE.parent).parts)
    local = {path.stem for path in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        graph[path.stem] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == prefix:
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix + "."):
                names = [node.module.removeprefix(prefix + ".").split(".")[0]]
            else:
                continue
            graph[path.stem].update(name for name in names if name in local and name != path.stem)
    return graph


def _assert_acyclic(graph: dict[str, set[str]]) -> None:
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as cycle:
        raise AssertionError(f"import cycle: {' -> '.join(cycle.args[1])}") from None


def test_the_device_simulator_has_no_import_cycle() -> None:
    graph = _imports(PACKAGE / "device" / "simulator")
    assert "streams" in graph["module"], "the import graph lost the edges it should see"
    _assert_acyclic(graph)


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), list(graph[start])
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return False


def test_the_nki_kernel_runtime_is_in_no_import_cycle() -> None:
    """`jit` (what `@nki.jit` returns) builds on the interpreter (`runtime`) and the torch integration (`hop`),
    which builds on `runtime`; neither imports back. (`isa` <-> `isa_extra`, a deferred import of two private
    helpers, is a cycle of its own, not part of this one.)"""
    graph = _imports(PACKAGE / "nki")
    assert {"runtime", "hop"} <= graph["jit"], "the import graph lost the edges it should see"
    assert "runtime" in graph["hop"]
    assert [m for m in ("jit", "runtime", "hop") if _reaches(graph, m, m)] == []

