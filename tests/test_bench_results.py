"""bench/RESULTS.md is generated from the bench scripts' JSON (issue 21 item 7): the committed file is what
`bench/make_results.py` writes from the committed `bench/results/*.json` and bench/HISTORY.md. No bench runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _generator():
    spec = importlib.util.spec_from_file_location("make_results", BENCH / "make_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_md_is_generated_from_the_committed_json() -> None:
    assert (BENCH / "RESULTS.md").read_text(encoding="utf-8") == _generator().render(), \
        "bench/RESULTS.md is stale: python bench/make_results.py"


def test_every_recorded_figure_is_a_number_in_a_declared_column() -> None:
    results = sorted((BENCH / "results").glob("*.json"))
    assert results, "no bench results committed"
    for path in results:
        record = json.loads(path.read_text(encoding="utf-8"))
        assert record["name"] == path.stem and len(record["load_before"]) == 3, path.name
        for row in record["rows"]:
            assert set(row) <= set(record["columns"]), (path.name, row)


def test_a_run_becomes_a_section_with_its_load_and_formatted_figures(tmp_path: Path) -> None:
    record = {"name": "x", "title": "X", "command": "python bench/x.py", "date": "2026-12-01", "machine": "m",
              "load_before": [1.5, 1, 1], "load_after": [2.25, 1, 1], "note": "n",
              "columns": {"case": {"label": "case", "format": "{}"}, "s": {"label": "wall", "format": "{:.1f} s"}},
              "rows": [{"case": "a", "s": 1.234}, {"case": "b"}]}
    (tmp_path / "x.json").write_text(json.dumps(record))
    (tmp_path / "HISTORY.md").write_text("# History\n")
    text = _generator().render(tmp_path, tmp_path / "HISTORY.md")
    assert "## X\n\n`python bench/x.py` (2026-12-01; m; load 1.5 → 2.25 (1-min average))\n\nn\n" in text
    assert "| case | wall |\n|---|---|\n| a | 1.2 s |\n| b |  |\n" in text and text.endswith("# History\n")
