"""SNMPv3 USM primitives: RFC 3414 A.3 key vectors, key extension, and an encode/decode round trip."""

from __future__ import annotations

import hashlib

import pytest

from collector.sources.snmp import usm
from collector.sources.snmp.ber import BerError

ENGINE = bytes.fromhex("000000000000000000000002")


@pytest.mark.parametrize(
    ("hash_new", "want"),
    [
        (hashlib.md5, "526f5eed9fcce26f8964c2930787d82b"),
        (hashlib.sha1, "6695febc9288e36282235fc7151f128497b38f3f"),
    ],
)
def test_rfc3414_localized_key_vectors(hash_new: object, want: str) -> None:
    ku = usm.password_to_key(b"maplesyrup", hash_new)  # type: ignore[arg-type]
    assert usm.localize(ku, ENGINE, hash_new).hex() == want  # type: ignore[arg-type]


def test_blumenthal_extension_appends_hash_of_key() -> None:
    key = bytes(range(20))
    extended = usm.extend_blumenthal(key, 32, hashlib.sha1)
    assert extended == (key + hashlib.sha1(key).digest())[:32]


def test_empty_passphrase_is_rejected() -> None:
    with pytest.raises(usm.UsmError):
        usm.password_to_key(b"", hashlib.sha1)


def test_request_round_trips_through_decode_with_auth_and_priv() -> None:
    creds = usm.Credentials(b"u", "SHA256", b"authpassphrase", "AES256", b"privpassphrase")
    engine = usm.Engine(ENGINE, 3, 1000)
    msg = usm.encode(creds, engine, 1000, 77, [(1, 3, 6, 1, 2, 1, 1, 3, 0)], 0)
    assert usm.msg_id_of(msg) == 77
    # A request decodes like a response (same framing); flip a MAC byte and it fails authentication.
    with pytest.raises(BerError):
        usm.decode(msg, creds)  # a GetRequest PDU is not a Response/Report
    broken = bytearray(msg)
    broken[-1] ^= 1
    with pytest.raises((usm.UsmError, BerError)):
        usm.decode(bytes(broken), creds)
