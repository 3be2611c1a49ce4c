"""Ten targets behind one slow agent (issue 16 item 11): one request in flight per agent address.

The agent serves one request at a time and discards what arrives while it is busy (a control-plane
policer, a small socket buffer). Before issue 16 the ten pollers sent their requests together, nine of
every ten were lost, and every poll timed out: 0 of 10 devices exported.
"""

from __future__ import annotations

import asyncio

import pytest

from collector.clock import SystemClock
from collector.config import SnmpConfig
from collector.scheduler import Poller, Schedule
from collector.sources.snmp.ber import TAG_COUNTER64, TAG_OCTETS, TAG_TIMETICKS
from collector.sources.snmp.source import SnmpSource
from collector.sources.snmp.walk import parse_oid
from collector.store import Store
from tests.collector.snmp_wire import table_peer

pytestmark = pytest.mark.integration

IFX = "1.3.6.1.2.1.31.1.1.1"
DATA = {
    parse_oid("1.3.6.1.2.1.1.3.0"): (TAG_TIMETICKS, 100),
    **{parse_oid(f"{IFX}.1.{i}"): (TAG_OCTETS, f"Ethernet{i}".encode()) for i in (1, 2)},
    **{parse_oid(f"{IFX}.6.{i}"): (TAG_COUNTER64, 1000 * i) for i in (1, 2)},
}


async def test_ten_targets_behind_one_slow_agent_all_export(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMUNITY", "public")
    store = Store(SystemClock())
    with table_peer(DATA, service=0.004, drop_while_busy=True) as agent:
        cfg = SnmpConfig(
            address=f"127.0.0.1:{agent.port}",
            community_env="COMMUNITY",
            modules=("if_mib",),
            timeout="3s",
            retries=1,
        )
        pollers = [
            Poller(SnmpSource(f"dev{i}", cfg), store, Schedule(interval=10, timeout=3.0), SystemClock())
            for i in range(10)
        ]
        statuses = await asyncio.gather(*(p.poll_once() for p in pollers))
        for p in pollers:
            await p.source.close()
    assert statuses == ["success"] * 10, (statuses, agent.dropped)
    for i in range(10):
        key = (("device", f"dev{i}"), ("interface", "Ethernet2"))
        assert store.value("dci_interface_receive_bytes_total", key) == 2000
