"""The workbook's copyable cells (tag `copy`, notebooks/README.md): every notebook 00-06 has at least one,
and none of them reaches into neuronkit, so what a learner copies is plain PyTorch and Transformers.
Static and fast: the jupytext percent sources are parsed, nothing runs."""

from __future__ import annotations

import ast
from pathlib import Path

import jupytext
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
TAG = "copy"
WORKBOOK = sorted(path.stem for path in NOTEBOOKS.glob("0[0-6]_*.py"))



def _cells(source: Path) -> list[tuple[str, bool]]:
    """The notebook's code cells in order: their source (IPython magics and shell lines blanked, so the
    Python parses) and whether they carry the `copy` tag."""
    notebook = jupytext.read(source)
    return [("\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines()),
             TAG in cell.metadata.get("tags", [])) for cell in notebook.cells if cell.cell_type == "code"]


def _neuronkit_names(tree: ast.AST) -> set[str]:
    """Names a cell binds to neuronkit: what it imports from neuronkit, and what it assigns from a call of
    one of those (`params = parameters(...)`, `result = eager.run(params)`). A plain value taken out of
    such an object (`path = setup.path`) is not one: that is how a copyable cell gets the run's values."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names
                      if alias.name.split(".")[0] == "neuronkit"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "neuronkit":
            bound |= {alias.asname or alias.name for alias in node.names}
    return bound


def _assigned_from(tree: ast.AST, names: set[str]) -> set[str]:
    """Names assigned (at any depth) from a call whose callee starts with one of `names`."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call) \
                and _root(node.value.func) in names:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
    return bound


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def problems(stem: str, folder: Path = NOTEBOOKS) -> list[str]:
    """What breaks the rule in notebook `stem`: no copyable cell, or a copyable cell that imports
    neuronkit, uses a name an earlier cell bound to neuronkit, or calls `lesson.` / `display.`."""
    found, neuronkit, copies = [], set(), 0
    for number, (source, copy) in enumerate(_cells(folder / f"{stem}.py"), 1):
        tree = ast.parse(source)
        own = _neuronkit_names(tree)
        if copy:
            copies += 1
            used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            if own:
                found.append(f"{stem} code cell {number} imports neuronkit ({', '.join(sorted(own))})")
            if reached := sorted((used - stored) & neuronkit):
                found.append(f"{stem} code cell {number} uses {', '.join(reached)}, bound to neuronkit in an "
                             "earlier cell")
            if wrapped := sorted({root for n in ast.walk(tree) if isinstance(n, ast.Call)
                                  if (root := _root(n.func)) in ("lesson", "display")}):
                found.append(f"{stem} code cell {number} calls {', '.join(f'{w}.' for w in wrapped)}")
        neuronkit |= own
        neuronkit |= _assigned_from(tree, neuronkit)
    if not copies:
        found.append(f"{stem} has no cell tagged {TAG!r}")
    return found


def test_the_workbook_is_notebooks_00_to_06() -> None:
    assert [stem[:2] for stem in WORKBOOK] == ["00", "01", "02", "03", "04", "05", "06"]


@pytest.mark.parametrize("stem", WORKBOOK)
def test_copyable_cells_are_plain_pytorch(stem: str) -> None:
    assert problems(stem) == []


def test_the_rule_catches_each_way_into_neuronkit(tmp_path: Path) -> None:
    """A notebook breaking the rule each way is refused, each time naming the cell."""
    cells = ['from neuronkit.pipeline import session\nfrom neuronkit.workbook import lesson, parameters\n'
             'params = parameters("m", "r")\nsetup = session.recipe(params)\npath = setup.path',
             '# %% tags=["copy"]\nimport torch\nprint(path)',
             '# %% tags=["copy"]\nimport neuronkit.models',
             '# %% tags=["copy"]\nmodel = setup.model',
             '# %% tags=["copy"]\nlesson.key_numbers({})',
             '# %% tags=["copy"]\nx = params.model\n%timeit x']
    source = "\n\n".join(cell if cell.startswith("# %%") else f"# %%\n{cell}" for cell in cells)
    (tmp_path / "99_example.py").write_text(source)
    assert problems("99_example", tmp_path) == [
        "99_example code cell 3 imports neuronkit (neuronkit)",
        "99_example code cell 4 uses setup, bound to neuronkit in an earlier cell",
        "99_example code cell 5 uses lesson, bound to neuronkit in an earlier cell",
        "99_example code cell 5 calls lesson.",
        "99_example code cell 6 uses params, bound to neuronkit in an earlier cell"]
    (tmp_path / "98_none.py").write_text("# %%\nimport torch\n")
    assert problems("98_none", tmp_path) == ["98_none has no cell tagged 'copy'"]


@pytest.mark.parametrize("stem", sorted(path.stem for path in NOTEBOOKS.glob("[0-9][0-9]_*.py")))
def test_every_lesson_opens_with_what_it_teaches_and_ends_with_try_it_recap_next(stem: str) -> None:
    """notebooks/README.md's shape, for the workbook and the standalone lessons alike: a numbered title,
    then the markdown headings "Try it", "Recap" and "Next", once each and in that order."""
    cells = jupytext.read(NOTEBOOKS / f"{stem}.py").cells
    assert cells[0].cell_type == "markdown" and cells[0].source.startswith(f"# {stem[:2]} · ")
    headings = [line for cell in cells if cell.cell_type == "markdown" for line in cell.source.splitlines()
                if line in ("## Try it", "## Recap", "## Next")]
    assert headings == ["## Try it", "## Recap", "## Next"], headings


def test_notebook_04s_compile_cells_survive_a_model_torch_compile_refuses(capsys):
    """A model whose torch.compile raises on the device (here: control flow with torch.cond, which the backend
    does not lower) must reach the stage cell, which records why; the compile and plot cells print one line
    and skip the plot instead of ending the notebook (the run would be Incomplete, with no compile record)."""
    import matplotlib

    matplotlib.use("Agg")
    import torch

    class Branchy(torch.nn.Module):
        config = type("Config", (), {})()

        def forward(self, x):
            return {"loss": None, "out": torch.cond(x.sum() > 0, lambda v: v + 1, lambda v: v - 1, (x,))}

    cells = [source for source, copy in _cells(NOTEBOOKS / "04_compile.py") if copy]
    namespace = {"net": Branchy(), "device": "neuron", "inputs": {"x": torch.ones(3)}}
    for source in cells[:2]:  # the compile cell and its plot
        exec(compile(source, "04_compile.py", "exec"), namespace)
    assert namespace["calls"] == []
    assert "torch.compile failed on this model: backend='neuron' raised:" in capsys.readouterr().out
