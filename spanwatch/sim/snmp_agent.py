"""An SNMPv2c agent for one simulated switch: GET, GETNEXT and GETBULK over UDP on loopback.

The agent answers from a sorted OID table (``snmp_mib.build``) rebuilt lazily when the fabric publishes a
new snapshot; GETNEXT and GETBULK find the next OID by bisection. A request with the wrong community is
ignored, as real v2c agents do (the manager sees a timeout). Requests are decoded by pysnmp's v2c protocol
API over pyasn1's BER codec, and every OID and value of a response is encoded by pyasn1, not by the
collector's own codec, so a collector polling the simulator meets an independent implementation of what
it decodes; only the sequences around them are put together here (``tlv``).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Callable
from typing import Any

from pyasn1.codec.ber import decoder, encoder
from pyasn1.error import PyAsn1Error
from pyasn1.type import univ
from pysnmp.proto import api, rfc1905

log = logging.getLogger(__name__)

v2c = api.v2c
Oid = tuple[int, ...]
Value = Any
"""An SNMP value as pysnmp types it (``rfc1902.Counter64``, ``OctetString``...): pysnmp has no type hints."""
Table = tuple[list[Oid], list[Value]]
"""Sorted OIDs and, at the same positions, each one's value."""
VarBind = tuple[Oid, Value]

GET, GETNEXT, GETBULK = "get", "getnext", "getbulk"
_KINDS = {
    v2c.GetRequestPDU.tagSet: GET,
    v2c.GetNextRequestPDU.tagSet: GETNEXT,
    v2c.GetBulkRequestPDU.tagSet: GETBULK,
}
MAX_RESPONSE = 60_000  # bytes: stay under a UDP datagram with room to spare
_TOO_BIG = 1
_RESPONSE_PDU = 0xA2  # RFC 3416's Response-PDU tag
MAX_CACHED_OIDS = 100_000  # OID encodings kept (a table's OIDs, and the odd ones a manager asked for)


class BadRequest(ValueError):
    """Not an SNMPv2c GET, GETNEXT or GETBULK request."""


class Request:
    """A decoded request.

    Args:
        data: the datagram.

    Raises:
        BadRequest: it is not a well-formed v2c GET, GETNEXT or GETBULK message.
    """

    def __init__(self, data: bytes) -> None:
        try:
            msg, rest = decoder.decode(data, asn1Spec=v2c.Message())
        except PyAsn1Error as e:
            raise BadRequest(str(e)) from e
        if rest:
            raise BadRequest(f"{len(rest)} bytes after the message")
        if int(v2c.apiMessage.get_version(msg)) != api.SNMP_VERSION_2C:
            raise BadRequest(f"not SNMPv2c (version {int(v2c.apiMessage.get_version(msg))})")
        pdu = v2c.apiMessage.get_pdu(msg)
        kind = _KINDS.get(pdu.tagSet)
        if kind is None:
            raise BadRequest("not a GET, GETNEXT or GETBULK request")
        self.message: Any = msg
        self.community = bytes(v2c.apiMessage.get_community(msg))
        self.request_id = int(v2c.apiPDU.get_request_id(pdu))
        self.kind = kind
        self.oids: list[Oid] = [name.asTuple() for name, _ in v2c.apiPDU.get_varbinds(pdu)]
        bulk = kind == GETBULK
        self.non_repeaters = int(v2c.apiBulkPDU.get_non_repeaters(pdu)) if bulk else 0
        self.max_repetitions = int(v2c.apiBulkPDU.get_max_repetitions(pdu)) if bulk else 0


def answer(table: Table, request: Request) -> tuple[list[VarBind], int, int]:
    """The response varbinds for ``request`` against ``table``.

    Returns:
        ``(varbinds, fixed, width)``: the first ``fixed`` varbinds must all be sent; the rest are GETBULK
        repetitions, rows of ``width``, which may be dropped from the end to fit the message size.
    """
    keys, values = table
    oids = request.oids
    if request.kind == GET:
        out = []
        for oid in oids:
            i = bisect.bisect_left(keys, oid)
            out.append((oid, values[i] if i < len(keys) and keys[i] == oid else rfc1905.noSuchObject))
        return out, len(out), 0
    if request.kind == GETNEXT:
        return [_next(table, oid) for oid in oids], len(oids), 0
    nr = max(0, min(request.non_repeaters, len(oids)))
    out = [_next(table, oid) for oid in oids[:nr]]
    cursors = list(oids[nr:])
    # A lower bound of each varbind's encoded size (an arc takes at least a byte, a TLV at least two)
    # stops the repetitions well before the encoder would have to trim thousands of them.
    floor = 0
    for _ in range(max(0, request.max_repetitions)):
        if not cursors or floor > MAX_RESPONSE:
            break
        ended = 0
        for j, cursor in enumerate(cursors):
            i = bisect.bisect_right(keys, cursor)
            if i >= len(keys):
                out.append((cursor, rfc1905.endOfMibView))
                ended += 1
            else:
                out.append((keys[i], values[i]))
                cursors[j] = keys[i]
            floor += len(cursors[j]) + 5
        if ended == len(cursors):
            break
    return out, nr, len(cursors)


def _next(table: Table, oid: Oid) -> VarBind:
    keys, values = table
    i = bisect.bisect_right(keys, oid)
    if i >= len(keys):
        return oid, rfc1905.endOfMibView
    return keys[i], values[i]


class Encodings:
    """Each OID's and each value's BER encoding, by pyasn1, made once: a poll reads the same OIDs every
    time and a table's values until the next snapshot, and pyasn1 takes about 30 us a varbind, which
    starved the event loop the gNMI targets share (a 4-site fabric lost seconds of gNMI samples)."""

    def __init__(self) -> None:
        self.oids: dict[Oid, bytes] = {}
        self.values: dict[int, tuple[Value, bytes]] = {}

    def varbind(self, oid: Oid, value: Value) -> bytes:
        """The encoded ``SEQUENCE {name, value}``."""
        name = self.oids.get(oid)
        if name is None:
            if len(self.oids) >= MAX_CACHED_OIDS:  # a manager asking for ever new OIDs: start over
                self.oids.clear()
            name = self.oids[oid] = bytes(encoder.encode(univ.ObjectIdentifier(oid)))
        held = self.values.get(id(value))
        if held is None or held[0] is not value:  # the id of a value no longer held may be reused
            held = self.values[id(value)] = (value, bytes(encoder.encode(value)))
        return tlv(0x30, name + held[1])

    def forget_values(self) -> None:
        """Drop the values' encodings (a new table holds new values)."""
        self.values.clear()


def tlv(tag: int, body: bytes) -> bytes:
    """A constructed BER value around encoded contents (definite length, X.690 8.1.3)."""
    n = len(body)
    if n < 0x80:
        return bytes((tag, n)) + body
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes((tag, 0x80 | len(size))) + size + body


def _message(request: Request, error_status: int, varbinds: bytes) -> bytes:
    """The Response message around encoded varbinds (RFC 3416: request-id, error-status, error-index 0)."""
    fields = (univ.Integer(request.request_id), univ.Integer(error_status), univ.Integer(0))
    pdu = b"".join(bytes(encoder.encode(f)) for f in fields) + tlv(0x30, varbinds)
    version = bytes(encoder.encode(univ.Integer(api.SNMP_VERSION_2C)))
    community = bytes(encoder.encode(univ.OctetString(request.community)))
    return tlv(0x30, version + community + tlv(_RESPONSE_PDU, pdu))


def response(
    request: Request, varbinds: list[VarBind], fixed: int, width: int, encodings: Encodings | None = None
) -> bytes:
    """The encoded Response message, within ``MAX_RESPONSE`` bytes.

    GETBULK rows are dropped from the end until it fits (RFC 3416 4.2.3); when even the varbinds that
    cannot be dropped do not fit, the answer is tooBig with no varbinds (RFC 3416 4.2.1).
    """
    encodings = encodings or Encodings()
    encoded = [encodings.varbind(oid, value) for oid, value in varbinds]
    size = sum(map(len, encoded))
    room = MAX_RESPONSE - len(_message(request, 0, b"")) - 4  # the varbind list's length grows by <= 4
    while size > room:
        rows = (len(encoded) - fixed) // width if width else 0
        if rows == 0:
            return _message(request, _TOO_BIG, b"")
        keep = min(rows - 1, rows * room // size)  # in proportion, and always fewer
        encoded = encoded[: fixed + keep * width]
        size = sum(map(len, encoded))
    return _message(request, 0, b"".join(encoded))


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
        self.encodings = Encodings()
        self._table: Table | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a datagram endpoint's transport

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        try:
            request = Request(data)
        except BadRequest as e:
            log.debug("ignoring a malformed request from %s: %s", addr, e)
            return
        if request.community != self.community or self.transport is None:
            return
        self.requests += 1
        table = self.table()
        if table is not self._table:
            self._table = table
            self.encodings.forget_values()
        self.transport.sendto(response(request, *answer(table, request), self.encodings), addr)


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
