"""Prepare the workbook notebooks for `pytest --nbval-lax`: parameters injected, expected outputs stored.

nbval compares a cell's fresh output with the output stored in the notebook, and only for cells that
have an execution count. The committed notebooks are clean (no outputs), so this script writes prepared
copies: `papermill --prepare-only` injects the CI parameters (a run directory inside OUT), then each cell
tagged `nbval-check-output` (nbval's own tag for `# NBVAL_CHECK_OUTPUT`; the cell is hidden in the
learner's view) gets the output recorded in `expected_outputs.json`. Every other cell has no
stored output and is only required to run without error.

    python tests/nbval/prepare.py build/nbval            # prepare, then:
    pytest --nbval-lax --nbval-kernel-name neuronkit --nbval-sanitize-with tests/nbval/sanitize.cfg -n 0 build/nbval
    python tests/nbval/prepare.py build/nbval --record   # re-record the expected outputs (review the diff)
    python tests/nbval/prepare.py build/nbval --notebook 00_environment.ipynb   # the first notebook(s) only

An expected output recorded for other cell code is refused: change a checked cell, record again.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import nbformat
import papermill

from neuronkit.kernels.starter import KERNEL_NAME, ensure_kernel
from neuronkit.resources import notebooks_dir
from neuronkit.workbook.runner import KERNEL_ARGUMENTS, NOTEBOOKS

EXPECTED = Path(__file__).resolve().parent / "expected_outputs.json"
TAG = "nbval-check-output"  # nbval checks the output of a cell with this tag (in --nbval-lax too)


def prepare(out: Path, names: Sequence[str] = NOTEBOOKS) -> list[Path]:
    """Write the parameterized copies of notebooks `names` into `out`, one shared run directory `out/run` for
    the sequence."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        path = out / name
        papermill.execute_notebook(str(notebooks_dir() / name), str(path), parameters={"run_dir": str(out / "run")},
                                   prepare_only=True, kernel_name=KERNEL_NAME, progress_bar=False)
        paths.append(path)
    return paths


def checked_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code" and TAG in c.metadata.get("tags", [])]


def store_expected(paths: list[Path]) -> None:
    """Give every checked cell its recorded output and an execution count, so nbval compares it."""
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        for cell in checked_cells(nb):
            key = f"{path.name}#{cell.id}"
            entry = expected.get(key)
            if entry is None or entry["source"] != cell.source:
                problem = "has no recorded output" if entry is None else "changed since its output was recorded"
                raise SystemExit(f"{key} {problem}: run python tests/nbval/prepare.py OUT --record and review")
            cell.outputs = [nbformat.from_dict(o) for o in entry["outputs"]]
            cell.execution_count = 1
        nbformat.write(nb, path)


def record(paths: list[Path]) -> None:
    """Execute the prepared sequence and save its checked cells' outputs as the expected ones."""
    expected: dict[str, dict] = {}
    for path in paths:
        papermill.execute_notebook(str(path), str(path), kernel_name=KERNEL_NAME, cwd=str(path.parent),
                                   progress_bar=False, extra_arguments=KERNEL_ARGUMENTS)
        nb = nbformat.read(path, as_version=4)
        for cell in checked_cells(nb):
            outputs = [{k: v for k, v in o.items() if k != "execution_count"} for o in cell.outputs]
            expected[f"{path.name}#{cell.id}"] = {"source": cell.source, "outputs": outputs}
    EXPECTED.write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for the prepared notebooks (and their run directory)")
    parser.add_argument("--record", action="store_true", help="execute them and re-record expected_outputs.json")
    parser.add_argument("--notebook", action="append", choices=NOTEBOOKS, dest="notebooks",
                        help="prepare this notebook only (repeatable): the first of the sequence, as each later one "
                             "needs the records of those before it")
    args = parser.parse_args(argv)
    names = [name for name in NOTEBOOKS if name in (args.notebooks or NOTEBOOKS)]
    ensure_kernel()
    out = args.out.resolve()
    if args.record:
        record(prepare(out))
    store_expected(prepare(out, names))
    print(f"prepared {len(names)} notebook(s) in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
