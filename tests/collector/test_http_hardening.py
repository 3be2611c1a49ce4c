"""Issue 16, items 7 and 9: a basic-auth brute force cannot starve scrapes; connections are capped; the
request line has a deadline; accept errors do not flood the log. Issue 34 point 2: clients trickling their
headers give way to complete requests."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from collector.exporters.http import EVICTED, ExporterServer, Limits, serve
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


async def test_incomplete_requests_beyond_the_cap_give_way_to_complete_ones() -> None:
    store = _store()
    srv = await serve(store, "127.0.0.1:0", None, Limits(max_connections=5, header_timeout=5))
    port = srv.address[1]
    busy = await _open_idle(port, 5)
    for w in busy:
        w.write(b"GET /met")  # a request under way, never finished
    try:
        await asyncio.sleep(0.2)
        statuses = [await asyncio.wait_for(_get(port, "", gzip=False), 5) for _ in range(10)]
        assert statuses == [200] * 10
        assert store.value(EVICTED, (("reason", "incomplete_request"),)) >= 1
        assert len(srv._connections) <= 5
    finally:
        for w in busy:
            w.close()
        srv.close()
        await srv.wait_closed()


async def test_every_slot_serving_gives_503_and_is_counted(caplog: pytest.LogCaptureFixture) -> None:
    store = _store()
    srv = await serve(store, "127.0.0.1:0", None, Limits(max_connections=2, header_timeout=5))
    port = srv.address[1]
    caplog.set_level(logging.WARNING, logger="collector.exporters.http")
    release = asyncio.Event()
    respond = srv._respond

    async def slow(request: Any) -> Any:
        await release.wait()
        return await respond(request)

    srv._respond = slow  # type: ignore[method-assign]
    serving = [asyncio.create_task(_get(port, "", gzip=False)) for _ in range(2)]
    try:
        await asyncio.sleep(0.3)
        statuses = []
        for _ in range(5):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            statuses.append(int((await asyncio.wait_for(reader.readuntil(b"\r\n"), 5)).split()[1]))
            writer.close()
        assert statuses == [503] * 5
        assert store.value("spanwatch_http_connections_rejected_total", ()) == 5
        assert len([r for r in caplog.records if "cap" in r.getMessage()]) == 1
        release.set()
        assert await asyncio.gather(*serving) == [200, 200]
    finally:
        release.set()
        srv.close()
        await srv.wait_closed()


async def test_trickling_clients_cannot_lock_out_scrapes() -> None:
    # Issue 34 point 2: 300 clients trickling their headers, reopened when closed, against the default
    # 256-connection cap; every scrape beside them must get in.
    store = _store()
    srv = await serve(store, "127.0.0.1:0", None)
    port = srv.address[1]
    stop = asyncio.Event()

    async def trickler() -> None:
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.01)
                continue
            try:
                writer.write(b"GET /metrics HTTP/1.1\r\n")
                while not stop.is_set() and not reader.at_eof():
                    writer.write(b"X-a: b\r\n")
                    await writer.drain()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(reader.read(1024), 0.5)
            except OSError:
                pass
            finally:
                writer.close()

    flood = [asyncio.create_task(trickler()) for _ in range(300)]
    try:
        await asyncio.sleep(2.0)  # every slot taken by tricklers
        statuses = []
        for _ in range(20):
            try:
                statuses.append(await asyncio.wait_for(_get(port, "", gzip=True), 2))
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                statuses.append(0)
            await asyncio.sleep(0.05)
        assert statuses.count(200) >= 19, statuses
        assert store.value(EVICTED, (("reason", "incomplete_request"),)) > 0
    finally:
        stop.set()
        await asyncio.gather(*flood, return_exceptions=True)
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
