"""Link probing: the window's series in the store, loss, and ICMP without permission (a status, no crash)."""

from __future__ import annotations

import asyncio

import pytest

from collector import config as configuration
from collector.clock import SystemClock
from collector.config import ProbeConfig, ProbeTarget
from collector.probes import icmp, prober, twamp
from collector.store import Store

LABELS = (("link", "l1"), ("method", "twamp"), ("target", "far"))


async def test_a_window_exports_rtt_stats_jitter_one_way_and_loss() -> None:
    reflector = twamp.Reflector("127.0.0.1", 0, delay_s=lambda: 0.001)
    reflector.start()
    store = Store()
    target = ProbeTarget(address=f"127.0.0.1:{reflector.port}", name="far")
    p = prober.TargetProber(
        "l1", target, ProbeConfig(interval="200ms", count=5, targets=(target,)), store, SystemClock()
    )
    try:
        p.export(await p.window())
        rtt_min = store.value("dci_link_rtt_seconds_min", LABELS)
        rtt_avg = store.value("dci_link_rtt_seconds_avg", LABELS)
        rtt_max = store.value("dci_link_rtt_seconds_max", LABELS)
        assert isinstance(rtt_min, float) and isinstance(rtt_avg, float) and isinstance(rtt_max, float)
        assert 0.002 <= rtt_min <= rtt_avg <= rtt_max < 0.05
        assert store.value(prober.LOSS, LABELS) == 0.0
        assert isinstance(store.value(prober.JITTER, LABELS), float)
        forward = store.value("dci_link_one_way_delay_seconds_avg", (*LABELS, ("direction", "forward")))
        assert isinstance(forward, float) and forward >= 0.001
        assert store.value(prober.PROBES, (*LABELS, ("status", "success"))) == 5
    finally:
        p.close()
        reflector.close()
    assert store.value(prober.RTT, LABELS) is None  # the series go with the prober


async def test_no_answer_is_loss_and_withdraws_the_round_trip() -> None:
    reflector = twamp.Reflector("127.0.0.1", 0)
    port = reflector.port
    reflector.close()  # nothing listens there now: port unreachable
    store = Store()
    target = ProbeTarget(address=f"127.0.0.1:{port}", name="far")
    p = prober.TargetProber(
        "l1", target, ProbeConfig(interval="100ms", count=2, targets=(target,)), store, SystemClock()
    )
    store.set(prober.RTT, LABELS, 0.5)  # a previous window's figure
    p.export(await p.window())
    assert store.value(prober.LOSS, LABELS) == 1.0
    assert store.value(prober.RTT, LABELS) is None
    assert store.value(prober.PROBES, (*LABELS, ("status", "unreachable"))) == 2
    p.close()


async def test_icmp_without_permission_is_a_status_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def refused(self: icmp.IcmpSender, wait_s: float) -> float | None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(icmp.IcmpSender, "probe", refused)
    store = Store()
    target = ProbeTarget(address="127.0.0.1", method="icmp", name="far")
    p = prober.TargetProber(
        "l1", target, ProbeConfig(interval="50ms", count=3, targets=(target,)), store, SystemClock()
    )
    p.export(await p.window())
    labels = (("link", "l1"), ("method", "icmp"), ("target", "far"))
    assert store.value(prober.PROBES, (*labels, ("status", "no_permission"))) == 3
    assert store.value(prober.LOSS, labels) is None  # nothing was sent: no loss figure
    assert sum("no permission" in r.getMessage() for r in caplog.records) == 1  # said once, with the fix
    assert "ping_group_range" in caplog.text
    p.close()


async def test_icmp_to_loopback_measures_a_sub_millisecond_round_trip() -> None:
    sender = icmp.IcmpSender("127.0.0.1")
    try:
        rtts = [await sender.probe(1.0) for _ in range(3)]
    except PermissionError:
        pytest.skip("this machine allows neither raw nor datagram ICMP sockets")
    finally:
        sender.close()
    assert all(r is not None and 0 < r < 0.001 for r in rtts[1:])


async def test_probes_follow_the_config() -> None:
    reflector = twamp.Reflector("127.0.0.1", 0)
    reflector.start()
    store = Store()
    probes = prober.Probes(store, SystemClock())
    raw = {
        "targets": [{"name": "d1", "snmp": {"address": "127.0.0.1:1", "community_env": "HOME"}}],
        "links": [
            {
                "name": "l1",
                "site_a": "a",
                "site_b": "b",
                "distance_km": 10,
                "members": [{"device": "d1", "interface": "e1"}],
                "probe": {
                    "interval": "200ms",
                    "count": 2,
                    "targets": [{"address": f"127.0.0.1:{reflector.port}", "name": "far"}],
                },
            }
        ],
    }
    try:
        probes.apply(configuration.parse(raw))
        await asyncio.sleep(0.5)
        assert store.value("dci_link_rtt_seconds_avg", LABELS) is not None
        probes.apply(configuration.parse({**raw, "links": []}))
        await asyncio.sleep(0.05)
        assert store.value("dci_link_rtt_seconds_avg", LABELS) is None
    finally:
        await probes.stop()
        reflector.close()
