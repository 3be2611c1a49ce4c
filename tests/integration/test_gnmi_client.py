"""Our gNMI client's one-shot reads (Capabilities, Get, ONCE, POLL) against the shipped server."""

from __future__ import annotations

import grpc
import pytest

from collector.sources.gnmi.client import GnmiClient, make_path, subscribe_request
from collector.sources.gnmi.paths import SubscriptionSpec, load_set
from spanwatch.sim.gnmi_server import GnmiServer
from tests.integration.gnmi_support import load_recording, recording, running

pytestmark = pytest.mark.integration


async def test_capabilities_get_once_and_poll() -> None:
    responses = load_recording(recording("issue_14530"))
    server = GnmiServer(responses)
    async with running(server) as port:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        client = GnmiClient(channel, (("username", "u"),))
        try:
            caps = await client.capabilities()
            assert caps.gNMI_version == "0.8.0"
            got = await client.get(["/interfaces"])
            assert len(got.notification) == 1
            subs = load_set("interfaces").subscriptions
            once = await client.once(subscribe_request(subs, mode="once"))
            assert [len(r.update.update) for r in once] == [15]
            rounds = [batch async for batch in client.poll(subscribe_request(subs, mode="poll"), rounds=3)]
            assert [len(b) for b in rounds] == [1, 1, 1]
        finally:
            await channel.close()
    assert server.metadata[0]["username"] == "u"


def test_stream_request_modes_and_intervals() -> None:
    subs = [
        SubscriptionSpec(path="/a/b[name=x]/c", mode="sample"),
        SubscriptionSpec(path="openconfig:/d", mode="on_change"),
    ]
    req = subscribe_request(
        subs,
        sample_interval_s=2.5,
        heartbeat_s=30,
        encoding="json_ietf",
        target="COUNTERS_DB",
        updates_only=True,
    )
    sl = req.subscribe
    assert sl.prefix.target == "COUNTERS_DB" and sl.updates_only and sl.encoding == 4
    a, d = sl.subscription
    assert (a.mode, a.sample_interval, a.heartbeat_interval) == (2, 2_500_000_000, 0)
    assert (d.mode, d.heartbeat_interval, d.path.origin) == (1, 30_000_000_000, "openconfig")
    assert dict(a.path.elem[1].key) == {"name": "x"}
    assert make_path("/x").origin == ""
