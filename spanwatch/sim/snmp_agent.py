"""An SNMPv2c agent for one simulated switch: GET, GETNEXT and GETBULK over UDP on loopback.

The agent answers from a sorted OID table (``snmp_mib.build``) rebuilt lazily when the fabric publishes a
new snapshot; GETNEXT and GETBULK find the next OID by bisection. A request with the wrong community is
ignored, as real v2c agents do (the manager sees a timeout). Messages are parsed and built with the
collector's own BER codec (``collector.sources.snmp.ber``); only value encoding for the response is added
here.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Callable

from collector.sources.snmp import ber
from collector.sources.snmp.ber import Oid

log = logging.getLogger(__name__)

GET, GETNEXT, GETBULK = 0xA0, 0xA1, 0xA5
RESPONSE = 0xA2
MAX_RESPONSE = 60_000  # bytes: stay under a UDP datagram with room to spare
Table = tuple[list[Oid], list[bytes]]
"""Sorted OIDs and, at the same positions, each one's encoded value TLV."""


def encode_unsigned(tag: int, value: int) -> bytes:
    """A Counter32 / Gauge32 / TimeTicks / Counter64 TLV (a leading zero keeps it positive)."""
    return ber.tlv(tag, value.to_bytes(max(1, (value.bit_length() + 8) // 8), "big"))


def encode_octets(text: str | bytes) -> bytes:
    """An OCTET STRING TLV."""
    return ber.tlv(ber.TAG_OCTETS, text.encode() if isinstance(text, str) else text)


_END = ber.tlv(ber.TAG_END_OF_MIB, b"")
_NO_SUCH_OBJECT = ber.tlv(ber.TAG_NO_SUCH_OBJECT, b"")


def _varbind(oid: Oid, value: bytes) -> bytes:
    return ber.tlv(0x30, ber.tlv(ber.TAG_OID, ber.encode_oid(oid)) + value)


def parse_request(data: bytes) -> tuple[bytes, int, int, int, int, list[Oid]]:
    """Decode a v2c GET / GETNEXT / GETBULK message.

    Returns:
        ``(community, pdu_tag, request_id, non_repeaters, max_repetitions, oids)`` (the two GETBULK
        fields are the error-status / error-index positions of the other PDUs).

    Raises:
        BerError: not a well-formed v2c request.
    """
    end = len(data)
    start, stop = ber.expect(data, 0, end, 0x30)
    version, pos = ber.read_int(data, start, stop)
    if version != 1:
        raise ber.BerError(f"not SNMPv2c (version {version})")
    c_start, c_end = ber.expect(data, pos, stop, ber.TAG_OCTETS)
    tag, request_id, a, b, binds = ber.decode_pdu(data, c_end, stop, frozenset((GET, GETNEXT, GETBULK)))
    return data[c_start:c_end], tag, request_id, a, b, [oid for oid, _, _ in binds]


def answer(table: Table, tag: int, non_repeaters: int, max_repetitions: int, oids: list[Oid]) -> list[bytes]:
    """The response varbinds for a request against ``table``."""
    keys, values = table
    if tag == GET:
        out = []
        for oid in oids:
            i = bisect.bisect_left(keys, oid)
            out.append(_varbind(oid, values[i] if i < len(keys) and keys[i] == oid else _NO_SUCH_OBJECT))
        return out
    if tag == GETNEXT:
        return [_next(table, oid) for oid in oids]
    nr = max(0, min(non_repeaters, len(oids)))
    out = [_next(table, oid) for oid in oids[:nr]]
    cursors = list(oids[nr:])
    size = sum(len(v) for v in out)
    for _ in range(max(0, max_repetitions)):
        if not cursors:
            break
        row, ended = [], 0
        for j, cursor in enumerate(cursors):
            i = bisect.bisect_right(keys, cursor)
            if i >= len(keys):
                row.append(_varbind(cursor, _END))
                ended += 1
            else:
                row.append(_varbind(keys[i], values[i]))
                cursors[j] = keys[i]
        size += sum(len(v) for v in row)
        if size > MAX_RESPONSE and out:
            break  # RFC 3416: a GETBULK response may stop short rather than exceed the message size
        out += row
        if ended == len(cursors):
            break
    return out


def _next(table: Table, oid: Oid) -> bytes:
    keys, values = table
    i = bisect.bisect_right(keys, oid)
    if i >= len(keys):
        return _varbind(oid, _END)
    return _varbind(keys[i], values[i])


def response(community: bytes, request_id: int, varbinds: list[bytes]) -> bytes:
    """A v2c Response message."""
    pdu = ber.tlv(
        RESPONSE,
        ber.encode_int(request_id)
        + ber.encode_int(0)
        + ber.encode_int(0)
        + ber.tlv(0x30, b"".join(varbinds)),
    )
    return ber.tlv(0x30, ber.encode_int(1) + encode_octets(community) + pdu)


class Agent(asyncio.DatagramProtocol):
    """The UDP side of one agent.

    Args:
        community: the community it answers.
        table: returns the current OID table (cheap when nothing changed).
    """

    def __init__(self, community: str, table: Callable[[], Table]) -> None:
        self.community = community.encode()
        self.table = table
        self.transport: asyncio.DatagramTransport | None = None
        self.requests = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a datagram endpoint's transport

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        try:
            community, tag, request_id, a, b, oids = parse_request(data)
        except ber.BerError as e:
            log.debug("ignoring a malformed request from %s: %s", addr, e)
            return
        if community != self.community or self.transport is None:
            return
        self.requests += 1
        self.transport.sendto(response(community, request_id, answer(self.table(), tag, a, b, oids)), addr)


async def serve(
    community: str, table: Callable[[], Table], host: str = "127.0.0.1", port: int = 0
) -> tuple[asyncio.DatagramTransport, int]:
    """Start an agent on ``host:port`` (0: a free port).

    Returns:
        the transport (close it to stop) and the bound port.
    """
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: Agent(community, table), local_addr=(host, port)
    )
    return transport, int(transport.get_extra_info("sockname")[1])
