"""The SNMP transports behind the ``walk.Walker`` seam, and which one a target gets (``make_walker``).

- ``V2cWalker``: SNMPv2c over asyncio UDP with the BER codec of ``ber`` (the fast path: decoding
  dominates a large walk and pyasn1 is the slow part of pysnmp);
- ``V3Walker``: SNMPv3 with our own USM (``usm``) over the same codec;
- ``PysnmpWalker``: SNMPv3 through ``pysnmp.hlapi.v3arch.asyncio`` with one SnmpEngine per source and no
  MIB lookups, for the privacy protocols our USM does not implement (DES, 3DES).

At most one request is in flight per agent address (``agent_gate``). A v2c agent that does not know the
community stays silent, so a wrong community reads as a timeout.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import importlib
import itertools
import os
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from collector.config import SnmpConfig
from collector.errors import (
    AuthError,
    ConfigError,
    InvalidResponse,
    SourceError,
    TimeoutError_,
    UnreachableError,
)
from collector.sources.snmp import usm
from collector.sources.snmp.ber import (
    EXCEPTIONS,
    REPORT,
    BerError,
    Oid,
    VarBind,
    decode_response,
    encode_pdu,
    encode_request,
    request_id_of,
)
from collector.sources.snmp.walk import TOO_BIG, AgentError, Budget, Walker

Reply = tuple[int, int, int, list[VarBind]]
"""``(request_id, error_status, error_index, varbinds)`` of an accepted response."""


class Dropped(Exception):
    """A datagram that fails the receive checks: discarded, counted, and the request keeps waiting."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason  # the ``reason`` label of spanwatch_snmp_dropped_packets_total


@dataclass(eq=False)
class _Pending:
    """One request on the wire: its future and the checks a reply to it must pass."""

    future: asyncio.Future[Reply]
    accept: Callable[[bytes], Reply]
    dropped: Dropped | None = None


class _Datagrams(asyncio.DatagramProtocol):
    """Routes each datagram to the request it names and runs that request's receive checks on it.

    Checking here, not in the waiting task, means a forged or broken datagram is dropped and the request
    keeps waiting for the real answer within its timeout.
    """

    def __init__(self, key_of: Callable[[bytes], int | None], on_drop: Callable[[str], None]) -> None:
        self.key_of = key_of
        self.on_drop = on_drop
        self.waiting: dict[int, _Pending] = {}
        self.garbage = 0
        self.error: OSError | None = None

    def datagram_received(self, data: bytes, addr: Any) -> None:
        key = self.key_of(data)
        pending = self.waiting.get(key) if key is not None else None
        if pending is None or pending.future.done():
            self.garbage += key is None
            self.on_drop("malformed" if key is None else "unmatched")
            return
        try:
            pending.future.set_result(pending.accept(data))
        except Dropped as e:
            pending.dropped = e
            self.on_drop(e.reason)
        except Exception as e:  # what the reply means for the request (a Report), or a bug: the request's
            pending.future.set_exception(e)

    def error_received(self, exc: Exception) -> None:
        # ICMP port unreachable surfaces here (ConnectionRefusedError) on a connected UDP socket.
        self.error = exc if isinstance(exc, OSError) else OSError(str(exc))
        for pending in self.waiting.values():
            if not pending.future.done():
                pending.future.set_exception(self.error)


_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, int], asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def agent_gate(host: str, port: int) -> asyncio.Lock:
    """The lock that keeps one request in flight per agent address, shared by every walker in this loop.

    Several targets can sit behind one agent (one address, several contexts or communities); a slow
    agent then answers one request at a time instead of dropping a burst (snmp_exporter and gufo-snmp
    limit per agent the same way).
    """
    per_loop = _gates.setdefault(asyncio.get_running_loop(), {})
    return per_loop.setdefault((host, port), asyncio.Lock())


NO_V2C_RESPONSE = (
    "no response (wrong community? an agent ignores an unknown one; or the agent is unreachable)"
)


class V2cWalker:
    """SNMPv2c GET/GETBULK with the ``ber`` codec.

    Args:
        host: agent address.
        port: agent UDP port.
        community: the community string.
        timeout: seconds to wait for one response.
        retries: resends after a timeout.
    """

    def __init__(
        self, host: str, port: int, community: str, timeout: float, retries: int, budget: Budget | None = None
    ) -> None:
        self.host, self.port = host, port
        self.budget = budget or Budget()  # shrunk on tooBig and timeouts, read by the walk
        self.community = community.encode()
        self.timeout, self.retries = timeout, retries
        self._ids = itertools.count(int.from_bytes(os.urandom(3), "big") + 1)
        self._transport: asyncio.DatagramTransport | None = None
        self._proto: _Datagrams | None = None
        self.dropped: collections.Counter[str] = collections.Counter()

    async def _open(self) -> tuple[asyncio.DatagramTransport, _Datagrams]:
        if self._transport is None or self._proto is None or self._transport.is_closing():
            loop = asyncio.get_running_loop()
            try:
                self._transport, self._proto = await loop.create_datagram_endpoint(
                    lambda: _Datagrams(self._key_of, self._count_drop), remote_addr=(self.host, self.port)
                )
            except OSError as e:
                raise UnreachableError(f"{self.host}:{self.port}: {e.strerror or e}") from None
        return self._transport, self._proto

    def _count_drop(self, reason: str) -> None:
        self.dropped[reason] += 1

    async def get(self, oids: Sequence[Oid]) -> list[VarBind]:
        return await self._request(oids, 0)

    async def bulk(self, oids: Sequence[Oid], max_repetitions: int) -> list[VarBind]:
        return await self._request(oids, max_repetitions)

    async def _request(self, oids: Sequence[Oid], reps: int) -> list[VarBind]:
        while True:
            _, status, index, binds = await self._exchange(oids, reps)
            if status == TOO_BIG and reps > 1:
                reps //= 2  # the agent cannot fit the answer in one datagram: ask for less
                self.budget.shrink()  # and remember it for this agent
                continue
            if status:
                raise AgentError(f"{self.host}:{self.port}: error-status {status} at varbind {index}")
            return binds

    def _key_of(self, data: bytes) -> int | None:
        """The id that routes a datagram to its request (v2c: the request-id)."""
        return request_id_of(data)

    def _encode(self, rid: int, oids: Sequence[Oid], reps: int) -> tuple[bytes, Callable[[bytes], Reply]]:
        """The datagram of one request and the checks its reply must pass."""

        def accept(data: bytes) -> Reply:
            try:
                reply = decode_response(data)
            except BerError as e:
                raise Dropped("malformed", f"malformed response ({e})") from None
            if reply[0] != rid:
                raise Dropped("request_id", "request-id does not match the request")
            return reply

        return encode_request(self.community, rid, oids, reps), accept

    async def _exchange(self, oids: Sequence[Oid], reps: int) -> Reply:
        transport, proto = await self._open()
        where = f"{self.host}:{self.port}"
        garbage, dropped = proto.garbage, None
        loop = asyncio.get_running_loop()
        for _ in range(self.retries + 1):
            rid = next(self._ids) & 0x7FFFFFFF
            async with agent_gate(self.host, self.port):
                data, accept = self._encode(rid, oids, reps)
                pending = _Pending(loop.create_future(), accept)
                proto.waiting[rid] = pending
                try:
                    transport.sendto(data)
                    # asyncio.timeout, not wait_for: on 3.11 wait_for returns a result that lands together
                    # with a cancellation and swallows the cancel, which let polls outlive their deadline.
                    async with asyncio.timeout(self.timeout):
                        return await pending.future
                except TimeoutError:
                    dropped = pending.dropped or dropped
                    if reps > 1:  # a slow agent may answer a smaller request in time
                        reps //= 2
                        self.budget.shrink()
                    continue
                except OSError as e:
                    raise UnreachableError(f"{where}: {e.strerror or e}") from None
                finally:
                    proto.waiting.pop(rid, None)
        if dropped is not None:
            raise InvalidResponse(f"{where}: only replies that failed the receive checks ({dropped})")
        if proto.garbage > garbage:
            raise InvalidResponse(f"{where}: only undecodable datagrams received")
        # An agent drops a request with a community it does not know, silently (RFC 3584 4.1): from here a
        # wrong community and an unreachable agent look alike, so the message names both.
        raise TimeoutError_(f"{where}: {NO_V2C_RESPONSE}")

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = self._proto = None


# -- v3: own USM over the same codec -----------------------------------------------------------------


class _Resync(Exception):
    """The agent gave us fresh engine ID / boots / time (a Report); the request is sent again."""


_AUTH_REPORTS = {
    usm.UNKNOWN_USER: "unknown user name",
    usm.WRONG_DIGEST: "wrong digest (authentication key or protocol)",
    usm.UNSUPPORTED_SEC_LEVEL: "security level not supported for this user",
    usm.DECRYPTION_ERROR: "decryption error (privacy key or protocol)",
}
_ENGINE_ID_SIZE = range(5, 33)  # SnmpEngineID SIZE(5..32), RFC 3411


class V3Walker(V2cWalker):
    """SNMPv3 GET/GETBULK with our own USM (``usm``): SHA-1/SHA-2/MD5 auth, AES privacy.

    Every reply passes the receive checks of RFC 3412 7.2 and RFC 3414 3.2 (``usm.receive``) or is
    dropped and counted. The engine ID is learnt only from the unauthenticated discovery exchange, and
    boots/time only from authenticated messages, so a spoofed Report cannot steer or stop the walker:
    at worst it costs one request, after which the engine is discovered again.
    A wrong privacy key reads as a timeout: net-snmp drops what it cannot decrypt without a Report.

    Args:
        host: agent address.
        port: agent UDP port.
        creds: the USM user.
        timeout: seconds to wait for one response.
        retries: resends after a timeout.
    """

    def __init__(
        self,
        host: str,
        port: int,
        creds: usm.Credentials,
        timeout: float,
        retries: int,
        budget: Budget | None = None,
    ) -> None:
        super().__init__(host, port, "", timeout, retries, budget)
        self.creds = creds
        self.engine = usm.Engine()
        self._suspect = False  # a report or a stale message hinted that the engine changed

    def _key_of(self, data: bytes) -> int | None:
        return usm.msg_id_of(data)

    def _encode(self, rid: int, oids: Sequence[Oid], reps: int) -> tuple[bytes, Callable[[bytes], Reply]]:
        engine = self.engine
        discovery = not engine.engine_id
        header = usm.request_header(self.creds, engine, engine.now(time.monotonic()), rid, discovery)
        data = usm.wrap(self.creds, header, encode_pdu(rid, oids, reps))
        sent = usm.Sent(header, discovery)
        return data, lambda reply: self._accept(sent, reply)

    def _accept(self, sent: usm.Sent, data: bytes) -> Reply:
        now = time.monotonic()
        try:
            msg = usm.receive(data, self.creds, sent, self.engine, now)
        except usm.Drop as e:
            self._suspect |= e.reason == "time_window"
            raise Dropped(e.reason, str(e)) from None
        if sent.discovery and msg.pdu_tag != REPORT:
            # The discovery probe is answered by a Report (RFC 3414 4); a Response to it can only be a
            # forgery (its msgID is in clear), and taking it would end discovery with no engine ID.
            raise Dropped("discovery", "a Response to the engine discovery probe, where a Report is due")
        if msg.authenticated:
            self.engine.learn(msg.boots, msg.time, now)
            self._suspect = False
        if msg.pdu_tag == REPORT:
            self._report(msg, sent)
        return msg.request_id, msg.status, msg.index, msg.binds

    def _report(self, msg: usm.Message, sent: usm.Sent) -> None:
        where = f"{self.host}:{self.port}"
        report = msg.report()
        if report in _AUTH_REPORTS:
            # Agents send these unauthenticated (RFC 3412 7.1.3e): a forged one fails one request only.
            raise AuthError(
                f"{where}: SNMPv3 user {self.creds.user.decode(errors='replace')!r}: {_AUTH_REPORTS[report]}"
            )
        if report == usm.UNKNOWN_ENGINE_ID and sent.discovery:
            if len(msg.engine_id) not in _ENGINE_ID_SIZE:
                raise Dropped(
                    "engine_id", f"discovery report with an engine ID of {len(msg.engine_id)} bytes"
                )
            # Unauthenticated boots/time only seed what we send; out of range they are ignored, and the
            # first authenticated message (a time-window Report if needed) sets the real values.
            ok = usm.in_range(msg.boots) and usm.in_range(msg.time)
            boots, etime = (msg.boots, msg.time) if ok else (0, 0)
            self.engine = usm.Engine(msg.engine_id, boots, etime, time.monotonic())
            raise _Resync
        if report == usm.NOT_IN_TIME_WINDOW and msg.authenticated:
            raise _Resync  # boots/time were learnt in _accept
        if report in (usm.UNKNOWN_ENGINE_ID, usm.NOT_IN_TIME_WINDOW):
            self._suspect = True
            raise Dropped("unauthenticated_report", "unauthenticated engine report outside discovery")
        raise InvalidResponse(f"{where}: unexpected report {msg.binds[:1]}")

    async def _request(self, oids: Sequence[Oid], reps: int) -> list[VarBind]:
        if self._suspect:
            self.engine, self._suspect = usm.Engine(), False  # discover again: never stuck on old state
        if not self.engine.engine_id:
            await self._discover()
        for _ in range(2):
            try:
                return await super()._request(oids, reps)
            except _Resync:
                continue
            except TimeoutError_ as e:
                if self.creds.priv:
                    # net-snmp drops a scopedPDU it cannot decrypt, without a Report
                    raise TimeoutError_(
                        f"{e} (with SNMPv3 privacy, a wrong priv key also reads as silence)"
                    ) from None
                raise
        self._suspect = True
        raise AuthError(f"{self.host}:{self.port}: the agent keeps rejecting our engine boots/time")

    async def _discover(self) -> None:
        with contextlib.suppress(_Resync):
            await self._exchange([], 0)
        if not self.engine.engine_id:
            raise InvalidResponse(f"{self.host}:{self.port}: engine ID discovery got no engine ID")


# -- v3 (and anything else) through pysnmp ----------------------------------------------------------


@contextlib.contextmanager
def _quiet_pysmi() -> Iterator[None]:
    """Silence the DeprecationWarnings pysnmp 7 triggers in pysmi (its MIB compiler hookup).

    ``catch_warnings`` is process-wide; this only wraps the pysnmp fallback (DES/3DES privacy).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def hlapi() -> Any:
    """``pysnmp.hlapi.v3arch.asyncio``, imported with its dependencies' deprecation warnings silenced.

    pysnmp 7 imports pysmi names that pysmi deprecates; the warning is theirs, not ours.
    """
    with _quiet_pysmi():
        return importlib.import_module("pysnmp.hlapi.v3arch.asyncio")


_AUTH_ERRORS = (
    "UnknownUserName",
    "WrongDigest",
    "DecryptionError",
    "AuthenticationError",
    "AuthenticationFailure",
    "UnknownSecurityName",
    "UnsupportedSecurityLevel",
    "UnsupportedAuthProtocol",
    "UnsupportedPrivProtocol",
    "NotInTimeWindow",
    "NoEncryption",
    "NoAuthentication",
    "UnknownCommunityName",
)


def _indication_error(where: str, indication: Any) -> SourceError:
    name = type(indication).__name__
    if name == "RequestTimedOut":
        return TimeoutError_(f"{where}: no response")
    if name in _AUTH_ERRORS:
        return AuthError(f"{where}: {indication}")
    if name in ("ParseError", "DeserializationError", "InvalidMsg", "OidNotIncreasing", "EmptyResponse"):
        return InvalidResponse(f"{where}: {indication}")
    return UnreachableError(f"{where}: {indication}")


def _from_pysnmp(name: Any, value: Any) -> VarBind:
    tag_obj = value.tagSet[0]
    tag = tag_obj.tagClass | tag_obj.tagId
    decoded: object
    if tag in EXCEPTIONS or tag == 0x05:
        decoded = None
    elif tag in (0x04, 0x40, 0x44):
        decoded = bytes(value.asOctets())
    elif tag == 0x06:
        decoded = tuple(value)
    else:
        decoded = int(value)
    return tuple(name), tag, decoded


class PysnmpWalker:
    """GET/GETBULK through pysnmp's asyncio hlapi (used for SNMPv3).

    Args:
        host: agent address.
        port: agent UDP port.
        auth: a pysnmp ``UsmUserData`` or ``CommunityData``.
        timeout: seconds per request.
        retries: resends after a timeout.
    """

    def __init__(self, host: str, port: int, auth: Any, timeout: float, retries: int) -> None:
        hl = hlapi()
        self.host, self.port, self.auth = host, port, auth
        self.timeout, self.retries = timeout, retries
        with _quiet_pysmi():
            self.engine = hl.SnmpEngine()
        self.context = hl.ContextData()
        self._target: Any = None

    async def _target_for(self) -> Any:
        if self._target is None:
            try:
                self._target = await hlapi().UdpTransportTarget.create(
                    (self.host, self.port), timeout=self.timeout, retries=self.retries
                )
            except Exception as e:  # pysnmp wraps resolver failures in its own error type
                raise UnreachableError(f"{self.host}:{self.port}: {e}") from None
        return self._target

    async def get(self, oids: Sequence[Oid]) -> list[VarBind]:
        target = await self._target_for()
        async with agent_gate(self.host, self.port):
            with _quiet_pysmi():
                res = await hlapi().get_cmd(
                    self.engine, self.auth, target, self.context, *_object_types(oids), lookupMib=False
                )
        return self._result(res)

    async def bulk(self, oids: Sequence[Oid], max_repetitions: int) -> list[VarBind]:
        target = await self._target_for()
        async with agent_gate(self.host, self.port):
            with _quiet_pysmi():
                res = await hlapi().bulk_cmd(
                    self.engine,
                    self.auth,
                    target,
                    self.context,
                    0,
                    max_repetitions,
                    *_object_types(oids),
                    lookupMib=False,
                )
        return self._result(res)

    def _result(self, res: Any) -> list[VarBind]:
        indication, status, index, binds = res
        where = f"{self.host}:{self.port}"
        if indication:
            raise _indication_error(where, indication)
        if int(status):
            raise AgentError(f"{where}: error-status {status} at varbind {index}")
        return [_from_pysnmp(name, value) for name, value in binds]

    async def close(self) -> None:
        self.engine.close_dispatcher()


def _object_types(oids: Sequence[Oid]) -> list[Any]:
    hl = hlapi()
    return [hl.ObjectType(hl.ObjectIdentity(".".join(map(str, o)))) for o in oids]


# -- the map-backed fake --------------------------------------------------------------------------


_AUTH = {
    "MD5": "usmHMACMD5AuthProtocol",
    "SHA": "usmHMACSHAAuthProtocol",
    "SHA224": "usmHMAC128SHA224AuthProtocol",
    "SHA256": "usmHMAC192SHA256AuthProtocol",
    "SHA384": "usmHMAC256SHA384AuthProtocol",
    "SHA512": "usmHMAC384SHA512AuthProtocol",
}
# AES-192/256 key localisation differs between vendors; net-snmp (and most Linux agents) use the
# Blumenthal draft extension, so that is the default here.
_PRIV = {
    "DES": "usmDESPrivProtocol",
    "3DES": "usm3DESEDEPrivProtocol",
    "AES": "usmAesCfb128Protocol",
    "AES128": "usmAesCfb128Protocol",
    "AES192": "usmAesBlumenthalCfb192Protocol",
    "AES256": "usmAesBlumenthalCfb256Protocol",
}


def make_walker(cfg: SnmpConfig, timeout: float, budget: Budget | None = None) -> Walker:
    """The transport for ``cfg``: our own v2c or v3 (USM) walker, or pysnmp for DES/3DES privacy.

    Args:
        cfg: the target's ``snmp`` section.
        timeout: seconds for a whole request, shared by the first try and the retries.
        budget: the target's adaptive request size, shrunk by our own walkers on tooBig and timeouts.

    Returns:
        the walker.

    Raises:
        ConfigError: a secret cannot be read, or a v2c target has no community.
    """
    host, _, port = cfg.address.rpartition(":")
    host = host.strip("[]")
    per_request = timeout / (cfg.retries + 1)
    if cfg.version == "2c":
        if cfg.community is None:
            raise ConfigError("snmp: SNMPv2c needs community_env or community_file")
        return V2cWalker(host, int(port), cfg.community.read(), per_request, cfg.retries, budget)
    if usm.supports(cfg.auth_protocol, cfg.priv_protocol):
        return V3Walker(host, int(port), _credentials(cfg), per_request, cfg.retries, budget)
    return PysnmpWalker(host, int(port), _usm(cfg), per_request, cfg.retries)


def _credentials(cfg: SnmpConfig) -> usm.Credentials:
    """The USM user of ``cfg`` for ``V3Walker`` (secrets read now)."""
    auth_key, priv_key = cfg.auth_key, cfg.priv_key
    return usm.Credentials(
        user=(cfg.user or "").encode(),
        auth=cfg.auth_protocol if auth_key is not None else None,
        auth_password=auth_key.read().encode() if auth_key is not None else b"",
        priv=cfg.priv_protocol if priv_key is not None else None,
        priv_password=priv_key.read().encode() if priv_key is not None else b"",
    )


def _usm(cfg: SnmpConfig) -> Any:
    """The pysnmp ``UsmUserData`` of ``cfg`` (the fallback for what ``usm`` does not implement)."""
    hl = hlapi()
    kwargs: dict[str, Any] = {}
    if cfg.auth_protocol is not None and cfg.auth_key is not None:
        kwargs["authKey"] = cfg.auth_key.read()
        kwargs["authProtocol"] = getattr(hl, _AUTH[cfg.auth_protocol])
    if cfg.priv_protocol is not None and cfg.priv_key is not None:
        kwargs["privKey"] = cfg.priv_key.read()
        kwargs["privProtocol"] = getattr(hl, _PRIV[cfg.priv_protocol])
    return hl.UsmUserData(cfg.user, **kwargs)
