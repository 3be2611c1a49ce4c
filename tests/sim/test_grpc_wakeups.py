"""gNMI streams keep flowing while the event loop turns slowly (a fabric catching up holds it for a model
chunk per turn): grpc.aio's wake-ups must not pile up until its poller thread blocks and every stream of
the process stops (``collector.grpc_wakeups``; seen live as gNMI samples missing for 2-10 s)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from collector import grpc_wakeups
from collector.config import GnmiConfig
from collector.sources.gnmi.client import open_channel
from spanwatch.sim.gnmi_server import GnmiServer, serve
from spanwatch.sim.runtime import SimulatedFabric
from spanwatch.sim.scenario import builtin

STREAMS = 8  # several streams finish several operations per loop turn: the wake-ups outpace the turns
TURN_S = 0.01  # how long each turn of the loop is held (a model chunk's worth of stepping)
RUN_S = 3.0
WINDOW_S = 0.5


async def _subscribe(port: int, received: list[float]) -> None:
    async def requests() -> AsyncIterator[gnmi_pb2.SubscribeRequest]:
        yield gnmi_pb2.SubscribeRequest(
            subscribe=gnmi_pb2.SubscriptionList(mode=gnmi_pb2.SubscriptionList.STREAM)
        )
        await asyncio.Event().wait()

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream(
            "/gnmi.gNMI/Subscribe",
            request_serializer=gnmi_pb2.SubscribeRequest.SerializeToString,
            response_deserializer=gnmi_pb2.SubscribeResponse.FromString,
        )
        async for _ in call(requests()):
            received.append(time.monotonic())


async def _held_loop() -> None:
    while True:
        time.sleep(TURN_S)  # noqa: ASYNC251 - on purpose: holds the loop, as a model chunk does
        await asyncio.sleep(0)


async def test_streams_keep_flowing_while_the_loop_turns_slowly() -> None:
    notes = [gnmi_pb2.SubscribeResponse(update=gnmi_pb2.Notification(timestamp=i + 1)) for i in range(20)]
    server, port = await serve(GnmiServer(notes, repeat=1_000_000))
    loop = asyncio.get_running_loop()
    try:
        assert grpc_wakeups.drain_wakeups(loop)
        found = grpc_wakeups.grpc_wakeup_socket(loop)
        assert found is not None
        wakeups = found[0]
        received: list[float] = []
        tasks = [asyncio.create_task(_subscribe(port, received)) for _ in range(STREAMS)]
        tasks.append(asyncio.create_task(_held_loop()))
        start = time.monotonic()
        most_pending = 0
        while time.monotonic() - start < RUN_S:
            await asyncio.sleep(0.05)
            most_pending = max(most_pending, grpc_wakeups.pending_bytes(wakeups))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await server.stop(None)
    # Unread wake-ups stay at about one turn's worth (undrained they reach the socket's limit, ~270 here,
    # and the streams stop for seconds).
    assert most_pending < 100, most_pending
    # Every stream-wide window of the run delivers (undrained: windows of nothing, 2 s long).
    settled = [t - start for t in received if t - start >= WINDOW_S]
    windows = {int(t / WINDOW_S) for t in settled}
    expected = set(range(1, int(RUN_S / WINDOW_S)))
    assert expected <= windows, sorted(expected - windows)


async def test_the_fabric_drains_grpc_wakeups_once_its_targets_serve() -> None:
    sim = SimulatedFabric(builtin(5.0, episodes=False))
    await sim.start()
    try:
        found = grpc_wakeups.grpc_wakeup_socket(asyncio.get_running_loop())
        assert found is not None
        assert getattr(found[1], "drains", False)
        assert grpc_wakeups.drain_wakeups(asyncio.get_running_loop())  # idempotent
    finally:
        await sim.stop()


async def test_the_collectors_channels_drain_grpc_wakeups() -> None:
    # The standalone collector shares the poller with nothing but its own streams: a busy loop with many
    # targets would stall them the same way.
    channel = open_channel(GnmiConfig(address="127.0.0.1:1", insecure=True))
    try:
        found = grpc_wakeups.grpc_wakeup_socket(asyncio.get_running_loop())
        assert found is not None and getattr(found[1], "drains", False)
    finally:
        await channel.close()
