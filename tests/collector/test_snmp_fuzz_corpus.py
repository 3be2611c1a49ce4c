"""The checked-in SNMP fuzz corpus (tests/fuzz/snmp, made by tests/fuzz/make_snmp_corpus.py): every entry
point of the codec and USM raises only the codec's own errors (``BerError``, ``UsmError``) on every file."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.sources.snmp import usm
from collector.sources.snmp.ber import BerError, decode_response, request_id_of
from tests.fuzz.make_snmp_corpus import CREDS, ENGINE

CORPUS = sorted((Path(__file__).parents[1] / "fuzz" / "snmp").glob("*.bin"))
OWN_ERRORS = (BerError, usm.UsmError)


def test_corpus_is_there() -> None:
    assert len(CORPUS) >= 300


@pytest.mark.parametrize("level", [0, 1, 3])
def test_no_crash_outside_the_codec_errors(level: int) -> None:
    engine = usm.Engine(ENGINE, 7, 1000, 0.0, trusted=True)
    crashes = []
    for path in CORPUS:
        data = path.read_bytes()
        msg_id = usm.msg_id_of(data)
        request_id_of(data)
        sent = usm.Sent(usm.Header(msg_id or 0, level | usm.FLAG_REPORTABLE, ENGINE, 7, 1000, CREDS.user))
        for call, args in (
            (decode_response, (data,)),
            (usm.decode, (data, CREDS)),
            (usm.receive, (data, CREDS, sent, engine, 0.0)),
        ):
            try:
                call(*args)  # type: ignore[operator]
            except OWN_ERRORS:
                pass
            except Exception as e:  # a crash: collected so the failure lists every file
                crashes.append(f"{path.name}: {type(e).__name__}: {e}")
    assert crashes == []
