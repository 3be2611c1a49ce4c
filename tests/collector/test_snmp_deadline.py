"""The poll deadline holds (finding F7) and a timed-out poll keeps what it completed (issue 16 item 11).

On the code before issue 16, ``asyncio.wait_for`` (3.11) returned a reply that landed together with the
cancellation and swallowed the cancel: against an agent that always has one more row, polls ran 30-151 s
against a 1.5 s deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import pytest

from collector.clock import SystemClock
from collector.config import Defaults, SnmpConfig
from collector.scheduler import Poller, Schedule
from collector.sources.snmp.ber import TAG_COUNTER64, TAG_OCTETS, TAG_TIMETICKS, Oid, VarBind
from collector.sources.snmp.source import SnmpSource
from collector.sources.snmp.transport import V2cWalker
from collector.sources.snmp.walk import MapWalker, parse_oid
from collector.store import Store
from tests.collector.snmp_wire import pdu, v2c_message

IFX = "1.3.6.1.2.1.31.1.1.1"


class EndlessAgent(asyncio.DatagramProtocol):
    """Answers every request at once with one more row under the first requested OID."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        from collector.sources.snmp.ber import decode_pdu, expect, read_int

        start, stop = expect(data, 0, len(data), 0x30)
        _, pos = read_int(data, start, stop)
        _, pos = expect(data, pos, stop, 0x04)
        _, rid, _, _, binds = decode_pdu(data, pos, stop, frozenset((0xA0, 0xA5)))
        row: list[VarBind] = [((*binds[0][0], 1), TAG_COUNTER64, 1)] if binds else []
        self.transport.sendto(v2c_message(b"public", pdu(rid, row)), addr)  # type: ignore[attr-defined]


async def endless_port() -> tuple[int, asyncio.BaseTransport]:
    transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
        EndlessAgent, local_addr=("127.0.0.1", 0)
    )
    return transport.get_extra_info("sockname")[1], transport


async def test_cancel_landing_with_the_reply_is_not_swallowed() -> None:
    """The exact race: the reply is delivered and the task cancelled in the same loop step."""
    port, agent = await endless_port()
    walker = V2cWalker("127.0.0.1", port, "public", 5.0, 0)
    _, proto = await walker._open()
    task = asyncio.ensure_future(walker.get([(1, 3, 6, 1, 2, 1, 1, 3, 0)]))
    deliver = proto.datagram_received

    def deliver_then_cancel(data: bytes, addr: tuple[str, int]) -> None:
        deliver(data, addr)
        task.cancel()  # the deadline fires while the reply is being handed over

    proto.datagram_received = deliver_then_cancel  # type: ignore[method-assign]
    with pytest.raises(asyncio.CancelledError):
        await task
    await walker.close()
    agent.close()


async def test_poll_deadline_holds_against_an_agent_with_endless_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COMMUNITY", "public")
    port, agent = await endless_port()
    cfg = SnmpConfig(address=f"127.0.0.1:{port}", community_env="COMMUNITY", timeout="2s", retries=0)
    store = Store(SystemClock())
    pollers = [
        Poller(SnmpSource(f"dev{i}", cfg), store, Schedule(interval=1.0, timeout=0.3), SystemClock())
        for i in range(6)  # several at once: the race needs a busy loop
    ]

    async def timed(p: Poller) -> float:
        started = time.monotonic()
        assert await p.poll_once() == "timeout"
        return time.monotonic() - started

    for _ in range(3):
        took = await asyncio.gather(*(timed(p) for p in pollers))
        assert max(took) < 0.3 + 0.5, took
    for p in pollers:
        await p.source.close()
    agent.close()


class StuckOn(MapWalker):
    """A map agent that never answers a walk under ``stuck`` (a vendor table that hangs the agent)."""

    def __init__(self, data: dict[Oid, tuple[int, object]], stuck: Oid) -> None:
        super().__init__(data)
        self.stuck = stuck

    async def bulk(self, oids: Sequence[Oid], max_repetitions: int) -> list[VarBind]:
        if any(o[: len(self.stuck)] == self.stuck for o in oids):
            await asyncio.sleep(3600)
        return await super().bulk(oids, max_repetitions)


async def test_timed_out_poll_keeps_completed_modules_and_names_the_slow_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    data = {
        parse_oid("1.3.6.1.2.1.1.3.0"): (TAG_TIMETICKS, 100),
        parse_oid(f"{IFX}.1.1"): (TAG_OCTETS, b"Ethernet1"),
        parse_oid(f"{IFX}.6.1"): (TAG_COUNTER64, 1000),
    }
    pause_table = parse_oid("1.3.6.1.2.1.10.7.10")  # EtherLike dot3PauseTable: the agent hangs on it
    cfg = SnmpConfig(address="192.0.2.1:161", community_env="X", modules=("if_mib", "etherlike"))
    source = SnmpSource("dev", cfg, Defaults(), SystemClock(), walker=StuckOn(data, pause_table))
    store = Store(SystemClock())
    poller = Poller(source, store, Schedule(interval=1.0, timeout=0.3), SystemClock())
    with caplog.at_level(logging.WARNING):
        assert await poller.poll_once() == "timeout"
    key = (("device", "dev"), ("interface", "Ethernet1"))
    assert store.value("dci_interface_receive_bytes_total", key) == 1000  # if_mib completed: exported
    assert "module etherlike ran out of time" in caplog.text
    assert store.value("spanwatch_target_up", (("device", "dev"), ("source", "snmp"))) == 0.0
