"""Regenerate the SNMP fuzz corpus in ``tests/fuzz/snmp/`` (checked in; run by test_snmp_fuzz_corpus.py).

Seeds are well-formed datagrams an agent sends: SNMPv2c Responses encoded by pysnmp (every value type a
Response may hold, exceptions, Counter64 at 2^64-1) and SNMPv3 Responses and Reports at every security
level, encoded with the keys in ``CREDS``. Each seed is kept, then mutated deterministically: truncated,
bit-flipped, length bytes set to hostile values, bytes inserted or deleted, and spliced with another seed.

    python tests/fuzz/make_snmp_corpus.py   # from the repository root; rewrites the folder
"""

from __future__ import annotations

import random
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from collector.sources.snmp import usm  # noqa: E402
from tests.collector.snmp_wire import SYS_UPTIME, pdu, report_pdu  # noqa: E402

OUT = Path(__file__).parent / "snmp"
CREDS = usm.Credentials(b"fuzz", "SHA256", b"fuzz-auth-key", "AES", b"fuzz-priv-key")
ENGINE = bytes.fromhex("80001f8880aabbccddeeff0011")
MUTANTS_PER_SEED = 24
_HOSTILE_LENGTHS = (b"\x80", b"\x84\x7f\xff\xff\xff", b"\x84\xff\xff\xff\xff", b"\x81\xff", b"\x00", b"\xff")


def v2c_seeds() -> list[bytes]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pyasn1.codec.ber import encoder
        from pysnmp.proto import api
    p = api.PROTOCOL_MODULES[api.SNMP_VERSION_2C]
    values = [
        [((1, 3, 6, 1, 2, 1, 1, 3, 0), p.TimeTicks(123456))],
        [
            ((1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6, i), p.Counter64(v))
            for i, v in ((1, 0), (2, 2**64 - 1), (3, 2**63))
        ],
        [
            ((1, 3, 6, 1, 2, 1, 2, 2, 1, 10, 1), p.Counter32(2**32 - 1)),
            ((1, 3, 6, 1, 2, 1, 2, 2, 1, 5, 1), p.Gauge32(10)),
        ],
        [
            ((1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 1, 1), p.OctetString(b"Ethernet1/1")),
            ((1, 3, 6, 1, 2, 1, 1, 7, 0), p.Integer(-1)),
        ],
        [
            (
                (1, 3, 6, 1, 2, 1, 1, 2, 0),
                p.ObjectIdentifier((1, 3, 6, 1, 4, 1, 30065, 1, 3011, 7280, 2**32 - 1)),
            )
        ],
        [((1, 3, 6, 1, 2, 1, 4, 20, 1, 1, 10, 0, 0, 1), p.IpAddress("10.0.0.1"))],
        [((2, 999, 1), p.Integer(2**31 - 1)), ((1, 3, 6, 1, 2, 1, 1, 1, 0), p.OctetString(b""))],
    ]
    out = []
    for rid, binds in enumerate(values, start=1000):
        msg = p.Message()
        p.apiMessage.set_defaults(msg)
        p.apiMessage.set_community(msg, "public")
        resp = p.ResponsePDU()
        p.apiPDU.set_defaults(resp)
        p.apiPDU.set_request_id(resp, rid)
        p.apiPDU.set_varbinds(resp, binds)
        p.apiMessage.set_pdu(msg, resp)
        out.append(bytes(encoder.encode(msg)))
    # exception values (noSuchObject, noSuchInstance, endOfMibView) in one response
    from tests.collector.snmp_wire import v2c_message

    out.append(v2c_message(b"public", pdu(9, [(SYS_UPTIME, t, None) for t in (0x80, 0x81, 0x82)])))
    return out


def v3_seeds() -> list[bytes]:
    out = []
    body = pdu(77, [(SYS_UPTIME, 0x43, 4242), ((1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6, 1), 0x46, 2**64 - 1)])
    for level in (0, 1, 3):
        header = usm.Header(77, level, ENGINE, 7, 1000, CREDS.user)
        out.append(usm.wrap(CREDS, header, body))
    out.append(
        usm.wrap(CREDS, usm.Header(78, 0, ENGINE, 7, 1000, b""), report_pdu(78, usm.UNKNOWN_ENGINE_ID))
    )
    out.append(
        usm.wrap(
            CREDS, usm.Header(79, 1, ENGINE, 7, 1000, CREDS.user), report_pdu(79, usm.NOT_IN_TIME_WINDOW)
        )
    )
    return out


def mutate(seed: bytes, other: bytes, rng: random.Random) -> bytes:
    data = bytearray(seed)
    kind = rng.randrange(6)
    at = rng.randrange(len(data))
    if kind == 0:
        return bytes(data[:at])  # truncated
    if kind == 1:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == 2:
        data[at : at + 1] = rng.choice(_HOSTILE_LENGTHS)
    elif kind == 3:
        data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif kind == 4:
        del data[at : at + rng.randint(1, 8)]
    else:
        cut = rng.randrange(len(other))
        data = data[:at] + other[cut:]
    return bytes(data)


def main() -> None:
    rng = random.Random(16)
    seeds = v2c_seeds() + v3_seeds()
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.bin"):
        old.unlink()
    n = 0
    for i, seed in enumerate(seeds):
        (OUT / f"seed-{i:02d}.bin").write_bytes(seed)
        for j in range(MUTANTS_PER_SEED):
            (OUT / f"mut-{i:02d}-{j:02d}.bin").write_bytes(mutate(seed, rng.choice(seeds), rng))
            n += 1
    # the decoder crashes of finding F1 (OID bodies 0x81 and 0x80)
    for name, hexed in (
        ("f1-oid-81", "301f02010104067075626c6963a212020107020100020100300730050601810500"),
        ("f1-oid-80", "301f02010104067075626c6963a212020107020100020100300730050601800500"),
    ):
        (OUT / f"{name}.bin").write_bytes(bytes.fromhex(hexed))
    print(f"{len(seeds)} seeds, {n} mutants, 2 regressions in {OUT}")


if __name__ == "__main__":
    main()
