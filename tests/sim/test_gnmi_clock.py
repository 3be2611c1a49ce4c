"""A simulated switch samples on its own clock: a model catching up on the wall clock leaves no gap."""

from __future__ import annotations

import asyncio
import dataclasses

from pygnmi.spec.v080 import gnmi_pb2

from spanwatch.sim import snapshot
from spanwatch.sim.fabric import Fabric
from spanwatch.sim.gnmi_target import SimTarget, Subscription
from spanwatch.sim.scenario import builtin


async def test_a_model_catching_up_is_sampled_once_per_interval_of_its_own_time() -> None:
    first = snapshot.take(Fabric(builtin(10.0, episodes=False)), 0, 0.0)
    # 10 s of model time published as fast as the loop turns: a model catching up after a stall.
    snaps = [dataclasses.replace(first, time_ns=i * 100_000_000) for i in range(101)]
    now = [0]
    published = asyncio.Event()

    async def next_snapshot() -> None:
        await published.wait()

    target = SimTarget(lambda: snaps[now[0]], 0, 0, next_snapshot)
    sub = Subscription([], gnmi_pb2.SAMPLE, 1.0)
    stream = target._sim_stream([sub], updates_only=False)
    stamps: set[int] = set()

    async def read() -> None:
        async for response in stream:
            if response.HasField("update"):
                stamps.add(response.update.timestamp)

    reader = asyncio.create_task(read())
    for i in range(1, len(snaps)):
        await asyncio.sleep(0)
        now[0] = i
        published.set()
        published = asyncio.Event()
    await asyncio.sleep(0)
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    assert sorted(stamps) == [s * 1_000_000_000 for s in range(11)]
