"""neuronkit's modules import one another without a cycle, in the whole package (issues 21 item 7 and 38):
every import counts, the ones inside functions too, since a deferred import is how a cycle hides. And the
layers hold: the device below what teaches or plans with it, the planner runs no device, the pipeline knows
no particular stage, and a stage folder's parts the stage table loads import no pipeline."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "neuronkit"


def _module_names() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, for its __init__)."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, from each file's syntax tree. `from a.b import c` is an
    import of module `a.b.c` when there is one, else of `a.b` (a name in it); a compiled extension
    (`neuronkit/device/simulator/_native`) is no module of this graph."""
    modules = _module_names()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module.startswith("neuronkit") and node.module not in modules:
                    continue
                found = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                         for a in node.names]
            else:
                continue
            for target in found:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def _assert_acyclic(graph: dict[str, set[str]]) -> None:
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as cycle:
        raise AssertionError(f"import cycle: {' -> '.join(cycle.args[1])}") from None


def test_the_whole_package_has_no_import_cycle() -> None:
    graph = _graph()
    assert {"neuronkit.pipeline.record", "neuronkit.pipeline.stage"} <= graph["neuronkit.pipeline.check"]
    assert "neuronkit.device.simulator.streams" in graph["neuronkit.device.simulator.module"], \
        "the import graph lost the edges it should see"
    _assert_acyclic(graph)


def test_the_checker_sees_a_deferred_import_close_a_cycle() -> None:
    graph = {"a": {"b"}, "b": set()}
    _assert_acyclic(graph)
    graph["b"].add("a")
    try:
        _assert_acyclic(graph)
    except AssertionError as error:
        assert "a -> b -> a" in str(error) or "b -> a -> b" in str(error)
    else:
        raise AssertionError("a cycle went unseen")


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


# Layers (issue 21 item 7, issue 38): the device (simulator and its process group) is below everything that
# teaches or plans with it; the planner is arithmetic and runs no device; the pipeline frame knows no
# particular stage (the stage table finds their folders); the process runtime starts kernels and knows
# nothing of what they run.
LAYERS = {
    "device": {"neuronkit.workbook", "neuronkit.distributed", "neuronkit.planner", "neuronkit.reporting",
               "neuronkit.checks", "neuronkit.notebooks", "neuronkit.pipeline", "neuronkit.stages", "neuronkit.kernels"},
    "planner": {"neuronkit.device", "neuronkit.distributed", "neuronkit.workbook", "neuronkit.reporting"},
    "pipeline": {"neuronkit.stages", "neuronkit.workbook", "neuronkit.reporting", "neuronkit.checks",
                 "neuronkit.kernels"},
    "kernels": {"neuronkit.pipeline", "neuronkit.stages", "neuronkit.workbook", "neuronkit.reporting",
                "neuronkit.checks", "neuronkit.models", "neuronkit.device"},
}


def test_each_layer_never_imports_the_layers_above_it() -> None:
    for folder, forbidden in LAYERS.items():
        imports = _outside_imports(PACKAGE / folder)
        assert imports, f"no modules found under neuronkit/{folder}"
        wrong = {path: sorted(names & forbidden) for path, names in imports.items() if names & forbidden}
        assert wrong == {}, f"neuronkit/{folder} imports a layer above it: {wrong}"


def test_the_parts_of_a_stage_folder_the_table_loads_import_no_pipeline() -> None:
    """The stage table (neuronkit/pipeline/stage.py) imports each folder's `__init__` and `evidence` by name when
    it is read: they build on shared rows only, so that reading the table never re-enters the pipeline."""
    for folder in (p for p in (PACKAGE / "stages").iterdir() if (p / "__init__.py").is_file()):
        for part in ("__init__.py", "evidence.py"):
            path = folder / part
            if not path.is_file():
                continue
            imports = _outside_imports(folder)[str(path.relative_to(PACKAGE))]
            assert not imports & {"neuronkit.pipeline", "neuronkit.workbook", "neuronkit.reporting"}, path


def test_the_process_group_sits_beside_the_simulator() -> None:
    imports = _outside_imports(PACKAGE / "device" / "process_group")
    assert {"backend.py", "rules.py", "runtime_setup.py", "trace.py"} <= {Path(p).name for p in imports}
    assert "neuronkit.device" in imports[str(Path("device", "process_group", "backend.py"))]
