"""The forged-reply defences against the real ``snmpd``, with an on-path forger in front of it (issue 34).

A loopback proxy relays every request to Debian's snmpd, but first answers it itself with what an attacker
without keys can send: an unauthenticated Response (the downgrade of finding F8), an unauthenticated
unknown-engine Report with boots -1 (F9), a Response signed with a wrong key, and an unauthenticated
not-in-time-window Report, each copying the request's msgID, engine ID, boots, time and user from the
clear-text header. The forgeries always arrive first. Every poll must still succeed with snmpd's honest
values, no forged value may reach the samples (no false reboot from a forged sysUpTime), every forgery is
counted, and the target keeps polling normally afterwards.

Engine discovery itself is unauthenticated by design (RFC 3414 4): a forged discovery Report naming another
engine costs polls for as long as the attacker keeps answering first (as dropping the agent's replies
would), so the discovery probe gets only the forgeries a walker can tell apart: a Response (a Report is
due) and a time-window Report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from snmpd_agent import USERS, Agent, snmpd

from collector.config import SnmpConfig
from collector.sources.snmp import usm
from collector.sources.snmp.ber import TAG_TIMETICKS
from collector.sources.snmp.source import DROPPED, SnmpSource
from tests.collector.snmp_wire import SYS_UPTIME, pdu, plain_v3, report_pdu

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

FORGED_UPTIME = 7  # far below snmpd's: if taken, the device would read as rebooted
USER = next(u for u in USERS if u.name == "sha256aes")
WRONG_KEYS = usm.Credentials(USER.name.encode(), "SHA256", b"not-the-auth-key", "AES", b"not-the-priv-key")
POLLS = 4


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with snmpd(tmp_path_factory.mktemp("snmpd")) as running:
        yield running


def forgeries(request: bytes) -> list[bytes]:
    """What an on-path attacker without keys answers ``request`` with, before the agent does."""
    head = usm._parse(request).header  # msgID, engine ID, boots, time and user travel in clear
    m, engine, boots, etime, user = head.msg_id, head.engine_id, head.boots, head.time, head.user
    uptime = pdu(m, [(SYS_UPTIME, TAG_TIMETICKS, FORGED_UPTIME)])
    out = [
        plain_v3(m, 0, engine, boots, etime, user, uptime),  # downgrade: no MAC, no encryption
        plain_v3(m, 0, engine, 9, 0, user, report_pdu(m, usm.NOT_IN_TIME_WINDOW)),
    ]
    if head.flags & usm.FLAG_AUTH:
        # the engine poison of F9, outside discovery
        out.append(plain_v3(m, 0, b"\x80evil-engine", -1, 0, b"", report_pdu(m, usm.UNKNOWN_ENGINE_ID)))
        # signed with a guessed key: a wrong digest
        out.append(usm.wrap(WRONG_KEYS, usm.Header(m, head.level, engine, boots, etime, user), uptime))
    return out


class ForgingProxy(asyncio.DatagramProtocol):
    """Relays datagrams between one client and the agent, forging replies to every request first."""

    def __init__(self, agent_port: int) -> None:
        self.agent_port = agent_port
        self.transport: asyncio.DatagramTransport | None = None
        self.upstream: asyncio.DatagramTransport | None = None
        self.client: tuple[str, int] | None = None
        self.forging = True
        self.forged = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        assert self.transport is not None and self.upstream is not None
        self.client = addr
        if self.forging:
            for forged in forgeries(data):
                self.transport.sendto(forged, addr)
                self.forged += 1
        self.upstream.sendto(data)

    def from_agent(self, data: bytes) -> None:
        if self.transport is not None and self.client is not None:
            self.transport.sendto(data, self.client)


class _Upstream(asyncio.DatagramProtocol):
    def __init__(self, proxy: ForgingProxy) -> None:
        self.proxy = proxy

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.proxy.from_agent(data)


async def test_forged_replies_from_an_on_path_attacker_are_never_accepted(agent: Agent) -> None:
    loop = asyncio.get_running_loop()
    proxy = ForgingProxy(agent.port)
    listen, _ = await loop.create_datagram_endpoint(lambda: proxy, local_addr=("127.0.0.1", 0))
    upstream, _ = await loop.create_datagram_endpoint(
        lambda: _Upstream(proxy), remote_addr=("127.0.0.1", agent.port)
    )
    proxy.upstream = upstream
    cfg = SnmpConfig.model_validate(
        {
            "address": f"127.0.0.1:{listen.get_extra_info('sockname')[1]}",
            "version": "3",
            "user": USER.name,
            "auth_protocol": USER.auth,
            "auth_key_file": str(agent.key_file(USER, "auth")),
            "priv_protocol": USER.priv,
            "priv_key_file": str(agent.key_file(USER, "priv")),
            "modules": ["if_mib"],
            "timeout": "5s",
            "retries": 0,
        }
    )
    source = SnmpSource("dev", cfg)
    try:
        for _ in range(POLLS):
            samples = await source.poll()
            lo = [s for s in samples if ("interface", "lo") in s.labels]
            assert lo, "snmpd's honest answer for lo"
            assert all(s.raw is None or s.raw < 2**63 for s in lo)
        assert source.reboots == 0  # the forged sysUpTime never read as a reboot
        dropped = {dict(labels)["reason"]: n for _, labels, n in source.take_counts() if _ == DROPPED}
        assert sum(dropped.values()) == proxy.forged, (dropped, proxy.forged)
        assert {"security_level", "digest"} <= set(dropped), dropped
        proxy.forging = False
        assert [s for s in await source.poll() if ("interface", "lo") in s.labels]  # polls on as before
    finally:
        await source.close()
        listen.close()
        upstream.close()
