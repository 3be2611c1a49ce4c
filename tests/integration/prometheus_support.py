"""A real Prometheus (Debian's) for the board tests: start it on loopback with the spanwatch rules, query it.

The rules file is copied with its 30 s group interval cut to 1 s, and the global scrape and evaluation
intervals are 1 s, so recording rules and alert states follow within seconds of the data.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spanwatch.sim.commands import free_port
from tests.deploy.promql import RULES
from tests.integration.processes import stop_process

PROMETHEUS = shutil.which("prometheus")
SKIP_REASON = "prometheus is not installed (apt-get install prometheus)"


def fast_rules(tmp: Path) -> Path:
    """The spanwatch rules, evaluated every second instead of every 30 s."""
    rules = tmp / "spanwatch.rules.yml"
    rules.write_text((RULES / "spanwatch.rules.yml").read_text().replace("interval: 30s", "interval: 1s"))
    return rules


@contextmanager
def prometheus(tmp: Path, targets: list[str], job: str = "spanwatch") -> Iterator[str]:
    """Run Prometheus scraping ``targets`` (``host:port``) every second with the spanwatch rules.

    Yields its base URL once it answers ``/-/ready``; stops it on exit.
    """
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
        "rule_files": [str(fast_rules(tmp))],
        "scrape_configs": [{"job_name": job, "honor_labels": True, "static_configs": [{"targets": targets}]}],
    }
    with launch(tmp, config) as url:
        yield url


@contextmanager
def launch(tmp: Path, config: dict[str, Any], log: Path | None = None) -> Iterator[str]:
    """Run Prometheus with ``config`` (written to ``tmp``), its output to ``log`` (or discarded).

    Its storage is ``tmp/tsdb``: blocks put there beforehand (``promtool tsdb create-blocks-from``) are
    served. Yields its base URL once it answers ``/-/ready``; stops it on exit.
    """
    assert PROMETHEUS is not None, SKIP_REASON
    (tmp / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    address = f"127.0.0.1:{free_port()}"
    with contextlib.ExitStack() as stack:
        out = subprocess.DEVNULL if log is None else stack.enter_context(log.open("w"))
        proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address={address}", "--log.level=warn"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://{address}"
        try:
            deadline = time.monotonic() + 20
            while _get(f"{url}/-/ready") is None:
                assert proc.poll() is None, f"prometheus exited with {proc.returncode}{_tail(log)}"
                assert time.monotonic() < deadline, f"prometheus did not become ready{_tail(log)}"
                time.sleep(0.1)
            yield url
        finally:
            stop_process(proc, 10)


def _tail(log: Path | None) -> str:
    return "" if log is None else "\nPrometheus log:\n" + log.read_text()[-3000:]


def _get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return bytes(r.read())
    except OSError:
        return None


def query(url: str, promql: str) -> list[dict[str, Any]] | None:
    """The instant-query result of ``promql`` (None when Prometheus rejects it or does not answer)."""
    body = _get(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
    return None if body is None else list(json.loads(body)["data"]["result"])


def alerts(url: str) -> list[dict[str, Any]]:
    """Prometheus's active alerts (pending and firing), from ``/api/v1/alerts``."""
    body = _get(f"{url}/api/v1/alerts")
    return [] if body is None else list(json.loads(body)["data"]["alerts"])
