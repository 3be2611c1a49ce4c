"""The gNMI supervisor against misbehaving targets: no sync_response, a stream that ends, UNIMPLEMENTED,
a stall, garbage on the wire, TLS with credentials, and a soak of hundreds of redials."""

from __future__ import annotations

import asyncio
import gc
import logging
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import psutil
import pytest

from collector.config import GnmiConfig
from collector.sources.gnmi.source import GnmiSource
from collector.sources.gnmi.timing import Backoff
from collector.store import Store
from spanwatch.sim.gnmi_server import GnmiServer
from tests.integration.gnmi_support import config, load_recording, recording, running, until

pytestmark = pytest.mark.integration
UP = ("spanwatch_target_up", (("device", "d"), ("source", "gnmi")))
RECONNECTS = ("spanwatch_gnmi_reconnects_total", (("device", "d"),))


@pytest.fixture
def tls_pair(tls_files: Any) -> tuple[Any, Any, Any]:
    """(CA, certificate, key): the certificate serves as both server and client identity (mTLS)."""
    return tls_files.ca, tls_files.cert, tls_files.key


def fast_backoff(initial: float = 0.01, cap: float = 0.05) -> Backoff:
    return Backoff(initial, cap, rng=random.Random(1))


@asynccontextmanager
async def streaming(cfg: GnmiConfig, store: Store, **kw: Any) -> AsyncIterator[GnmiSource]:
    kw.setdefault("backoff", fast_backoff())
    source = GnmiSource("d", cfg, **kw)
    task = asyncio.create_task(source.run(store))
    try:
        yield source
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def responses() -> list[Any]:
    return load_recording(recording("issue_14530"))


async def test_stream_without_sync_response_still_delivers() -> None:
    store = Store()
    async with (
        running(GnmiServer(responses(), sync=False)) as port,
        streaming(config(port, ("interfaces",)), store) as source,
    ):
        await until(lambda: source.responses >= 1)
        assert store.value(*UP) == 1
        assert (
            store.value("dci_interface_receive_bytes_total", (("device", "d"), ("interface", "Ethernet35")))
            == 0
        )
        assert source.status == "streaming"


async def test_stream_closed_midway_is_redialled() -> None:
    store = Store()
    many = load_recording(recording("tagging_subinterfaces"))
    server = GnmiServer(many, close_after=3)
    async with running(server) as port, streaming(config(port, ("interfaces",)), store):
        await until(lambda: server.subscribes >= 3)
        await until(lambda: (store.value(*RECONNECTS) or 0) >= 2)


async def test_unimplemented_stops_without_a_retry_storm(caplog: pytest.LogCaptureFixture) -> None:
    store = Store()
    server = GnmiServer(error=grpc.StatusCode.UNIMPLEMENTED)
    caplog.set_level(logging.ERROR, logger="collector.sources.gnmi.source")
    async with running(server) as port, streaming(config(port, ("interfaces",)), store) as source:
        await until(lambda: source.status.startswith("failed"))
        await asyncio.sleep(0.3)
        assert server.subscribes == 1
        assert store.value(*UP) == 0
        assert "UNIMPLEMENTED" in source.status
        assert any(
            "gnmi d (127.0.0.1:" in r.getMessage() and "UNIMPLEMENTED" in r.getMessage()
            for r in caplog.records
        )


async def test_permission_denied_with_no_retry_ends_the_source() -> None:
    server = GnmiServer(error=grpc.StatusCode.PERMISSION_DENIED)
    async with running(server) as port:
        source = GnmiSource("d", config(port, ("interfaces",)), permanent_retry=None)
        await asyncio.wait_for(source.run(Store()), 5)
    assert server.subscribes == 1 and "PERMISSION_DENIED" in source.status


async def test_stalled_stream_is_detected_and_redialled() -> None:
    store = Store()
    server = GnmiServer(responses(), stall_after=1, sync=False)
    async with running(server) as port:
        cfg = config(port, ("interfaces",), interval="100ms")
        async with streaming(cfg, store, stall_floor=0.3) as source:
            await until(lambda: server.subscribes >= 2, within=5)
            assert (store.value(*RECONNECTS) or 0) >= 1
            assert source.stall_timeout == pytest.approx(0.3)


async def test_garbage_bytes_give_unavailable_and_backoff() -> None:
    connections = 0

    async def junk(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        writer.write(b"\x00\xffthis is not HTTP/2 at all\r\n" * 20)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(junk, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = Store()
    try:
        async with streaming(config(port, ("interfaces",)), store, backoff=fast_backoff(0.05, 0.2)) as source:
            await until(lambda: source.status.startswith("backoff: UNAVAILABLE"), within=5)
            await asyncio.sleep(1.0)
            assert store.value(*UP) == 0
            # 1 s of redials at 0.05 s doubling to 0.2 s (jittered) is a handful, not a storm.
            assert 2 <= connections <= 25
    finally:
        server.close()
        await server.wait_closed()


async def test_tls_with_username_and_password(tls_pair: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ca, cert, key = tls_pair
    monkeypatch.setenv("GNMI_USER", "alice")
    monkeypatch.setenv("GNMI_PASS", "s3cret")
    creds = grpc.ssl_server_credentials(
        [(key.read_bytes(), cert.read_bytes())], root_certificates=ca.read_bytes(), require_client_auth=True
    )
    server = GnmiServer(responses())
    store = Store()
    async with running(server, credentials=creds) as port:
        cfg = GnmiConfig.model_validate(
            {
                "address": f"localhost:{port}",
                "subscriptions": ["interfaces"],
                "tls": {"ca_file": str(ca), "cert_file": str(cert), "key_file": str(key)},
                "username_env": "GNMI_USER",
                "password_env": "GNMI_PASS",
            }
        )
        async with streaming(cfg, store) as source:
            await until(lambda: source.responses >= 1)
    assert server.metadata[0]["username"] == "alice" and server.metadata[0]["password"] == "s3cret"


async def test_soak_hundreds_of_redials_keep_memory_flat() -> None:
    store = Store()
    server = GnmiServer(responses(), close_after=1, repeat=2)
    proc = psutil.Process()
    async with running(server) as port:
        cfg = config(port, ("interfaces",))
        async with streaming(cfg, store, backoff=Backoff(0.0005, 0.002, rng=random.Random(3))):
            await until(lambda: server.subscribes >= 200, within=30)
            gc.collect()
            before = proc.memory_info().rss
            start = server.subscribes
            await until(lambda: server.subscribes >= start + 1000, within=40)
            gc.collect()
            grown = proc.memory_info().rss - before
    assert (store.value(*RECONNECTS) or 0) >= 1000
    assert grown < 8 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 1000 redials"
