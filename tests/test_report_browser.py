"""The report in a real browser: headless Debian Chromium driven over the DevTools protocol.

No Playwright or Selenium: Chromium's `--remote-debugging-pipe` speaks CDP as NUL-separated JSON on
file descriptors 3 (commands in) and 4 (replies out), which the standard library can drive.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from neuronkit.report import report
from test_report import EVIL, full_run

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT_COPY = Path(__file__).resolve().parent.parent / "build" / "report-screenshot.png"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,900", "--remote-debugging-pipe"]
TIMEOUT_S = 15

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="headless Chromium not installed (/usr/bin/chromium): "
                                                     "apt-get install chromium"),
]


class Cdp:
    """A minimal DevTools protocol client: `call` waits for its reply, events are kept in `events`."""

    def __init__(self, user_data_dir: Path) -> None:
        to_chrome_r, self._out = os.pipe()
        self._in, from_chrome_w = os.pipe()

        def wire_fds() -> None:  # in the child: our pipe ends become its fds 3 and 4
            read_end = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD_CLOEXEC, 5)
            write_end = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD_CLOEXEC, 5)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.proc = subprocess.Popen([str(CHROMIUM), *FLAGS, f"--user-data-dir={user_data_dir}"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, close_fds=False, preexec_fn=wire_fds)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.events: list[dict[str, Any]] = []
        self._buffer = b""
        self._next_id = 0

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._out, data):]
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> dict[str, Any]:
        """The first not yet consumed `method` event of `session`, waiting for it if need be."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            for index, event in enumerate(self.events):
                if event.get("method") == "Page.javascriptDialogOpening":  # it would block the page
                    raise AssertionError(f"the page opened a JavaScript dialog: {event['params']}")
                if event.get("method") == method and event.get("sessionId") == session:
                    return self.events.pop(index)
            self.events.append(self._read(deadline))

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._in], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("no reply from Chromium")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise EOFError("Chromium exited")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (OSError, RuntimeError, TimeoutError, EOFError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._in)
        os.close(self._out)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Cdp]:
    cdp = Cdp(tmp_path / "chromium-profile")
    yield cdp
    cdp.close()


def open_page(cdp: Cdp, url: str, javascript: bool = True) -> str:
    """A fresh tab with console, network and dialog events on, loaded with `url`; returns its session."""
    target = cdp.call("Target.createTarget", url="about:blank")["targetId"]
    session = cdp.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        cdp.call(f"{domain}.enable", session)
    if not javascript:
        cdp.call("Emulation.setScriptExecutionDisabled", session, value=True)
    cdp.call("Page.navigate", session, url=url)
    cdp.wait_for("Page.loadEventFired", session)
    return session


def evaluate(cdp: Cdp, session: str, expression: str) -> Any:
    result = cdp.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
    assert "exceptionDetails" not in result, result
    return result["result"].get("value")


VISIBLE_ROWS = ("Array.from(document.querySelectorAll('#op-table tbody tr'))"
                ".filter(r => r.offsetParent !== null)")


def test_report_in_headless_chromium(browser: Cdp, tmp_path: Path) -> None:
    paths = report(full_run(tmp_path / "run", model_name=EVIL))
    session = open_page(browser, paths.html.as_uri())

    state = evaluate(browser, session, """({
        title: document.getElementById('model-name').textContent,
        verdict: document.getElementById('verdict-label').textContent,
        verdictTop: document.getElementById('verdict').getBoundingClientRect().top,
        viewport: window.innerHeight,
        controlsShown: !document.getElementById('op-controls').hidden,
        rows: document.querySelectorAll('#op-table tbody tr').length,
        tableVisible: document.getElementById('op-table').offsetParent !== null,
        images: Array.from(document.images).map(i => i.complete && i.naturalWidth > 0),
    })""")
    assert state["title"] == EVIL  # the script-laden name shows as text
    assert state["verdict"] == "Ready with CPU fallbacks" and state["verdictTop"] < state["viewport"] / 2
    assert state["tableVisible"] and state["controlsShown"] and state["rows"] > 10
    assert state["images"] and all(state["images"])

    metrics = browser.call("Page.getLayoutMetrics", session)["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": 1280, "height": min(metrics["height"], 4000), "scale": 1}
    shot = browser.call("Page.captureScreenshot", session, clip=clip, captureBeyondViewport=True)
    screenshot = tmp_path / "report.png"
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    assert screenshot.read_bytes().startswith(b"\x89PNG") and screenshot.stat().st_size > 10_000
    SCREENSHOT_COPY.parent.mkdir(exist_ok=True)
    shutil.copyfile(screenshot, SCREENSHOT_COPY)

    evaluate(browser, session, "document.getElementById('op-filter').focus()")
    browser.call("Input.insertText", session, text="median")
    shown = evaluate(browser, session, f"{VISIBLE_ROWS}.map(r => r.textContent)")
    assert len(shown) == 1 and "aten::median" in shown[0]
    assert evaluate(browser, session, "document.getElementById('op-count').textContent").startswith("1 of ")

    evaluate(browser, session, """(() => { const f = document.getElementById('op-filter');
        f.value = ''; f.dispatchEvent(new Event('input'));
        const c = document.getElementById('op-category');
        c.value = 'native'; c.dispatchEvent(new Event('change'));
        document.querySelectorAll('#op-table thead th button')[3].click(); })()""")
    rows = evaluate(browser, session,
                    f"{VISIBLE_ROWS}.map(r => [r.dataset.category, Number(r.cells[3].dataset.sort)])")
    assert rows and {category for category, _ in rows} == {"native"}
    calls = [n for _, n in rows]
    assert calls == sorted(calls, reverse=True)  # the Calls header sorts largest first

    no_js = open_page(browser, paths.html.as_uri(), javascript=False)
    assert evaluate(browser, no_js, f"{VISIBLE_ROWS}.length") == state["rows"]
    assert evaluate(browser, no_js, "document.getElementById('op-controls').hidden") is True

    methods = [e.get("method") for e in browser.events]
    errors = [e["params"] for e in browser.events if e.get("method") == "Runtime.exceptionThrown"
              or e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert")
              or e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"]
    assert errors == []
    assert "Page.javascriptDialogOpening" not in methods  # nothing injected ran alert()
    requested = [e["params"]["request"]["url"] for e in browser.events
                 if e.get("method") == "Network.requestWillBeSent"]
    assert requested and all(url.startswith(("file:", "data:")) for url in requested), requested
