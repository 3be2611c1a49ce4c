"""Test-side SNMP peers and message builders: what an agent (honest or hostile) puts on the wire.

The builders encode Response/Report PDUs with values (the collector only encodes requests); the peers
are small loopback UDP agents: ``V3Peer`` answers SNMPv3 per a script (forged replies included) and
``TablePeer`` serves a variable map over SNMPv2c, optionally slowly and one request at a time.
"""

from __future__ import annotations

import asyncio
import bisect
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from collector.sources.snmp import usm
from collector.sources.snmp.ber import (
    REPORT,
    TAG_COUNTER32,
    TAG_COUNTER64,
    TAG_GAUGE32,
    TAG_INTEGER,
    TAG_OID,
    TAG_TIMETICKS,
    BerError,
    Oid,
    VarBind,
    decode_pdu,
    encode_int,
    encode_oid,
    expect,
    read_int,
    tlv,
)

RESPONSE = 0xA2
SYS_UPTIME: Oid = (1, 3, 6, 1, 2, 1, 1, 3, 0)
_UNSIGNED = (TAG_COUNTER32, TAG_GAUGE32, TAG_TIMETICKS, TAG_COUNTER64)


def value_tlv(tag: int, value: object) -> bytes:
    """The BER TLV of one varbind value."""
    if tag == TAG_INTEGER:
        assert isinstance(value, int)
        return encode_int(value)
    if tag in _UNSIGNED:
        assert isinstance(value, int)
        return tlv(
            tag, value.to_bytes(value.bit_length() // 8 + 1, "big")
        )  # leading 0 when the top bit is set
    if tag == TAG_OID:
        assert isinstance(value, tuple)
        return tlv(tag, encode_oid(value))
    if value is None:
        return tlv(tag, b"")
    assert isinstance(value, bytes)
    return tlv(tag, value)


def pdu(request_id: int, binds: list[VarBind], tag: int = RESPONSE, status: int = 0, index: int = 0) -> bytes:
    """A Response (or Report) PDU TLV."""
    body = b"".join(tlv(0x30, tlv(TAG_OID, encode_oid(o)) + value_tlv(t, v)) for o, t, v in binds)
    return tlv(tag, encode_int(request_id) + encode_int(status) + encode_int(index) + tlv(0x30, body))


def v2c_message(community: bytes, request_pdu: bytes) -> bytes:
    """An SNMPv2c message around a PDU."""
    return tlv(0x30, encode_int(1) + tlv(0x04, community) + request_pdu)


def report_pdu(request_id: int, counter: int, count: int = 1) -> bytes:
    """A Report naming usmStats counter ``counter`` (usm.UNKNOWN_ENGINE_ID...)."""
    return pdu(request_id, [((*usm.USM_STATS, counter, 0), TAG_COUNTER32, count)], tag=REPORT)


def plain_v3(
    msg_id: int, flags: int, engine_id: bytes, boots: int, etime: int, user: bytes, body: bytes
) -> bytes:
    """An SNMPv3 message with no MAC and no encryption, any field value allowed (forgeries)."""
    sec = tlv(
        0x30,
        tlv(0x04, engine_id) + encode_int(boots) + encode_int(etime) + tlv(0x04, user) + tlv(0x04, b"") * 2,
    )
    head = tlv(0x30, encode_int(msg_id) + encode_int(65507) + tlv(0x04, bytes((flags,))) + encode_int(3))
    scoped = tlv(0x30, tlv(0x04, engine_id) + tlv(0x04, b"") + body)
    return tlv(0x30, encode_int(3) + head + tlv(0x04, sec) + scoped)


def request_flags(buf: bytes) -> int:
    """msgFlags of a v3 request."""
    start, stop = expect(buf, 0, len(buf), 0x30)
    _, pos = read_int(buf, start, stop)
    g_start, g_end = expect(buf, pos, stop, 0x30)
    _, p = read_int(buf, g_start, g_end)
    _, p = read_int(buf, p, g_end)
    f_start, _ = expect(buf, p, g_end, 0x04)
    return buf[f_start]


@dataclass
class V3Peer(asyncio.DatagramProtocol):
    """A loopback SNMPv3 agent that answers each request per ``script`` (which may forge replies).

    The default script is honest: discovery gets a usmStatsUnknownEngineIDs Report, every other request
    a Response with sysUpTime = ``uptime`` at the request's security level.
    """

    creds: usm.Credentials
    engine_id: bytes = bytes.fromhex("80001f8880aabbccddeeff0011")
    boots: int = 7
    time: int = 1000
    uptime: int = 4242
    script: Callable[[V3Peer, int, int], list[bytes]] | None = None
    requests: list[int] = field(default_factory=list)  # msgFlags of every request seen
    transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a datagram endpoint's transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        msg_id, flags = usm.msg_id_of(data), request_flags(data)
        assert msg_id is not None and self.transport is not None
        self.requests.append(flags)
        for reply in (self.script or honest)(self, msg_id, flags):
            self.transport.sendto(reply, addr)

    def reply(self, msg_id: int, level: int, body: bytes, **header: object) -> bytes:
        """A reply at ``level`` (auth/priv bits) whose header fields can be overridden (forgeries)."""
        fields: dict[str, object] = {
            "msg_id": msg_id,
            "flags": level,
            "engine_id": self.engine_id,
            "boots": self.boots,
            "time": self.time,
            "user": self.creds.user,
        }
        fields.update(header)
        return usm.wrap(self.creds, usm.Header(**fields), body)  # type: ignore[arg-type]

    def discovery_report(self, msg_id: int, **header: object) -> bytes:
        """The unauthenticated usmStatsUnknownEngineIDs Report that answers discovery."""
        return self.reply(msg_id, 0, report_pdu(msg_id, usm.UNKNOWN_ENGINE_ID), user=b"", **header)

    def uptime_response(self, msg_id: int, level: int, uptime: int | None = None, **header: object) -> bytes:
        """A Response carrying sysUpTime."""
        body = pdu(msg_id, [(SYS_UPTIME, TAG_TIMETICKS, self.uptime if uptime is None else uptime)])
        return self.reply(msg_id, level, body, **header)


def honest(peer: V3Peer, msg_id: int, flags: int) -> list[bytes]:
    """What a correct agent answers."""
    if not flags & usm.FLAG_AUTH and peer.creds.auth:
        return [peer.discovery_report(msg_id)]
    return [peer.uptime_response(msg_id, flags & 3)]


@contextmanager
def table_peer(
    data: Mapping[Oid, tuple[int, object]], service: float = 0.0, drop_while_busy: bool = False
) -> Iterator[TablePeer]:
    """Serve ``data`` over SNMPv2c on 127.0.0.1 from a thread; yields the running peer."""
    peer = TablePeer(dict(data), service, drop_while_busy)
    thread = threading.Thread(target=peer.serve, daemon=True)
    thread.start()
    try:
        yield peer
    finally:
        peer.stop.set()
        thread.join(5)
        peer.sock.close()


class TablePeer:
    """A v2c agent over a variable map that serves one request at a time, ``service`` seconds each.

    With ``drop_while_busy`` it discards what arrived while it was busy, like an agent behind a control
    plane policer or a small socket buffer: a burst of requests loses all but the first.
    """

    def __init__(self, data: dict[Oid, tuple[int, object]], service: float, drop_while_busy: bool) -> None:
        self.data, self.keys = data, sorted(data)
        self.service, self.drop_while_busy = service, drop_while_busy
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = int(self.sock.getsockname()[1])
        self.stop = threading.Event()
        self.served = self.dropped = 0

    def serve(self) -> None:
        while not self.stop.is_set():
            try:
                data, addr = self.sock.recvfrom(65535)
            except OSError:
                continue
            time.sleep(self.service)
            reply = self.answer(data)
            if self.drop_while_busy:
                self.dropped += self._drain()
            if reply is not None:
                self.served += 1
                self.sock.sendto(reply, addr)

    def _drain(self) -> int:
        n = 0
        self.sock.setblocking(False)
        try:
            while True:
                self.sock.recvfrom(65535)
                n += 1
        except BlockingIOError:
            pass
        finally:
            self.sock.settimeout(0.05)
        return n

    def answer(self, data: bytes) -> bytes | None:
        try:
            start, stop = expect(data, 0, len(data), 0x30)
            _, pos = read_int(data, start, stop)
            c_start, pos = expect(data, pos, stop, 0x04)
            tag, rid, _, reps, binds = decode_pdu(data, pos, stop, frozenset((0xA0, 0xA5)))
        except BerError:
            return None
        out: list[VarBind] = []
        if tag == 0xA0:
            out = [(o, *self.data.get(o, (0x80, None))) for o, _, _ in binds]
        else:
            cursors = [o for o, _, _ in binds]
            for _ in range(reps):
                for i, cur in enumerate(cursors):
                    at = bisect.bisect_right(self.keys, cur)
                    if at >= len(self.keys):
                        out.append((cur, 0x82, None))
                        continue
                    cursors[i] = self.keys[at]
                    out.append((self.keys[at], *self.data[self.keys[at]]))
        return v2c_message(data[c_start:pos], pdu(rid, out))
