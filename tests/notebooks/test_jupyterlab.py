"""The workbook where onboarding engineers use it: JupyterLab, driven in Debian's headless Chromium by Playwright
(as tests/reporting/test_report_browser.py drives the report).

JupyterLab serves a copy of the repository's notebooks (its run directory, `../runs/tiny-qwen3`, lands beside
the copy); each of 00-06 but 04 is opened from the file browser and run with Run ▸ Run All Cells, then saved
with Ctrl+S, as a learner does who skips `torch.compile` for now (06 then reports the run so far: compile
missing; 04 itself runs in the whole-workbook test, tests/notebooks/test_notebooks.py), on kernel `neuronkit` forked from a process that imported the libraries once
(conftest's ForkedKernels). Then: no cell failed, every widget rendered as a widget and every plot as an image,
the nbval check cell shows the learner nothing (and still gives nbval its facts), saving raised no dialog and
left each paired `.py` as committed, and the page logged no error. The page's JupyterLab application object is
read (`expose_app_in_browser`) only to know when a notebook's kernel is idle and its cells have run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import jupytext
import nbformat
import pytest

from conftest import ForkedKernels
from neuronkit.distributed.launch import free_port
from neuronkit.workbook import NOTEBOOKS
from test_notebooks import assert_checked_cells_match_their_recorded_outputs
from test_report_browser import CHROMIUM, FLAGS, PageLog

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_MS = 300_000  # one notebook's Run All (each takes 2-5 s on a quiet machine)
# What the learner runs, in order: every workbook notebook but 04 (compiling is the slowest, ~15 s).
RUN = [name for name in NOTEBOOKS if not name.startswith("04_")]
START_TIMEOUT_S = 120
TOKEN = "neuronkit-test"  # the server listens on 127.0.0.1 only, for this test's page
# The learner's settings, with nothing fetched from the network (JupyterLab's news and update check) and every
# cell rendered (no windowing), so the page holds each notebook's outputs.
SETTINGS = {"@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
            "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"}}

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency: pip install -e .[test]")
pytestmark = [
    pytest.mark.browser, pytest.mark.notebooks,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="headless Chromium not installed (/usr/bin/chromium): "
                                                     "apt-get install chromium"),
]

# Whether the current notebook has run: its kernel is idle, no cell is running, and either its last code cell
# has an execution count or a cell failed (Run All stops there).
RAN = """() => {
    const panel = window.jupyterapp.shell.currentWidget, kernel = panel.sessionContext.session?.kernel;
    const cells = Array.from({length: panel.content.model.cells.length}, (_, i) => panel.content.model.cells.get(i))
        .filter(cell => cell.type === 'code');
    const failed = cells.some(cell => Array.from({length: cell.outputs.length}, (_, i) => cell.outputs.get(i))
        .some(output => output.type === 'error'));
    return kernel?.status === 'idle' && !cells.some(cell => cell.executionState === 'running')
        && (cells[cells.length - 1].executionCount !== null || failed);
}"""
# What the page shows of the current notebook: rendered widgets, images, text that stands in for a widget or a
# figure, and the nbval check cell (the last one).
SHOWN = """() => {
    const panel = window.jupyterapp.shell.currentWidget.content.node;
    const outputs = Array.from(panel.querySelectorAll('.jp-OutputArea-output'));
    const cells = panel.querySelectorAll('.jp-CodeCell'), check = cells[cells.length - 1];
    return {
        widgets: panel.querySelectorAll('.jp-OutputArea-output .jupyter-widgets').length,
        images: panel.querySelectorAll('.jp-OutputArea-output img').length,
        standIns: outputs.map(o => o.innerText).filter(t => /Loading widget|Error displaying widget|<Figure size/.test(t)),
        checkInputHidden: check.querySelector('.jp-InputPlaceholder') !== null,
        checkShows: check.querySelector('.jp-Cell-outputArea').innerText.trim(),
    };
}"""


@pytest.fixture
def lab(tmp_path: Path, forked_kernels: ForkedKernels) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server on a copy of the notebooks, with its own settings, workspaces and Jupyter folders;
    its URL and the copy. Its kernels are forked from the session's server (their kernel spec drops the
    server's Jupyter folders), as the notebook tests' are."""
    notebooks = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", notebooks)
    settings = tmp_path / "settings"
    for name, values in SETTINGS.items():
        path = settings / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    folders = {variable: str(tmp_path / folder) for variable, folder in  # nothing of the user's ~/.jupyter
               (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_RUNTIME_DIR", "runtime"))}
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={notebooks}",
         f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
         "--LabApp.expose_app_in_browser=True"],
        env={**forked_kernels.env, **folders}, stdout=(tmp_path / "server.log").open("w"), stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}", notebooks
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def _open(page: Any, url: str) -> None:
    """Load JupyterLab's page once the server answers."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            page.goto(f"{url}/lab/tree/{NOTEBOOKS[0]}?token={TOKEN}", wait_until="load")
            return
        except playwright_api.Error:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _run_and_save(page: Any, name: str) -> None:
    """Run every cell of notebook `name` (open in the page) from the Run menu, then save it with Ctrl+S."""
    page.wait_for_function("""name => { const panel = window.jupyterapp?.shell.currentWidget;
        return panel?.context?.path === name && panel.sessionContext.session?.kernel?.status === 'idle'; }""",
                           arg=name, timeout=START_TIMEOUT_S * 1000)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    page.wait_for_function(RAN, timeout=RUN_TIMEOUT_MS, polling=250)
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty")


@pytest.mark.subprocess
def test_workbook_runs_in_jupyterlab_and_saves_cleanly(lab: tuple[str, Path]) -> None:
    url, notebooks = lab
    shown: dict[str, dict[str, Any]] = {}
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        log = PageLog(page)
        _open(page, url)
        for name in RUN:
            if name != NOTEBOOKS[0]:
                page.locator(".jp-DirListing-item", has_text=name).first.dblclick()
            _run_and_save(page, name)
            shown[name] = page.evaluate(SHOWN)
            shown[name]["dialogs"] = page.locator(".jp-Dialog").all_inner_texts()
        browser.close()

    failed = {name: [f"{o.ename}: {o.evalue}" for c in nbformat.read(notebooks / name, as_version=4).cells
                     for o in c.get("outputs", []) if o.output_type == "error"] for name in RUN}
    assert not any(failed.values()), failed
    for name, page_state in shown.items():
        saved = nbformat.read(notebooks / name, as_version=4)
        widget_outputs = [o for c in saved.cells for o in c.get("outputs", [])
                          if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        assert (page_state["widgets"] > 0) == bool(widget_outputs), (name, page_state)
        assert page_state["images"] >= 1 and page_state["standIns"] == [], (name, page_state)
        assert page_state["checkInputHidden"] and page_state["checkShows"] == "", (name, page_state)
        assert page_state["dialogs"] == [], (name, page_state)
        source = notebooks / name.replace(".ipynb", ".py")
        assert source.read_text() == (ROOT / "notebooks" / source.name).read_text(), f"saving {name} rewrote {source.name}"
        assert [(c.cell_type, c.source) for c in jupytext.read(source).cells] == \
            [(c.cell_type, c.source) for c in saved.cells]
    assert sum(page_state["widgets"] > 0 for page_state in shown.values()) >= 3  # 00's picker, 03's filter, 06's
    # what nbval reads, from the saved notebooks (06's facts are a whole run's: the wheel test checks them)
    assert_checked_cells_match_their_recorded_outputs(notebooks, RUN[:-1])
    (report,) = notebooks.parent.glob("runs/*/report.json")  # 06's, of the run so far
    assert json.loads(report.read_text())["missing_stages"] == ["compile"]
    assert log.errors == [] and log.dialogs == []
    assert all(request.startswith(url) or request.startswith(("data:", "blob:")) for request in log.requests), \
        [r for r in log.requests if not r.startswith(url)][:5]
