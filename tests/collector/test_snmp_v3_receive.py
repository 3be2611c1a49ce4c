"""SNMPv3 receive checks (RFC 3412 7.2, RFC 3414 3.2) against a loopback agent that forges replies.

Each forgery is sent just before the honest answer: the walker must drop it, count it, and still return
the honest value. On the code before issue 16 the forged value was returned (downgrade) or the target
broke for good (a Report with boots -1).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from collector.errors import SourceError
from collector.sources.snmp import usm
from collector.sources.snmp.transport import V3Walker
from tests.collector.snmp_wire import SYS_UPTIME, V3Peer, honest, pdu, plain_v3, report_pdu

Script = Callable[[V3Peer, int, int], list[bytes]]
FORGED = 12345
AUTH_PRIV = usm.Credentials(b"alice", "SHA256", b"auth-passphrase", "AES", b"priv-passphrase")
AUTH_ONLY = usm.Credentials(b"alice", "SHA256", b"auth-passphrase")


async def start(
    creds: usm.Credentials, script: Script | None = None
) -> tuple[V3Peer, V3Walker, Callable[[], None]]:
    loop = asyncio.get_running_loop()
    transport, peer = await loop.create_datagram_endpoint(
        lambda: V3Peer(creds, script=script), local_addr=("127.0.0.1", 0)
    )
    port = transport.get_extra_info("sockname")[1]
    return peer, V3Walker("127.0.0.1", port, creds, 0.5, 0), transport.close


@pytest.fixture
async def closing() -> AsyncIterator[list[Callable[[], object]]]:
    todo: list[Callable[[], object]] = []
    yield todo
    for close in todo:
        result = close()
        if asyncio.iscoroutine(result):
            await result


def forged_first(forge: Callable[[V3Peer, int, int], bytes]) -> Script:
    """Answer authenticated requests with a forgery, then the honest reply."""

    def script(peer: V3Peer, msg_id: int, flags: int) -> list[bytes]:
        if flags & usm.FLAG_AUTH:
            return [forge(peer, msg_id, flags), *honest(peer, msg_id, flags)]
        return honest(peer, msg_id, flags)

    return script


Forge = Callable[[V3Peer, int, int], bytes]
FORGERIES: list[tuple[str, str, usm.Credentials, Forge]] = [
    # finding F8: noAuthNoPriv Response for an authPriv request (RFC 3412 7.2.12b)
    ("downgrade_to_noauth", "security_level", AUTH_PRIV, lambda p, m, f: p.uptime_response(m, 0, FORGED)),
    # authentic, but below the request's level
    ("downgrade_to_auth", "security_level", AUTH_PRIV, lambda p, m, f: p.uptime_response(m, 1, FORGED)),
    # privacy without authentication is an invalid msgFlags (and leaves no MAC to check)
    (
        "priv_without_auth",
        "security_level",
        AUTH_ONLY,
        lambda p, m, f: plain_v3(m, 2, p.engine_id, p.boots, p.time, p.creds.user, b"\x04\x00"),
    ),
    (
        "above_request_level",
        "security_level",
        AUTH_ONLY,
        lambda p, m, f: usm.wrap(  # same user and auth key, plus a priv key: authentic, encrypted
            AUTH_PRIV,
            usm.Header(m, 3, p.engine_id, p.boots, p.time, b"alice"),
            pdu(m, [(SYS_UPTIME, 0x43, FORGED)]),
        ),
    ),
    ("other_user", "user", AUTH_ONLY, lambda p, m, f: p.uptime_response(m, 1, FORGED, user=b"mallory")),
    (
        "other_engine",
        "engine_id",
        AUTH_ONLY,
        lambda p, m, f: p.uptime_response(m, 1, FORGED, engine_id=b"\x80other-engine"),
    ),
    # a value byte changed after signing
    ("bad_mac", "digest", AUTH_ONLY, lambda p, m, f: p.uptime_response(m, 1, FORGED)[:-1] + b"\x00"),
    # finding F10: an authentic reply stamped with older boots than the engine's
    (
        "stale_boots",
        "time_window",
        AUTH_ONLY,
        lambda p, m, f: p.uptime_response(m, 1, FORGED, boots=p.boots - 1),
    ),
    (
        "stale_time",
        "time_window",
        AUTH_ONLY,
        lambda p, m, f: p.uptime_response(m, 1, FORGED, time=p.time - usm.TIME_WINDOW - 5),
    ),
    (
        "other_request_id",
        "request_id",
        AUTH_ONLY,
        lambda p, m, f: p.reply(m, 1, pdu(m + 1, [(SYS_UPTIME, 0x43, FORGED)])),
    ),
    (
        "unauthenticated_time_report",
        "unauthenticated_report",
        AUTH_ONLY,
        lambda p, m, f: p.reply(m, 0, report_pdu(m, usm.NOT_IN_TIME_WINDOW), boots=9, time=0),
    ),
]


@pytest.mark.parametrize(
    ("reason", "creds", "forge"), [f[1:] for f in FORGERIES], ids=[f[0] for f in FORGERIES]
)
async def test_forged_reply_is_dropped_counted_and_the_real_one_kept(
    reason: str, creds: usm.Credentials, forge: Forge, closing: list[Callable[[], object]]
) -> None:
    # prime the engine (trusted boots/time) with one honest exchange, then forge
    peer, walker, close = await start(creds)
    closing += [close, walker.close]
    assert (await walker.get([SYS_UPTIME]))[0][2] == peer.uptime
    peer.script = forged_first(forge)
    (_, _, value), *_ = await walker.get([SYS_UPTIME])
    assert value == peer.uptime != FORGED
    assert walker.dropped[reason] == 1, dict(walker.dropped)
    assert (walker.engine.boots, walker.engine.trusted) == (peer.boots, True)


async def test_downgrade_alone_is_never_accepted(closing: list[Callable[[], object]]) -> None:
    def only_forged(peer: V3Peer, msg_id: int, flags: int) -> list[bytes]:
        if flags & usm.FLAG_AUTH:
            return [peer.uptime_response(msg_id, 0, FORGED)]
        return honest(peer, msg_id, flags)

    _, walker, close = await start(AUTH_PRIV, only_forged)
    closing += [close, walker.close]
    with pytest.raises(SourceError) as e:
        await walker.get([SYS_UPTIME])
    assert e.value.status == "invalid_response" and "receive checks" in str(e.value)
    assert walker.dropped["security_level"] == 1


@pytest.mark.parametrize("boots", [-1, 2**31, 2**32 + 5])
async def test_poisoned_engine_report_never_breaks_the_target(
    boots: int, closing: list[Callable[[], object]]
) -> None:
    """Finding F9: an unauthenticated unknownEngineID Report with boots -1, at discovery and later."""
    sent = {"poisoned": 0}

    def poison(peer: V3Peer, msg_id: int, flags: int) -> list[bytes]:
        bad = plain_v3(msg_id, 0, peer.engine_id, boots, -1, b"", report_pdu(msg_id, usm.UNKNOWN_ENGINE_ID))
        if not flags & usm.FLAG_AUTH or sent["poisoned"] > 2:
            return [bad] if not flags & usm.FLAG_AUTH else honest(peer, msg_id, flags)
        sent["poisoned"] += 1
        return [bad, *honest(peer, msg_id, flags)]

    peer, walker, close = await start(AUTH_PRIV, poison)
    closing += [close, walker.close]
    for _ in range(4):  # discovery poisoned (values ignored), then a poisoned report per request
        assert (await walker.get([SYS_UPTIME]))[0][2] == peer.uptime
    assert usm.in_range(walker.engine.boots) and walker.engine.boots == peer.boots
    assert walker.dropped["unauthenticated_report"] == 3
