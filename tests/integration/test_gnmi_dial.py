"""Dial-time behaviour of the gNMI source: encoding negotiation through Capabilities, and target_up over
several streams of one target."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from pygnmi.spec.v080 import gnmi_pb2

from collector.sources.gnmi.paths import load_set
from collector.sources.gnmi.source import GnmiSource, choose_encoding
from collector.sources.gnmi.timing import Backoff
from collector.store import Store
from spanwatch.sim.gnmi_server import GnmiServer
from tests.integration.gnmi_support import config, load_recording, recording, running, until

pytestmark = pytest.mark.integration
UP = ("spanwatch_target_up", (("device", "d"), ("source", "gnmi")))
JSON, IETF, PROTO = gnmi_pb2.JSON, gnmi_pb2.JSON_IETF, gnmi_pb2.PROTO


@pytest.mark.parametrize(
    ("wanted", "supported", "expected"),
    [
        ("proto", [JSON, IETF, PROTO], "proto"),
        ("proto", [JSON, IETF], "json_ietf"),
        ("json", [PROTO, JSON], "json"),
        ("json_ietf", [JSON], "json"),
        ("proto", [], "proto"),  # nothing listed: unknown, keep the configured one
        ("proto", [gnmi_pb2.ASCII], "proto"),  # nothing we speak: let the target refuse the subscription
    ],
)
def test_choose_encoding(wanted: str, supported: list[int], expected: str) -> None:
    assert choose_encoding(wanted, supported) == expected


async def run_source(source: GnmiSource, store: Store) -> asyncio.Task[None]:
    return asyncio.create_task(source.run(store))


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_falls_back_to_a_supported_encoding(caplog: pytest.LogCaptureFixture) -> None:
    server = GnmiServer(load_recording(recording("issue_14530")), encodings=[JSON, IETF])
    caplog.set_level(logging.WARNING, logger="collector.sources.gnmi.source")
    async with running(server) as port:
        source = GnmiSource("d", config(port, ("interfaces",)))
        task = await run_source(source, Store())
        await until(lambda: source.responses >= 1)
        await stop(task)
    assert server.requests[0].subscribe.encoding == IETF
    assert any("does not support proto encoding; using json_ietf" in r.getMessage() for r in caplog.records)


async def test_target_without_capabilities_gets_the_configured_encoding() -> None:
    server = GnmiServer(
        load_recording(recording("issue_14530")), capabilities_error=grpc.StatusCode.UNIMPLEMENTED
    )
    async with running(server) as port:
        source = GnmiSource("d", config(port, ("interfaces",)))
        store = Store()
        task = await run_source(source, store)
        await until(lambda: source.responses >= 1)
        await stop(task)
    assert server.requests[0].subscribe.encoding == PROTO
    assert store.value(*UP) == 1


class OneTargetRefused(GnmiServer):
    """Serves prefix target A; refuses streams for prefix target B while ``refuse_b`` is set."""

    refuse_b = True
    refused = 0

    async def Subscribe(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        first = await anext(aiter(request_iterator))
        if first.subscribe.prefix.target == "B" and self.refuse_b:
            self.refused += 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "B is down")

        async def replay() -> AsyncIterator[Any]:
            yield first
            async for r in request_iterator:
                yield r

        async for r in super().Subscribe(replay(), context):
            yield r


async def test_target_up_only_while_every_stream_is_up() -> None:
    base = load_set("interfaces")
    sets = [dataclasses.replace(base, target="A"), dataclasses.replace(base, target="B")]
    server = OneTargetRefused(load_recording(recording("issue_14530")))
    store = Store()
    async with running(server) as port:
        source = GnmiSource("d", config(port, ("interfaces",)), sets=sets, backoff=Backoff(0.02, 0.05))
        task = await run_source(source, store)
        await until(lambda: source.responses >= 1 and server.refused >= 3)  # A streams, B keeps failing
        assert store.value(*UP) == 0
        server.refuse_b = False
        await until(lambda: store.value(*UP) == 1)
        await stop(task)
