"""SNMP failure modes on real sockets: silent agent, wrong community, garbage answers, unreachable port.

A garbage answer gives InvalidResponse (not timeout): the walker remembers undecodable datagrams and,
when no valid answer came before the deadline, reports that something answered but unusably.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
from snmp_agents import copy_recordings, snmpsim

from collector.config import SnmpConfig
from collector.errors import InvalidResponse, TimeoutError_
from collector.sources.snmp.source import SnmpSource

pytestmark = pytest.mark.integration


def udp_peer(reply: bytes | None) -> Iterator[int]:
    """A UDP socket on 127.0.0.1 that drops every request (``reply=None``) or answers ``reply``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                _, addr = sock.recvfrom(4096)
            except OSError:
                continue
            if reply is not None:
                sock.sendto(reply, addr)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(sock.getsockname()[1])
    stop.set()
    thread.join()
    sock.close()


@pytest.fixture
def silent() -> Iterator[int]:
    yield from udp_peer(None)


@pytest.fixture
def garbage() -> Iterator[int]:
    yield from udp_peer(b"\x30\x03\x02\x01\x09 this is not SNMP")


def source(port: int, monkeypatch: pytest.MonkeyPatch, community: str = "public") -> SnmpSource:
    monkeypatch.setenv("COMMUNITY", community)
    cfg = SnmpConfig(address=f"127.0.0.1:{port}", community_env="COMMUNITY", timeout="400ms", retries=1)
    return SnmpSource("dev", cfg)


async def test_silent_agent_times_out_quickly(silent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    src = source(silent, monkeypatch)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError_) as e:
        await src.poll()
    assert e.value.status == "timeout" and loop.time() - started < 2
    await src.close()


async def test_garbage_answer_is_invalid_response(garbage: int, monkeypatch: pytest.MonkeyPatch) -> None:
    src = source(garbage, monkeypatch)
    with pytest.raises(InvalidResponse) as e:
        await src.poll()
    assert e.value.status == "invalid_response"
    await src.close()


async def test_wrong_community_reads_as_timeout(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = copy_recordings(tmp_path_factory.mktemp("rec"), ["cumulus_cumulus"])
    with snmpsim(data) as port:
        src = source(port, monkeypatch, community="not-a-community")
        with pytest.raises(TimeoutError_):
            await src.poll()
        await src.close()


async def test_counters_move_between_polls(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path_factory.mktemp("moving")
    (data / "moving.snmprec").write_text(
        "1.3.6.1.2.1.1.3.0|67|100\n"
        "1.3.6.1.2.1.31.1.1.1.1.1|4|Ethernet1\n"
        "1.3.6.1.2.1.31.1.1.1.6.1|70:numeric|rate=12500000000\n"
    )
    with snmpsim(data) as port:
        src = source(port, monkeypatch, community="moving")
        first = [s for s in await src.poll() if s.metric == "dci_interface_receive_bytes_total"]
        await asyncio.sleep(0.3)
        second = [s for s in await src.poll() if s.metric == "dci_interface_receive_bytes_total"]
        await src.close()
    assert first[0].raw is not None and second[0].raw is not None and second[0].raw > first[0].raw
