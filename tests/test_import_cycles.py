"""The simulated device's modules import one another without a cycle (issue 21, item 7): every import
counts, the ones inside functions too, since a deferred import is how a cycle hides."""

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


def test_the_device_simulator_has_no_import_cycle() -> None:
    graph = _imports(PACKAGE / "device" / "simulator")
    assert "streams" in graph["module"], "the import graph lost the edges it should see"
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as cycle:
        raise AssertionError(f"import cycle: {' -> '.join(cycle.args[1])}") from None
