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
    which builds on `runtime`; neither imports back."""
    graph = _imports(PACKAGE / "nki")
    assert {"runtime", "hop"} <= graph["jit"], "the import graph lost the edges it should see"
    assert "runtime" in graph["hop"]
    assert [m for m in ("jit", "runtime", "hop") if _reaches(graph, m, m)] == []


def test_the_nki_interpreter_has_no_import_cycle() -> None:
    """The whole of neuronkit/nki: `isa` re-exports `isa_extra`'s instructions, and both build on `isa_operands`
    for the dst and op= rules; `cost` reads the current launch from `context`, whose launcher hands it its
    ledger. (Deferred imports back, `isa_extra` -> `isa` and `cost` -> `context`, were the cycles it caught.)"""
    graph = _imports(PACKAGE / "nki")
    assert "isa_extra" in graph["isa"] and "isa_operands" in graph["isa_extra"], \
        "the import graph lost the edges it should see"
    _assert_acyclic(graph)


def _outside_imports(folder: Path) -> dict[str, set[str]]:
    """File (relative to the package) -> the neuronkit packages it imports, every import counted."""
    found: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "neuronkit":  # from neuronkit import models
                modules = [f"neuronkit.{alias.name}" for alias in node.names]
            else:
                modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names.update(".".join(m.split(".")[:2]) for m in modules if m.startswith("neuronkit."))
        found[str(path.relative_to(PACKAGE))] = names
    return found


# Layers (issue 21 item 7): the device (simulator and its process group) is below everything that teaches or
# plans with it; the planner is arithmetic and runs no device.
LAYERS = {
    "device": {"neuronkit.workbook", "neuronkit.distributed", "neuronkit.planner", "neuronkit.reporting",
               "neuronkit.checks", "neuronkit.notebooks", "neuronkit.pipeline", "neuronkit.stages"},
    "planner": {"neuronkit.device", "neuronkit.distributed", "neuronkit.workbook", "neuronkit.reporting"},
}


def test_the_device_never_imports_the_layers_above_it() -> None:
    for folder, forbidden in LAYERS.items():
        imports = _outside_imports(PACKAGE / folder)
        assert imports, f"no modules found under neuronkit/{folder}"
        wrong = {path: sorted(names & forbidden) for path, names in imports.items() if names & forbidden}
        assert wrong == {}, f"neuronkit/{folder} imports a layer above it: {wrong}"


def test_the_process_group_sits_beside_the_simulator() -> None:
    imports = _outside_imports(PACKAGE / "device" / "process_group")
    assert {"backend.py", "rules.py", "runtime_setup.py", "trace.py"} <= {Path(p).name for p in imports}
    assert "neuronkit.device" in imports[str(Path("device", "process_group", "backend.py"))]
