"""The Alertmanager config: valid (amtool), and its inhibitions make an outage one alert (a real Alertmanager)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from spanwatch.sim.commands import free_port

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "alertmanager" / "alertmanager.yml"
AMTOOL = shutil.which("amtool")
ALERTMANAGER = shutil.which("alertmanager") or shutil.which("prometheus-alertmanager")
REASON = "Alertmanager is not installed (apt-get install prometheus-alertmanager)"


@pytest.mark.skipif(AMTOOL is None, reason=REASON)
def test_config_is_valid() -> None:
    assert AMTOOL is not None
    result = subprocess.run([AMTOOL, "check-config", str(CONFIG)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def _alert(name: str, **labels: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "labels": {"alertname": name, **labels},
        "startsAt": now.isoformat(),
        "endsAt": (now + timedelta(minutes=10)).isoformat(),
    }


def _request(url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        text = r.read()
    return json.loads(text) if text else None


@pytest.mark.skipif(ALERTMANAGER is None, reason=REASON)
def test_a_wave_down_holds_back_the_consequences_on_its_link(tmp_path: Path) -> None:
    assert ALERTMANAGER is not None
    address = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [ALERTMANAGER, f"--config.file={CONFIG}", f"--storage.path={tmp_path}", f"--web.listen-address={address}",
         "--cluster.listen-address=", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://{address}/api/v2"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                _request(f"{url}/status")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "alertmanager did not start"
                time.sleep(0.1)
        crit, warn = {"severity": "critical"}, {"severity": "warning"}
        _request(
            f"{url}/alerts",
            [
                _alert("SpanwatchWaveDown", link="l1", **crit),
                _alert("SpanwatchPreFecBerNearLimit", link="l1", device="b", component="C1", **warn),
                _alert("SpanwatchOsnrMarginLow", link="l1", device="a", component="C1", **warn),
                _alert("SpanwatchInterDcLinkDropping", link="l1", site="a", **warn),
                _alert("SpanwatchPreFecBerNearLimit", link="l2", device="c", component="C1", **warn),
                _alert("SpanwatchTargetDown", device="d", source="snmp", **warn),
                _alert("SpanwatchTargetStale", device="d", source="snmp", **warn),
            ],
        )
        deadline = time.monotonic() + 10
        while True:  # inhibitions are computed as alerts arrive; give it a moment
            got = _request(f"{url}/alerts")
            active = sorted(
                (a["labels"]["alertname"], a["labels"].get("link", ""))
                for a in got
                if a["status"]["state"] == "active"
            )
            if (len(got) == 7 and len(active) == 3) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(10)
    assert active == [
        ("SpanwatchPreFecBerNearLimit", "l2"),  # another link: not held back
        ("SpanwatchTargetDown", ""),
        ("SpanwatchWaveDown", "l1"),
    ]
