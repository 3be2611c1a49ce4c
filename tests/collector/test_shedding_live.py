"""Shedding at the source against a real gRPC server on loopback (issue 33).

The server (``spanwatch.sim.gnmi_server.GnmiServer``) sends a round of interface counters every SAMPLE
interval the Subscribe asked for, freshly stamped. The collector's consumer is throttled (each response
costs it CPU spun in the drain) until it cannot keep up: the stream must be resubscribed with a longer
interval, which the server then uses, and the gauge must show it; once the throttle is lifted, it must
come back to the configured interval.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pygnmi.spec.v080 import gnmi_pb2

from collector.config import GnmiConfig
from collector.shedding import Shedder, ShedSettings
from collector.sources.gnmi.client import make_path
from collector.sources.gnmi.source import GnmiSource, Queued
from collector.store import Store
from spanwatch.sim.gnmi_server import GnmiServer, serve

pytestmark = pytest.mark.integration

INTERFACES = 20
DEV = (("device", "d"),)


class PacedByRequest(GnmiServer):  # type: ignore[misc]
    """Sends every interface's counters once per SAMPLE interval of the Subscribe being served; with
    ``burst`` rounds a send, each stamped when it was due (a sender starved of CPU that catches up)."""

    burst = 1

    async def _stream(self, context: Any) -> AsyncIterator[Any]:
        interval = self.requests[-1].subscribe.subscription[0].sample_interval / 1e9
        yield gnmi_pb2.SubscribeResponse(sync_response=True)
        r = 0
        next_at = time.monotonic()
        while True:
            due = time.time_ns() - int(interval * 1e9) * (self.burst - 1)
            for k in range(self.burst):
                r += 1
                for i in range(INTERFACES):
                    n = gnmi_pb2.Notification(
                        timestamp=due + int(interval * 1e9) * k,
                        prefix=make_path(f"/interfaces/interface[name=Et{i}]"),
                    )
                    n.update.add(
                        path=make_path("state/counters/in-octets"),
                        val=gnmi_pb2.TypedValue(uint_val=r * 1000),
                    )
                    yield gnmi_pb2.SubscribeResponse(update=n)
            next_at += interval * self.burst
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))


class Throttled(GnmiSource):
    """A source whose consumer spins ``cost`` seconds of CPU per response it ingests."""

    cost = 0.0

    def ingest_batch(self, store: Store, items: list[Queued]) -> None:
        end = time.perf_counter() + self.cost * len(items)
        while time.perf_counter() < end:
            pass
        super().ingest_batch(store, items)


def _requested(server: GnmiServer) -> float:
    return float(server.requests[-1].subscribe.subscription[0].sample_interval / 1e9)


async def _until(predicate: Any, within: float) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def test_a_stream_the_collector_cannot_keep_up_with_is_shed_then_restored(caplog: Any) -> None:
    caplog.set_level(logging.WARNING, logger="collector.sources.gnmi.source")
    server = PacedByRequest([])
    grpc_server, port = await serve(server)
    cfg = GnmiConfig.model_validate(
        {
            "address": f"127.0.0.1:{port}",
            "insecure": True,
            "subscriptions": ["interfaces"],
            "sample_interval": "100ms",
        }
    )
    # Short periods so the test runs in seconds; the reasons for the defaults are in ShedSettings.
    settings = ShedSettings(period=0.25, restore_hold=1.0, settle_intervals=3.0, start_grace=0.5)
    shedder = Shedder(settings)
    source = Throttled("d", cfg, shedder=shedder, max_sample_interval=1.0)
    source.cost = 0.008  # 20 responses per 100 ms x 8 ms = 1.6 s of work a second: over capacity
    store = Store()
    task = asyncio.create_task(source.run(store))
    try:
        await _until(lambda: server.subscribes >= 1 and source.responses > 0, within=10)
        assert _requested(server) == 0.1
        await _until(lambda: source.factor > 1, within=15)
        # A new Subscribe, not a redial. Its request, not the RPC's start: the server counts an RPC before
        # it reads the request, so between the two the last request read is still the first (a CI run on a
        # busy host read 0.1 there).
        await _until(lambda: len(server.requests) >= 2, within=5)
        assert _requested(server) == source.sample_interval > 0.1
        assert store.value("spanwatch_gnmi_sample_interval_seconds", DEV) == source.sample_interval
        assert store.value("spanwatch_gnmi_reconnects_total", DEV) == 0
        assert any("shedding load: sample interval 0.1s ->" in r.getMessage() for r in caplog.records)
        shed_at = store.value("spanwatch_gnmi_shed_updates_total", DEV)
        await _until(lambda: store.value("spanwatch_gnmi_shed_updates_total", DEV) > shed_at, within=5)  # type: ignore[operator]

        source.cost = 0.0  # the load falls
        await _until(lambda: source.factor == 1, within=40)  # slower on a loaded machine: lag guards restores
        await _until(lambda: _requested(server) == 0.1, within=5)
        assert store.value("spanwatch_gnmi_sample_interval_seconds", DEV) == 0.1
        assert any("load fell: sample interval" in r.getMessage() for r in caplog.records)
        assert store.value("spanwatch_target_up", (("device", "d"), ("source", "gnmi"))) == 1
        assert store.value("spanwatch_gnmi_reconnects_total", DEV) == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await grpc_server.stop(grace=None)
    assert not shedder.streams  # the stream left the shedder when it stopped


async def test_values_made_late_upstream_are_not_shed_by_a_process_with_time_to_spare(caplog: Any) -> None:
    """The sender releases its rounds four at a time, each stamped when it was due: every batch the
    collector reads is three intervals late, yet its loop waits for I/O most of the time. The backlog
    is the sender's, and a longer interval is not the collector's to ask for."""
    caplog.set_level(logging.WARNING, logger="collector.sources.gnmi.source")
    server = PacedByRequest([])
    server.burst = 4
    grpc_server, port = await serve(server)
    cfg = GnmiConfig.model_validate(
        {
            "address": f"127.0.0.1:{port}",
            "insecure": True,
            "subscriptions": ["interfaces"],
            "sample_interval": "50ms",
        }
    )
    shedder = Shedder(ShedSettings(period=0.25, settle_intervals=3.0, start_grace=0.5))
    source = GnmiSource("d", cfg, shedder=shedder, max_sample_interval=1.0)
    store = Store()
    worst: list[float] = []
    task = asyncio.create_task(source.run(store))
    try:
        await _until(lambda: source.responses > 0, within=10)
        for _ in range(16):  # 4 s: 16 periods, two of which in a row would have shed on lateness alone
            await asyncio.sleep(0.25)
            worst.append(store.value("spanwatch_ingest_backlog_seconds", (*DEV, ("source", "gnmi"))) or 0.0)  # type: ignore[arg-type]
        assert max(worst) >= 0.1  # the batches were late: 2-3 intervals of 50 ms
        assert source.factor == 1 and server.subscribes == 1
        assert store.value("spanwatch_gnmi_sample_interval_seconds", DEV) == 0.05
        assert not any("shedding load" in r.getMessage() for r in caplog.records)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await grpc_server.stop(grace=None)
