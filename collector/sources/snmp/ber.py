"""A small BER codec for SNMP messages: GetRequest/GetBulkRequest out, Response (and Report) in.

This is the fast path behind the walk seam. pysnmp decodes every response through pyasn1, which costs
about 0.3 ms per value; a flat decoder of the few types a Response-PDU can hold is roughly twenty times
cheaper, and a large walk is dominated by decoding. The v2c message wrapper lives here; the SNMPv3 one
(USM) in ``usm``, over the same PDU codec. Only what RFC 3416 allows in a Response-PDU is decoded;
anything else raises ``BerError``.
"""

from __future__ import annotations

from collections.abc import Sequence

Oid = tuple[int, ...]
VarBind = tuple[Oid, int, object]
"""``(oid, tag, value)``: the BER tag tells the type (``TAG_COUNTER64``...); values are ``int``, ``bytes``,
an ``Oid`` for OBJECT IDENTIFIER, or ``None`` for NULL and the three exception values."""

TAG_INTEGER = 0x02
TAG_OCTETS = 0x04
TAG_NULL = 0x05
TAG_OID = 0x06
TAG_IPADDR = 0x40
TAG_COUNTER32 = 0x41
TAG_GAUGE32 = 0x42
TAG_TIMETICKS = 0x43
TAG_OPAQUE = 0x44
TAG_COUNTER64 = 0x46
TAG_NO_SUCH_OBJECT = 0x80
TAG_NO_SUCH_INSTANCE = 0x81
TAG_END_OF_MIB = 0x82
EXCEPTIONS = frozenset((TAG_NO_SUCH_OBJECT, TAG_NO_SUCH_INSTANCE, TAG_END_OF_MIB))

_GET = 0xA0
_RESPONSE = 0xA2
REPORT = 0xA8
RESPONSE_PDUS = frozenset((_RESPONSE,))
_BULK = 0xA5
_UNSIGNED = frozenset((TAG_COUNTER32, TAG_GAUGE32, TAG_TIMETICKS, TAG_COUNTER64))


class BerError(ValueError):
    """The bytes are not a well-formed SNMPv2c Response message."""


# -- encoding ------------------------------------------------------------------------------------


def _length(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes((0x80 | len(raw),)) + raw


def tlv(tag: int, body: bytes) -> bytes:
    """One BER tag-length-value."""
    return bytes((tag,)) + _length(len(body)) + body


def encode_int(value: int) -> bytes:
    """A BER INTEGER TLV."""
    return tlv(TAG_INTEGER, value.to_bytes(max(1, (value.bit_length() + 8) // 8), "big", signed=True))


_tlv = tlv
_int = encode_int


def encode_oid(oid: Oid) -> bytes:
    """BER body of an OBJECT IDENTIFIER (without tag and length).

    Raises:
        BerError: fewer than two sub-identifiers, or a first arc above 2.
    """
    if len(oid) < 2 or oid[0] > 2:
        raise BerError(f"not an OID: {oid}")
    out = bytearray()
    for sub in (oid[0] * 40 + oid[1], *oid[2:]):
        if sub < 0x80:
            out.append(sub)
            continue
        chunk = [sub & 0x7F]
        sub >>= 7
        while sub:
            chunk.append(0x80 | (sub & 0x7F))
            sub >>= 7
        out.extend(reversed(chunk))
    return bytes(out)


def encode_request(community: bytes, request_id: int, oids: Sequence[Oid], max_repetitions: int = 0) -> bytes:
    """An SNMPv2c GetRequest (``max_repetitions == 0``) or GetBulkRequest (non-repeaters 0).

    Args:
        community: the community string.
        request_id: matched against the response.
        oids: the variables asked for.
        max_repetitions: 0 for a GET, else the GETBULK repetition count.

    Returns:
        the datagram.
    """
    return _tlv(0x30, _int(1) + _tlv(TAG_OCTETS, community) + encode_pdu(request_id, oids, max_repetitions))


def encode_pdu(request_id: int, oids: Sequence[Oid], max_repetitions: int = 0) -> bytes:
    """A GetRequest-PDU (``max_repetitions == 0``) or GetBulkRequest-PDU (non-repeaters 0).

    Args:
        request_id: matched against the response.
        oids: the variables asked for (NULL values).
        max_repetitions: 0 for a GET, else the GETBULK repetition count.

    Returns:
        the PDU TLV.
    """
    cache = _null_binds
    binds = b"".join([cache.get(o) or _null_bind(o) for o in oids])
    tag = _BULK if max_repetitions else _GET
    return _tlv(tag, _int(request_id) + _int(0) + _int(max_repetitions) + _tlv(0x30, binds))


_null_binds: dict[Oid, bytes] = {}
_MAX_CACHED = 200_000  # distinct OIDs (table cells asked for as walk cursors) before the cache restarts


def _null_bind(oid: Oid) -> bytes:
    """The encoded ``VarBind(oid, NULL)`` of a request, cached: a poll asks for the same cursors (one
    per row of each column) every interval, and encoding them was 9 % of a poll's CPU."""
    if len(_null_binds) >= _MAX_CACHED:
        _null_binds.clear()
    bind = _null_binds[oid] = _tlv(0x30, _tlv(TAG_OID, encode_oid(oid)) + b"\x05\x00")
    return bind


# -- decoding ------------------------------------------------------------------------------------


def _head(buf: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """Tag, body start and body end of the TLV at ``pos``."""
    if pos + 2 > end:
        raise BerError("truncated")
    tag = buf[pos]
    n = buf[pos + 1]
    pos += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4 or pos + k > end:
            raise BerError("bad length")
        n = int.from_bytes(buf[pos : pos + k], "big")
        pos += k
    if pos + n > end:
        raise BerError("truncated")
    return tag, pos, pos + n


def _oid(buf: bytes, pos: int, end: int) -> Oid:
    """Decode an OBJECT IDENTIFIER body; anything malformed raises ``BerError`` (never ``IndexError``).

    X.690 8.19: base-128 sub-identifiers, high bit = more to come, no leading 0x80 (minimal form);
    the first one packs the first two arcs (40 * a + b, with a = 2 taking everything from 80 up).
    """
    if pos >= end:
        raise BerError("empty OID")
    subs: list[int] = []
    acc = 0
    fresh = True  # at the first byte of a sub-identifier
    for b in buf[pos:end]:
        if fresh and b == 0x80:
            raise BerError("OID sub-identifier not in minimal form")
        if b & 0x80:
            acc = (acc << 7) | (b & 0x7F)
            fresh = False
            continue
        subs.append((acc << 7) | b)
        acc, fresh = 0, True
    if not fresh:
        raise BerError("OID ends inside a sub-identifier")
    first = subs[0]
    head = (first // 40, first % 40) if first < 80 else (2, first - 80)
    return (*head, *subs[1:])


def _value(buf: bytes, tag: int, pos: int, end: int) -> object:
    if tag == TAG_INTEGER:
        return int.from_bytes(buf[pos:end], "big", signed=True)
    if tag in _UNSIGNED:
        return int.from_bytes(buf[pos:end], "big")
    if tag in (TAG_OCTETS, TAG_IPADDR, TAG_OPAQUE):
        return buf[pos:end]
    if tag == TAG_OID:
        return _oid(buf, pos, end)
    if tag == TAG_NULL or tag in EXCEPTIONS:
        return None
    raise BerError(f"unexpected value tag 0x{tag:02x}")


def read_tlv(buf: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """Tag, body start and body end of the TLV at ``pos`` (not past ``end``).

    Raises:
        BerError: truncated or an unsupported length form.
    """
    return _head(buf, pos, end)


def expect(buf: bytes, pos: int, end: int, want: int) -> tuple[int, int]:
    """Body start and end of the TLV at ``pos``, which must have tag ``want``.

    Raises:
        BerError: another tag, or a malformed TLV.
    """
    return _expect(buf, pos, end, want)


def read_int(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The INTEGER at ``pos`` and the position after it.

    Raises:
        BerError: not an INTEGER.
    """
    return _integer(buf, pos, end)


def decode_pdu(
    buf: bytes, pos: int, end: int, tags: frozenset[int]
) -> tuple[int, int, int, int, list[VarBind]]:
    """Decode the PDU at ``pos`` whose tag is one of ``tags``.

    Returns:
        ``(tag, request_id, error_status, error_index, varbinds)``.

    Raises:
        BerError: malformed, or another PDU type.
    """
    tag, pdu_start, pdu_end = _head(buf, pos, end)
    if tag not in tags:
        raise BerError(f"unexpected PDU tag 0x{tag:02x}")
    request_id, pos = _integer(buf, pdu_start, pdu_end)
    status, pos = _integer(buf, pos, pdu_end)
    index, pos = _integer(buf, pos, pdu_end)
    list_start, list_end = _expect(buf, pos, pdu_end, 0x30)
    return tag, request_id, status, index, _varbinds(buf, list_start, list_end)


def _expect(buf: bytes, pos: int, end: int, want: int) -> tuple[int, int]:
    tag, start, stop = _head(buf, pos, end)
    if tag != want:
        raise BerError(f"expected tag 0x{want:02x}, got 0x{tag:02x}")
    return start, stop


def _integer(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    start, stop = _expect(buf, pos, end, TAG_INTEGER)
    return int.from_bytes(buf[start:stop], "big", signed=True), stop


def decode_response(buf: bytes) -> tuple[int, int, int, list[VarBind]]:
    """Decode an SNMPv2c Response message.

    Args:
        buf: the datagram.

    Returns:
        ``(request_id, error_status, error_index, varbinds)``.

    Raises:
        BerError: not a well-formed v2c Response.
    """
    end = len(buf)
    start, stop = _expect(buf, 0, end, 0x30)
    if stop != end:
        raise BerError("trailing bytes after the message")
    version, pos = _integer(buf, start, stop)
    if version != 1:
        raise BerError(f"not SNMPv2c (version {version})")
    _, pos = _expect(buf, pos, stop, TAG_OCTETS)
    _, request_id, status, index, binds = decode_pdu(buf, pos, stop, RESPONSE_PDUS)
    return request_id, status, index, binds


def _varbinds(buf: bytes, pos: int, end: int) -> list[VarBind]:
    out: list[VarBind] = []
    while pos < end:
        vb_start, vb_end = _expect(buf, pos, end, 0x30)
        o_start, o_end = _expect(buf, vb_start, vb_end, TAG_OID)
        tag, v_start, v_end = _head(buf, o_end, vb_end)
        out.append((_oid(buf, o_start, o_end), tag, _value(buf, tag, v_start, v_end)))
        pos = vb_end
    return out


def request_id_of(buf: bytes) -> int | None:
    """The request-id of a v2c message, or None when it cannot be read (used to match responses)."""
    try:
        end = len(buf)
        start, stop = _expect(buf, 0, end, 0x30)
        _, pos = _integer(buf, start, stop)
        _, pos = _expect(buf, pos, stop, TAG_OCTETS)
        _, pdu_start, pdu_end = _head(buf, pos, stop)
        return _integer(buf, pdu_start, pdu_end)[0]
    except BerError:
        return None
