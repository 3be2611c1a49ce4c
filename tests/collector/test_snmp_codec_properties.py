"""Property tests (hypothesis) over the BER codec and USM: round trips, and arbitrary or mutated bytes
never raise anything but the codec's own errors."""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.sources.snmp import usm
from collector.sources.snmp.ber import (
    TAG_COUNTER32,
    TAG_COUNTER64,
    TAG_GAUGE32,
    TAG_INTEGER,
    TAG_IPADDR,
    TAG_OCTETS,
    TAG_OID,
    TAG_TIMETICKS,
    BerError,
    VarBind,
    decode_response,
    request_id_of,
)
from tests.collector.snmp_wire import pdu, v2c_message

ENGINE = bytes.fromhex("80001f8880aabbccddeeff0011")
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

oids = st.tuples(st.integers(0, 2), st.integers(0, 39)).flatmap(
    lambda head: st.lists(st.integers(0, 2**32 - 1), max_size=12).map(lambda tail: (*head, *tail))
)
big_oids = st.tuples(st.just(2), st.integers(40, 2**40)).map(tuple)  # first arcs above 127 (slow path)
values = st.one_of(
    st.tuples(st.just(TAG_INTEGER), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.sampled_from((TAG_COUNTER32, TAG_GAUGE32, TAG_TIMETICKS)), st.integers(0, 2**32 - 1)),
    st.tuples(st.just(TAG_COUNTER64), st.integers(0, 2**64 - 1)),
    st.tuples(st.just(TAG_OCTETS), st.binary(max_size=40)),
    st.tuples(st.just(TAG_IPADDR), st.binary(min_size=4, max_size=4)),
    st.tuples(st.just(TAG_OID), st.one_of(oids, big_oids)),
    st.tuples(st.sampled_from((0x80, 0x81, 0x82)), st.none()),
)
binds = st.lists(st.builds(lambda o, tv: (o, *tv), st.one_of(oids, big_oids), values), max_size=8)
request_ids = st.integers(-(2**31), 2**31 - 1)


@SETTINGS
@given(request_ids, binds, st.binary(max_size=16))
def test_v2c_response_round_trips(rid: int, vbs: list[VarBind], community: bytes) -> None:
    data = v2c_message(community, pdu(rid, vbs))
    assert decode_response(data) == (rid, 0, 0, vbs)
    assert request_id_of(data) == rid


@SETTINGS
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_ber_error(data: bytes) -> None:
    with contextlib.suppress(BerError):
        decode_response(data)
    request_id_of(data)
    usm.msg_id_of(data)


@SETTINGS
@given(request_ids, binds, st.data())
def test_mutated_responses_raise_only_ber_error(rid: int, vbs: list[VarBind], data: st.DataObject) -> None:
    good = bytearray(v2c_message(b"public", pdu(rid, vbs)))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(good) - 1))
        good[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(good)))
    with contextlib.suppress(BerError):
        decode_response(bytes(good[:cut]))


CREDS = {
    0: usm.Credentials(b"prop"),
    1: usm.Credentials(b"prop", "SHA384", b"auth-passphrase"),
    3: usm.Credentials(b"prop", "SHA224", b"auth-passphrase", "AES192", b"priv-passphrase"),
}


@SETTINGS
# boots 2^31-1 is the latched value an engine never leaves: outside the time window (RFC 3414 2.2.3)
@given(st.sampled_from(sorted(CREDS)), st.integers(0, 2**31 - 1), binds, st.integers(0, 2**31 - 2))
def test_usm_response_round_trips_through_receive(
    level: int, msg_id: int, vbs: list[VarBind], boots: int
) -> None:
    creds = CREDS[level]
    header = usm.Header(msg_id, level, ENGINE, boots, 1000, creds.user)
    data = usm.wrap(creds, header, pdu(msg_id, vbs))
    sent = usm.Sent(usm.Header(msg_id, level | usm.FLAG_REPORTABLE, ENGINE, boots, 1000, creds.user))
    msg = usm.receive(data, creds, sent, usm.Engine(ENGINE, boots, 1000), 0.0)
    assert (msg.request_id, msg.binds, msg.authenticated) == (msg_id, vbs, bool(level))


@SETTINGS
@given(st.sampled_from(sorted(CREDS)), st.binary(max_size=300), st.integers(0, 2**31 - 1))
def test_usm_arbitrary_bytes_raise_only_usm_errors(level: int, data: bytes, msg_id: int) -> None:
    creds = CREDS[level]
    sent = usm.Sent(usm.Header(msg_id, level, ENGINE, 1, 1, creds.user))
    with contextlib.suppress(usm.Drop):
        usm.receive(data, creds, sent, usm.Engine(ENGINE, 1, 1, trusted=True), 0.0)
    with contextlib.suppress(BerError, usm.UsmError):
        usm.decode(data, creds)


@SETTINGS
@given(st.integers(0, 2**31 - 1), binds, st.data())
def test_usm_mutations_are_dropped_never_crash(msg_id: int, vbs: list[VarBind], data: st.DataObject) -> None:
    creds = CREDS[3]
    header = usm.Header(msg_id, 3, ENGINE, 5, 1000, creds.user)
    good = bytearray(usm.wrap(creds, header, pdu(msg_id, vbs)))
    at = data.draw(st.integers(0, len(good) - 1))
    good[at] ^= data.draw(st.integers(1, 255))
    sent = usm.Sent(usm.Header(msg_id, 3 | usm.FLAG_REPORTABLE, ENGINE, 5, 1000, creds.user))
    try:
        msg = usm.receive(bytes(good), creds, sent, usm.Engine(ENGINE, 5, 1000), 0.0)
    except usm.Drop:
        return
    # only a change the MAC does not cover (the message framing around it) can still pass
    assert msg.binds == vbs
