"""Issue 16, items 7 and 9: a basic-auth brute force cannot starve scrapes; connections are capped; the
request line has a deadline; accept errors do not flood the log."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from pathlib import Path

import bcrypt
import pytest

from collector.exporters.http import ExporterServer, Limits, serve
from collector.model import counter, labels
from collector.store import Store

pytestmark = pytest.mark.timeout(60)
PASSWORD = "s3cret"


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _store() -> Store:
    store = Store()
    lots = [counter("dci_interface_receive_bytes_total", labels(interface=f"Eth{i}"), i) for i in range(3000)]
    store.ingest("sw1", "snmp", lots, 0)
    return store


async def _get(port: int, auth: str, gzip: bool = True) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        head = f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nConnection: close\r\n"
        if gzip:
            head += "Accept-Encoding: gzip\r\n"
        writer.write((head + "\r\n").encode())
        await writer.drain()
        status = int((await reader.readuntil(b"\r\n")).split()[1])
        await reader.read()
        return status
    finally:
        writer.close()


async def test_brute_force_does_not_block_gzip_scrapes(tmp_path: Path) -> None:
    # Reproduction of F14: 200 concurrent wrong passwords made every gzip scrape time out.
    web = tmp_path / "web.yml"
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10)).decode()
    web.write_text(f"basic_auth_users:\n  prom: {hashed}\n")
    srv = await serve(_store(), "127.0.0.1:0", web)
    port = srv.address[1]
    try:
        assert await _get(port, _basic("prom", PASSWORD)) == 200  # the scraper's first check, then cached
        attack = [asyncio.create_task(_get(port, _basic("prom", f"guess{i}"))) for i in range(200)]
        await asyncio.sleep(0.2)  # let the guesses queue up
        latencies = []
        for _ in range(3):
            start = time.monotonic()
            assert await asyncio.wait_for(_get(port, _basic("prom", PASSWORD)), 5) == 200
            latencies.append(time.monotonic() - start)
        statuses = await asyncio.gather(*attack)
        assert set(statuses) == {401}
        assert max(latencies) < 1.0, latencies
    finally:
        srv.close()
        await srv.wait_closed()


async def _open_idle(port: int, n: int) -> list[asyncio.StreamWriter]:
    writers = []
    for _ in range(n):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writers.append(writer)
    return writers


async def test_idle_connections_are_capped_and_scrapes_still_get_in() -> None:
    store = _store()
    srv = await serve(store, "127.0.0.1:0", None, Limits(max_connections=20, idle_timeout=30))
    port = srv.address[1]
    idle = await _open_idle(port, 60)
    try:
        await asyncio.sleep(0.2)
        assert len(srv._connections) <= 20
        for _ in range(3):
            assert await asyncio.wait_for(_get(port, "", gzip=False), 5) == 200
    finally:
        for w in idle:
            w.close()
        srv.close()
        await srv.wait_closed()


async def test_busy_connections_beyond_the_cap_get_503_and_are_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = _store()
    srv = await serve(store, "127.0.0.1:0", None, Limits(max_connections=5, header_timeout=5))
    port = srv.address[1]
    caplog.set_level(logging.WARNING, logger="collector.exporters.http")
    busy = await _open_idle(port, 5)
    for w in busy:
        w.write(b"GET /met")  # a request under way: not idle, not evictable
    try:
        await asyncio.sleep(0.2)
        statuses = []
        for _ in range(10):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            statuses.append(int((await asyncio.wait_for(reader.readuntil(b"\r\n"), 5)).split()[1]))
            writer.close()
        assert statuses == [503] * 10
        assert store.value("spanwatch_http_connections_rejected_total", ()) == 10
        assert len([r for r in caplog.records if "cap" in r.getMessage()]) == 1
    finally:
        for w in busy:
            w.close()
        srv.close()
        await srv.wait_closed()


async def test_slow_request_line_is_cut_at_the_header_timeout() -> None:
    # Reproduction: one byte every 2 s on the request line held a connection for the 120 s idle timeout.
    srv = await serve(_store(), "127.0.0.1:0", None, Limits(header_timeout=0.5, idle_timeout=30))
    reader, writer = await asyncio.open_connection(*srv.address)
    start = time.monotonic()
    answer = b""
    try:
        for byte in b"GET /metrics HTTP/1.1":
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.1)
            if reader.at_eof() or time.monotonic() - start > 3:
                break
        answer = await asyncio.wait_for(reader.read(), 3)
    except ConnectionError:
        pass  # cut while we were still writing: what the test wants
    finally:
        writer.close()
        srv.close()
        await srv.wait_closed()
    assert time.monotonic() - start < 2.5
    assert answer in (b"",) or answer.startswith(b"HTTP/1.1 408")


async def test_accept_errors_are_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    srv = ExporterServer(Store())
    await srv.start("127.0.0.1", 0)
    loop = asyncio.get_running_loop()
    caplog.set_level(logging.ERROR)
    try:
        for _ in range(1000):
            loop.call_exception_handler(
                {"message": "socket.accept() out of system resource", "exception": OSError(24, "Too many")}
            )
        assert len([r for r in caplog.records if "accept" in r.getMessage()]) == 1
    finally:
        srv.close()
        await srv.wait_closed()
