"""A device whose Counter32 wraps and which reboots mid-run, over real UDP, beside a healthy neighbour.

Two SNMP agents (the simulated fabric's UDP agent, serving tables this test controls) are polled by the
real source through the scheduler into one store: the wrap gives no spike, the reboot restarts the series
and counts one discontinuity, and the neighbour's polls are unaffected throughout.
"""

from __future__ import annotations

import random

import pytest
from pysnmp.proto.rfc1902 import Counter32, Counter64, OctetString, TimeTicks

from collector.clock import FakeClock
from collector.config import Defaults, SnmpConfig
from collector.scheduler import Poller, Schedule
from collector.sources.snmp.ber import Oid
from collector.sources.snmp.source import SnmpSource
from collector.store import Store
from spanwatch.sim.snmp_agent import Table, serve

SYS_UPTIME: Oid = (1, 3, 6, 1, 2, 1, 1, 3, 0)
IF_DESCR: Oid = (1, 3, 6, 1, 2, 1, 2, 2, 1, 2, 1)
IF_IN_DISCARDS: Oid = (1, 3, 6, 1, 2, 1, 2, 2, 1, 13, 1)  # Counter32
IF_NAME: Oid = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 1, 1)
IF_HC_IN_OCTETS: Oid = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6, 1)  # Counter64


class Device:
    """The state one agent serves: uptime and two counters of interface 1."""

    def __init__(self) -> None:
        self.uptime = 1_000
        self.discards = 2**32 - 100
        self.octets = 10**12

    def table(self) -> Table:
        rows = sorted(
            [
                (SYS_UPTIME, TimeTicks(self.uptime)),
                (IF_DESCR, OctetString("Ethernet1")),
                (IF_IN_DISCARDS, Counter32(self.discards)),
                (IF_NAME, OctetString("Ethernet1")),
                (IF_HC_IN_OCTETS, Counter64(self.octets)),
            ]
        )
        return [oid for oid, _ in rows], [value for _, value in rows]


def _value(store: Store, device: str, metric: str) -> object:
    return store.value(metric, (("device", device), ("interface", "Ethernet1")))


async def test_wrap_and_reboot_mid_run_without_spikes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SW_COMMUNITY", "public")
    flaky, steady = Device(), Device()
    t1, port1 = await serve("public", flaky.table)
    t2, port2 = await serve("public", steady.table)
    clock, store = FakeClock(), Store()
    pollers = []
    for name, port in (("flaky", port1), ("steady", port2)):
        cfg = SnmpConfig.model_validate(
            {"address": f"127.0.0.1:{port}", "community_env": "SW_COMMUNITY", "modules": ["if_mib"]}
        )
        source = SnmpSource(name, cfg, Defaults(), clock)
        pollers.append(Poller(source, store, Schedule(10, 5), clock, random.Random(0)))
    try:
        await _poll_all(pollers)
        flaky.discards, flaky.uptime = 2**32 - 60, 1_500  # counting: the rate a wrap is judged by
        await _poll_all(pollers)
        flaky.discards, flaky.octets, flaky.uptime = 50, flaky.octets + 10**9, 2_000  # Counter32 wrapped
        steady.octets += 10**9
        await _poll_all(pollers)
        assert _value(store, "flaky", "dci_interface_receive_discards_total") == 2**32 + 50
        flaky.uptime, flaky.discards, flaky.octets = 5, 3, 7_000  # rebooted: uptime and counters restart
        steady.octets += 10**9
        await _poll_all(pollers)
        assert _value(store, "flaky", "dci_interface_receive_bytes_total") == 7_000
        assert _value(store, "flaky", "dci_interface_receive_discards_total") == 3
        resets = store.value(
            "dci_counter_discontinuities_total",
            (("device", "flaky"), ("metric", "dci_interface_receive_bytes_total")),
        )
        assert resets == 1
        assert _value(store, "steady", "dci_interface_receive_bytes_total") == 10**12 + 2 * 10**9
        for name in ("flaky", "steady"):
            polls = (("device", name), ("source", "snmp"), ("status", "success"))
            assert store.value("spanwatch_polls_total", polls) == 4
    finally:
        for poller in pollers:
            await poller.source.close()
        t1.close()
        t2.close()


async def _poll_all(pollers: list[Poller]) -> None:
    for poller in pollers:
        assert await poller.poll_once() == "success"
