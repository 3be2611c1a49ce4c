"""A real Prometheus scrapes the exporter over TLS with basic auth and computes the rate we fed.

The exporter runs on its own event loop in a thread (as it runs on the daemon's loop), a feeder on that loop
grows ``dci_interface_receive_bytes_total`` at a known rate, and Debian's ``/usr/bin/prometheus`` scrapes it
every second. Skipped when Prometheus is not installed; CI installs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from collector.exporters.http import serve
from collector.model import counter, labels
from collector.store import Store
from tests.integration.loop_thread import LoopThread
from tests.integration.prometheus_support import PROMETHEUS, SKIP_REASON, launch, query

pytestmark = pytest.mark.integration

RX = "dci_interface_receive_bytes_total"
RATE = 1.25e9  # bytes/s: a busy 10G port
START = 2**53  # past float64's exact range, as an 800G port gets within a day
USER, PASSWORD = "prometheus", "correct horse battery staple"


class ExporterThread(LoopThread):
    """The exporter plus a feeder that grows one counter at ``RATE``, on their own event loop."""

    def __init__(self, web: Path) -> None:
        super().__init__(name="exporter")
        self.web = web
        self.port: int | None = None

    async def main(self, halt: asyncio.Event) -> None:
        store = Store()
        server = await serve(store, "127.0.0.1:0", self.web)
        self.port = server.address[1]
        self.ready.set()
        t0 = time.monotonic()
        while not halt.is_set():
            raw = START + int(RATE * (time.monotonic() - t0))
            store.ingest(
                "dci1.site-a", "gnmi", [counter(RX, labels(interface="Ethernet1/1"), raw)], time.time_ns()
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(halt.wait(), 0.05)
        server.close()
        await server.wait_closed()


@pytest.fixture
def exporter(tmp_path: Path, tls_files) -> Iterator[ExporterThread]:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10)).decode()
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {tls_files.cert}\n  key_file: {tls_files.key}\n"
        f"basic_auth_users:\n  {USER}: '{hashed}'\n"
    )
    thread = ExporterThread(web)
    thread.start()
    thread.wait_ready()
    yield thread
    thread.stop()


@pytest.fixture
def prometheus(tmp_path: Path, tls_files, exporter: ExporterThread) -> Iterator[str]:
    if PROMETHEUS is None:
        pytest.skip(SKIP_REASON)
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{
            "job_name": "spanwatch",
            "scheme": "https",
            "tls_config": {"ca_file": str(tls_files.ca), "server_name": "localhost"},
            "basic_auth": {"username": USER, "password": PASSWORD},
            "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}],
        }],
    }  # fmt: skip
    with launch(tmp_path, config, log=tmp_path / "prometheus.log") as url:
        yield url


def _query(url: str, promql: str) -> list[float]:
    return [float(r["value"][1]) for r in query(url, promql) or []]


def _wait(check, seconds: float, message: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    log = (tmp_path / "prometheus.log").read_text()[-3000:]
    pytest.fail(f"{message}\nPrometheus log:\n{log}")


def test_prometheus_scrapes_over_tls_with_basic_auth(
    prometheus: str, exporter: ExporterThread, tls_files, tmp_path: Path
) -> None:
    _wait(lambda: _query(prometheus, 'up{job="spanwatch"}') == [1.0], 15, "target never came up", tmp_path)
    # rate() under-reports a series younger than its window (it extrapolates only half an interval past
    # the first sample), so wait until the series is well older than the 5 s window.
    _wait(
        lambda: _query(prometheus, f"count_over_time({RX}[10s])")[:1] >= [8.0],
        20,
        "too few samples",
        tmp_path,
    )
    (rate,) = _query(prometheus, f"rate({RX}[5s])")
    assert rate == pytest.approx(RATE, rel=0.05)
    assert _query(prometheus, 'up{job="spanwatch"}') == [1.0]

    # Without credentials the exporter answers 401 with a challenge.
    ctx = ssl.create_default_context(cafile=str(tls_files.ca))
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"https://localhost:{exporter.port}/metrics", context=ctx, timeout=5)
    assert e.value.code == 401
    assert e.value.headers["WWW-Authenticate"].startswith("Basic")
    e.value.close()
