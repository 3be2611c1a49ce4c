"""Issue 34 point 2: 300 clients trickling their request headers, reopened as soon as they are closed, beside
a real Prometheus scraping ``spanwatch collect`` every second: at least 95 % of the scrapes succeed.

On main before the fix the tricklers held all 256 connection slots and nearly every scrape got a 503 or a
reset. The collector runs as its own process (as deployed); the tricklers run on an event loop in a thread of
the flood (``trickle_flood``) is a process of its own, as an attacker's would be; everything is on loopback
and bounded to about 30 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.processes import stop_process
from tests.integration.prometheus_support import PROMETHEUS, SKIP_REASON, free_port, launch, query

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(PROMETHEUS is None, reason=SKIP_REASON),
    pytest.mark.timeout(120),
]
TRICKLERS = 300
SCRAPE_WINDOW = 15  # seconds of scrapes counted
ROOT = Path(__file__).resolve().parents[2]


def test_trickling_clients_beside_a_real_prometheus(tmp_path: Path) -> None:
    listen = free_port()
    config = tmp_path / "spanwatch.yaml"
    config.write_text(json.dumps({"collector": {"listen": f"127.0.0.1:{listen}", "archive": None}}))
    log = (tmp_path / "collector.log").open("w")
    collector = subprocess.Popen(
        [sys.executable, "-m", "spanwatch.cli", "collect", "--config", str(config), "--workers", "1"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    flood: subprocess.Popen[bytes] | None = None
    try:
        deadline = time.monotonic() + 20
        while "serving metrics" not in (tmp_path / "collector.log").read_text():
            assert collector.poll() is None and time.monotonic() < deadline, "the collector did not start"
            time.sleep(0.1)
        seconds = str(SCRAPE_WINDOW + 8)
        flood = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.trickle_flood", str(listen), str(TRICKLERS), seconds],
            stdout=subprocess.PIPE,
            cwd=ROOT,
        )
        time.sleep(2)  # every slot taken before Prometheus starts
        scrape = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms"}}
        scrape["scrape_configs"] = [
            {"job_name": "sw", "static_configs": [{"targets": [f"127.0.0.1:{listen}"]}]}
        ]  # type: ignore[assignment]
        with launch(tmp_path, scrape) as prom:
            time.sleep(SCRAPE_WINDOW + 2)
            window = f'up{{job="sw"}}[{SCRAPE_WINDOW}s]'
            ok = query(prom, f"sum_over_time({window})")
            total = query(prom, f"count_over_time({window})")
            evicted = query(prom, 'spanwatch_http_connections_evicted_total{reason="incomplete_request"}')
        opened = json.loads(flood.communicate(timeout=30)[0])["opened"]
        assert ok and total, "Prometheus recorded no scrape"
        succeeded, scrapes = float(ok[0]["value"][1]), float(total[0]["value"][1])
        print(f"scrapes ok {succeeded:.0f} of {scrapes:.0f}; trickler connections opened {opened}")
        assert scrapes >= SCRAPE_WINDOW // 2  # Prometheus scraped on (each attempt counts, good or not)
        assert succeeded / scrapes >= 0.95, f"{succeeded:.0f} of {scrapes:.0f} scrapes succeeded"
        assert opened > TRICKLERS  # the flood went on: connections were displaced and reopened
        assert evicted and float(evicted[0]["value"][1]) > 0
    finally:
        if flood is not None and flood.poll() is None:
            stop_process(flood, 5)
        stop_process(collector, 10)
        log.close()
    assert "Traceback" not in (tmp_path / "collector.log").read_text()
