"""The demo's report in headless Chromium: no console errors, every chart drawn, the vendor table present.

Driven over the DevTools protocol (``--remote-debugging-port`` + websocket-client), which is what reports
console messages and exceptions reliably; a screenshot is saved beside the test's output
(``report-screenshot.png`` in its tmp folder, path printed). Skips, saying why, without /usr/bin/chromium.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--window-size=1200,900",
)
CHECK = """(() => {
  const charts = [...document.querySelectorAll('figure.chart svg')].map(s => {
    const r = s.getBoundingClientRect();
    return {w: r.width, h: r.height, paths: s.querySelectorAll('path').length};
  });
  return {charts, vendorTables: document.querySelectorAll('table.vendor-table tbody tr').length,
          scripts: document.scripts.length};
})()"""

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)")


class DevTools:
    """A minimal DevTools protocol client: send a command, wait for its reply, keep every event."""

    def __init__(self, url: str) -> None:
        import websocket

        self.ws = websocket.create_connection(url, timeout=30, suppress_origin=True)
        self.events: list[dict[str, Any]] = []
        self.next_id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message.get("result", {})  # type: ignore[no-any-return]
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            assert time.monotonic() < deadline, f"no {method} within {timeout} s"
            self.events.append(json.loads(self.ws.recv()))


@pytest.fixture
def devtools(tmp_path: Path) -> Iterator[DevTools]:
    profile = tmp_path / "profile"
    process = subprocess.Popen(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert process.poll() is None, "chromium exited"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
            pages = [t for t in json.load(response) if t["type"] == "page"]
        client = DevTools(pages[0]["webSocketDebuggerUrl"])
        yield client
        client.ws.close()
    finally:
        process.terminate()
        process.wait(timeout=10)


def _errors(events: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for e in events:
        params = e.get("params", {})
        console_error = e.get("method") == "Runtime.consoleAPICalled" and params.get("type") in (
            "error",
            "assert",
        )
        if e.get("method") == "Runtime.exceptionThrown" or console_error:
            out.append(params)
        elif e.get("method") == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            out.append(params["entry"])
    return out


def test_report_renders_in_chromium(demo_dir: Path, devtools: DevTools, tmp_path: Path) -> None:
    for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
        devtools.call(domain)
    devtools.call("Page.navigate", url=(demo_dir / "report.html").as_uri())
    devtools.wait_for("Page.loadEventFired")
    page = devtools.call("Runtime.evaluate", expression=CHECK, returnByValue=True)["result"]["value"]
    shot = devtools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    screenshot = tmp_path / "report-screenshot.png"
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    print(f"screenshot: {screenshot}")
    assert _errors(devtools.events) == []
    assert len(page["charts"]) == 4
    assert all(c["w"] > 100 and c["h"] > 50 and c["paths"] > 5 for c in page["charts"]), page["charts"]
    assert page["vendorTables"] >= 2 and page["scripts"] == 0
    assert screenshot.stat().st_size > 10_000
