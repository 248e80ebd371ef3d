"""The report in a real browser: Debian's headless Chromium driven by Playwright.

Playwright launches the system browser through `executable_path`; no browser build is downloaded
(`playwright install` is never run). Every request, console message, page error and dialog is recorded,
so the test also proves the report is offline and that nothing injected into it runs.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from neuronkit.cost import record as cost_record
from neuronkit.reporting import report
from test_report import EVIL, full_run

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT_COPY = Path(__file__).resolve().parents[2] / "build" / "report-screenshot.png"
# Headless, sandbox-free (root in a container), no GPU, and no traffic of the browser's own.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 15_000

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency: pip install -e .[test]")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="headless Chromium not installed (/usr/bin/chromium): "
                                                     "apt-get install chromium"),
]


class PageLog:
    """What a page did besides rendering: requests, console errors, uncaught exceptions, dialogs."""

    def __init__(self, page: Any) -> None:
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("console", lambda msg: self.errors.append(msg.text) if msg.type in ("error", "assert") else None)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("dialog", self._dialog)

    def _dialog(self, dialog: Any) -> None:  # an open dialog would block the page: record and dismiss it
        self.dialogs.append(dialog.message)
        dialog.dismiss()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS, headless=True,
                                      timeout=TIMEOUT_MS)
        yield chromium
        chromium.close()


def open_page(browser: Any, url: str, javascript: bool = True) -> tuple[Any, PageLog]:
    """A fresh page in its own context (1280×900), loaded with `url`, and the log of what it did."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=javascript)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    log = PageLog(page)
    page.goto(url, wait_until="load")
    return page, log


VISIBLE_ROWS = ("Array.from(document.querySelectorAll('#op-table tbody tr'))"
                ".filter(r => r.offsetParent !== null)")


def test_report_in_headless_chromium(browser: Any, tmp_path: Path) -> None:
    run = full_run(tmp_path / "run", model_name=EVIL)
    cost_record.write(run, cost_record.summarize("tiny-qwen3"))  # notebook 07's record: "What it will cost"
    paths = report(run)
    page, log = open_page(browser, paths.html.as_uri())

    state = page.evaluate("""() => ({
        title: document.getElementById('model-name').textContent,
        verdict: document.getElementById('verdict-label').textContent,
        verdictTop: document.getElementById('verdict').getBoundingClientRect().top,
        viewport: window.innerHeight,
        controlsShown: !document.getElementById('op-controls').hidden,
        rows: document.querySelectorAll('#op-table tbody tr').length,
        tableVisible: document.getElementById('op-table').offsetParent !== null,
        images: Array.from(document.images).map(i => i.complete && i.naturalWidth > 0),
        cost: document.getElementById('cost').innerText,
        costWidth: document.getElementById('cost-training').getBoundingClientRect().width,
        tiles: Array.from(document.querySelectorAll('#key-numbers .tile-label')).map(t => t.textContent),
    })""")
    # "What it will cost", at desktop width: estimates with their band, the cheapest layout, no host timing up top
    assert "What it will cost" in state["cost"] and "±35%" in state["cost"] and "1 × trn1.2xlarge" in state["cost"]
    assert state["costWidth"] > 600 and not any("host" in t.lower() for t in state["tiles"])
    assert state["title"] == EVIL  # the script-laden name shows as text
    assert state["verdict"] == "Ready with CPU fallbacks" and state["verdictTop"] < state["viewport"] / 2
    assert state["tableVisible"] and state["controlsShown"] and state["rows"] > 10
    assert state["images"] and all(state["images"])

    screenshot = tmp_path / "report.png"
    page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.read_bytes().startswith(b"\x89PNG") and screenshot.stat().st_size > 10_000
    SCREENSHOT_COPY.parent.mkdir(exist_ok=True)
    shutil.copyfile(screenshot, SCREENSHOT_COPY)

    page.locator("#op-filter").fill("median")
    shown = page.evaluate(f"() => {VISIBLE_ROWS}.map(r => r.textContent)")
    assert len(shown) == 1 and "aten::median" in shown[0]
    assert page.locator("#op-count").text_content().startswith("1 of ")

    page.locator("#op-filter").fill("")
    page.locator("#op-category").select_option("native")
    page.locator("#op-table thead th button").nth(3).click()
    rows = page.evaluate(f"() => {VISIBLE_ROWS}.map(r => [r.dataset.category, Number(r.cells[3].dataset.sort)])")
    assert rows and {category for category, _ in rows} == {"native"}
    calls = [n for _, n in rows]
    assert calls == sorted(calls, reverse=True)  # the Calls header sorts largest first

    no_js, no_js_log = open_page(browser, paths.html.as_uri(), javascript=False)
    assert no_js.evaluate(f"() => {VISIBLE_ROWS}.length") == state["rows"]
    assert no_js.locator("#op-controls").is_hidden()

    assert log.errors == [] and no_js_log.errors == []
    assert log.dialogs == []  # nothing injected ran alert()
    requested = log.requests + no_js_log.requests
    assert requested and all(url.startswith(("file:", "data:")) for url in requested), requested


PHONE = {"width": 390, "height": 844}


def test_report_at_phone_width_and_in_print(browser: Any, tmp_path: Path) -> None:
    """At 390 px (a phone) nothing scrolls the page sideways (the cost section's tables scroll in their
    boxes) and chart text stays legible; printed, the op table shows every row (no scroll box clips it)."""
    run = full_run(tmp_path / "run", n_ops=43)
    cost_record.write(run, cost_record.summarize("tiny-qwen3"))  # notebook 07's record: "What it will cost"
    paths = report(run)
    context = browser.new_context(viewport=PHONE, device_scale_factor=1)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(paths.html.as_uri(), wait_until="load")
    widths = page.evaluate("""() => ({
        page: document.documentElement.scrollWidth, viewport: window.innerWidth,
        wide: Array.from(document.querySelectorAll('body *'))
            .filter(e => e.closest('.scroll') === null && e.getBoundingClientRect().right > window.innerWidth + 1)
            .map(e => e.tagName + '.' + e.className).slice(0, 5),
        cost: Array.from(document.querySelectorAll('#cost-tiles .tile, #cost-training, #cost-serving'))
            .map(e => e.offsetParent !== null && e.getBoundingClientRect().width > 0),
        charts: Array.from(document.querySelectorAll('.charts img')).map(i => i.getBoundingClientRect().width),
        naturalCharts: Array.from(document.querySelectorAll('.charts img')).map(i => i.naturalWidth),
    })""")
    assert widths["page"] <= widths["viewport"], widths
    assert widths["wide"] == [], widths
    assert widths["cost"] == [True] * 4, widths  # two tiles and two tables, shown
    # Charts are drawn for a narrow column: the smallest chart text (9 pt at 100 dpi, 12.5 px) shrinks to no
    # less than 8.75 px on the phone.
    assert widths["charts"] and all(shown >= 0.7 * natural for shown, natural in
                                    zip(widths["charts"], widths["naturalCharts"])), widths
    page.screenshot(path=str(tmp_path / "phone.png"), full_page=True)

    page.emulate_media(media="print")
    printed = page.evaluate("""() => {
        const box = document.querySelector('.ops-scroll');
        const rows = Array.from(document.querySelectorAll('#op-table tbody tr'));
        const frame = box.getBoundingClientRect();
        return {rows: rows.length, clipped: box.scrollHeight > box.clientHeight + 1,
                overflow: getComputedStyle(box).overflowY,
                outside: rows.filter(r => r.getBoundingClientRect().bottom > frame.bottom + 1).length};
    }""")
    assert printed["rows"] >= 43 and not printed["clipped"] and printed["outside"] == 0, printed
    # Chromium prints a scroll container as one block cut at the page's end: the table must flow instead.
    assert printed["overflow"] == "visible", printed
    context.close()
