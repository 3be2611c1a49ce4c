"""The /metrics HTTP server: routes, keep-alive, gzip, limits, TLS and basic auth, on the test's loop."""

from __future__ import annotations

import asyncio
import base64
import gzip
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import bcrypt
import pytest

from collector.errors import ConfigError, SpanwatchError
from collector.exporters.http import Exporter, ExporterServer, Limits, accepts_gzip, parse_listen, serve
from collector.model import counter, labels
from collector.store import Store

RX = "dci_interface_receive_bytes_total"


@pytest.fixture
def store() -> Store:
    s = Store()
    s.ingest("sw1", "snmp", [counter(RX, labels(interface="Eth1"), 2**60 + 1)], 0)
    return s


@pytest.fixture
async def server(store: Store) -> AsyncIterator[ExporterServer]:
    srv = await serve(
        store, "127.0.0.1:0", None, Limits(header_timeout=0.3, idle_timeout=2.0, max_header_bytes=2048)
    )
    yield srv
    srv.close()
    await srv.wait_closed()


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, dict[str, str], bytes]:
    writer.write(request)
    await writer.drain()
    return await _read_response(reader, head=request.startswith(b"HEAD"))


async def _read_response(
    reader: asyncio.StreamReader, head: bool = False
) -> tuple[int, dict[str, str], bytes]:
    status_line = await reader.readuntil(b"\r\n")
    headers: dict[str, str] = {}
    while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
        name, _, value = line.decode().partition(":")
        headers[name.lower()] = value.strip()
    body = b"" if head else await reader.readexactly(int(headers["content-length"]))
    return int(status_line.split()[1]), headers, body


async def _connect(srv: ExporterServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = srv.address
    return await asyncio.open_connection(host, port)


async def test_routes_on_one_kept_alive_connection(server: ExporterServer) -> None:
    reader, writer = await _connect(server)
    status, headers, body = await _exchange(reader, writer, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert f'{RX}{{device="sw1",interface="Eth1"}} {2**60 + 1}'.encode() in body
    assert headers["connection"] == "keep-alive"
    status, headers, body = await _exchange(reader, writer, b"GET / HTTP/1.1\r\n\r\n")
    assert status == 200 and b'href="/metrics"' in body and headers["content-type"].startswith("text/html")
    status, _, body = await _exchange(reader, writer, b"GET /-/healthy HTTP/1.1\r\n\r\n")
    assert (status, body) == (200, b"OK\n")
    status, headers, _ = await _exchange(reader, writer, b"HEAD /metrics?x=1 HTTP/1.1\r\n\r\n")
    assert status == 200 and int(headers["content-length"]) > 0
    status, _, _ = await _exchange(reader, writer, b"GET /nope HTTP/1.1\r\n\r\n")
    assert status == 404
    status, headers, _ = await _exchange(reader, writer, b"DELETE /metrics HTTP/1.1\r\n\r\n")
    assert status == 405 and headers["allow"] == "GET, HEAD"
    status, headers, _ = await _exchange(
        reader, writer, b"GET /-/healthy HTTP/1.1\r\nConnection: close\r\n\r\n"
    )
    assert headers["connection"] == "close"
    assert await reader.read() == b""
    writer.close()


async def test_gzip_when_accepted(server: ExporterServer, store: Store) -> None:
    reader, writer = await _connect(server)
    request = b"GET /metrics HTTP/1.1\r\nAccept-Encoding: deflate, gzip;q=0.8\r\n\r\n"
    status, headers, body = await _exchange(reader, writer, request)
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert gzip.decompress(body).decode().count(RX) == 3
    writer.close()


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("gzip", True),
        ("GZIP;q=0.5", True),
        ("gzip;q=0", False),
        ("*", True),
        ("identity", False),
        ("", False),
    ],
)
def test_accepts_gzip(value: str, ok: bool) -> None:
    assert accepts_gzip(value) is ok


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 4000 + b"\r\n\r\n", 431),
        (b"GET /metrics HTTP/1.1\r\n" + b"X-A: b\r\n" * 400 + b"\r\n", 431),
        (b"GET /metrics HTTP/2.0\r\n\r\n", 505),
        (b"GARBAGE\r\n\r\n", 400),
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 413),
        (b"POST /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
        (b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", 400),
    ],
)
async def test_bad_requests_get_an_error_and_a_closed_connection(
    server: ExporterServer, request_bytes: bytes, status: int
) -> None:
    reader, writer = await _connect(server)
    got, headers, _ = await _exchange(reader, writer, request_bytes)
    assert got == status and headers["connection"] == "close"
    writer.close()


async def test_slow_headers_time_out(server: ExporterServer) -> None:
    reader, writer = await _connect(server)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finishes the header block
    status, _, _ = await asyncio.wait_for(_read_response(reader), 2)
    assert status == 408
    writer.close()


async def test_idle_connection_is_closed_and_close_cuts_connections(store: Store) -> None:
    srv = await serve(store, "127.0.0.1:0", None, Limits(idle_timeout=0.2))
    reader, writer = await _connect(srv)
    assert await asyncio.wait_for(reader.read(), 2) == b""  # idled out
    writer.close()
    reader, writer = await _connect(srv)
    await _exchange(reader, writer, b"GET /-/healthy HTTP/1.1\r\n\r\n")
    srv.close()
    await asyncio.wait_for(srv.wait_closed(), 2)
    assert await asyncio.wait_for(reader.read(), 2) == b""
    writer.close()


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6")
async def test_ipv6_literal(store: Store) -> None:
    try:
        srv = await serve(store, "[::1]:0", None)
    except OSError as e:
        pytest.skip(f"cannot bind ::1: {e}")
    host, _ = srv.address
    assert host == "::1"
    reader, writer = await _connect(srv)
    status, _, _ = await _exchange(reader, writer, b"GET /-/healthy HTTP/1.1\r\n\r\n")
    assert status == 200
    writer.close()
    srv.close()
    await srv.wait_closed()


@pytest.mark.parametrize(
    ("listen", "expected"),
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("[::1]:9", ("::1", 9)),
        (":9464", (None, 9464)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_parse_listen(listen: str, expected: tuple[str | None, int]) -> None:
    assert parse_listen(listen) == expected


@pytest.mark.parametrize("listen", ["9464", "host:port", "[::1:9", "h:70000"])
def test_parse_listen_rejects(listen: str) -> None:
    with pytest.raises(ConfigError, match=r"collector\.listen"):
        parse_listen(listen)


async def test_tls_and_basic_auth(store: Store, tmp_path: Path, tls_files) -> None:
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config: {{cert_file: {tls_files.cert}, key_file: {tls_files.key}}}\n"
        f"basic_auth_users: {{prom: '{hashed}'}}\n"
        "http_server_config: {headers: {X-Content-Type-Options: nosniff}}\n"
    )
    srv = await serve(store, "127.0.0.1:0", web)
    ctx = ssl.create_default_context(cafile=str(tls_files.ca))
    reader, writer = await asyncio.open_connection(*srv.address, ssl=ctx, server_hostname="localhost")
    status, headers, _ = await _exchange(reader, writer, b"GET /metrics HTTP/1.1\r\n\r\n")
    assert status == 401 and headers["www-authenticate"].startswith("Basic realm=")
    assert headers["x-content-type-options"] == "nosniff"
    bad = base64.b64encode(b"prom:nope")
    status, _, _ = await _exchange(
        reader, writer, b"GET /metrics HTTP/1.1\r\nAuthorization: Basic " + bad + b"\r\n\r\n"
    )
    assert status == 401
    good = base64.b64encode(b"prom:pw")
    for _ in range(2):  # the second time comes from the cache
        status, _, body = await _exchange(
            reader, writer, b"GET /metrics HTTP/1.1\r\nAuthorization: Basic " + good + b"\r\n\r\n"
        )
        assert status == 200 and RX.encode() in body
    writer.close()
    srv.close()
    await srv.wait_closed()


async def test_rate_limit(store: Store, tmp_path: Path) -> None:
    web = tmp_path / "web.yml"
    web.write_text("rate_limit: {interval: 10s, burst: 2}\n")
    srv = await serve(store, "127.0.0.1:0", web)
    reader, writer = await _connect(srv)
    statuses = [(await _exchange(reader, writer, b"GET /-/healthy HTTP/1.1\r\n\r\n"))[0] for _ in range(3)]
    assert statuses == [200, 200, 429]
    writer.close()
    srv.close()
    await srv.wait_closed()


async def test_an_address_taken_at_start_up_is_a_user_error() -> None:
    exporter = Exporter(Store())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SpanwatchError, match=f"cannot listen on 127.0.0.1:{port}"):
            await exporter.apply(f"127.0.0.1:{port}", None, None)
    assert exporter.server is None


async def test_a_reload_to_a_taken_address_serves_the_old_one_again() -> None:
    exporter = Exporter(Store())
    await exporter.apply("127.0.0.1:0", None, None)
    assert exporter.server is not None
    old_port = exporter.server.address[1]
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            with pytest.raises(OSError):
                await exporter.apply(
                    f"127.0.0.1:{taken.getsockname()[1]}", None, (f"127.0.0.1:{old_port}", None)
                )
        assert exporter.server is not None and exporter.server.address[1] == old_port
    finally:
        await exporter.close()
