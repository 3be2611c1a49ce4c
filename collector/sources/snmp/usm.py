"""SNMPv3 User-based Security Model (RFC 3414) over the ``ber`` PDU codec.

What is implemented, and verified against net-snmp's ``snmpd`` (tests/integration/test_snmpd.py):

- keys: password-to-key (1 MiB of the repeated passphrase through the hash) and localisation with the
  agent's engine ID (RFC 3414 A.2), with the auth protocol's hash (RFC 7860 for SHA-2);
- authentication: HMAC-MD5/SHA-1 (12 bytes) and HMAC-SHA-224/256/384/512 truncated to 16/24/32/48 bytes
  (RFC 7860);
- privacy: AES-CFB128 (RFC 3826) with a 128-bit key, and 192/256-bit keys extended the way net-snmp does
  (draft-blumenthal-aes-usm-04: append H(key) while too short);
- engine discovery through a Report (usmStatsUnknownEngineIDs) and time synchronisation through the
  authenticated usmStatsNotInTimeWindows Report.

DES and 3DES privacy are not implemented here; the caller falls back to pysnmp for them.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from collector.sources.snmp.ber import (
    REPORT,
    RESPONSE_PDUS,
    TAG_INTEGER,
    TAG_OCTETS,
    BerError,
    Oid,
    VarBind,
    decode_pdu,
    encode_int,
    encode_pdu,
    expect,
    read_int,
    read_tlv,
    tlv,
)

# auth protocol -> (hash constructor, truncated MAC length)
AUTH: Final[dict[str, tuple[Callable[..., hashlib._Hash], int]]] = {
    "MD5": (hashlib.md5, 12),
    "SHA": (hashlib.sha1, 12),
    "SHA224": (hashlib.sha224, 16),
    "SHA256": (hashlib.sha256, 24),
    "SHA384": (hashlib.sha384, 32),
    "SHA512": (hashlib.sha512, 48),
}
# priv protocol -> AES key length in bytes
PRIV: Final[dict[str, int]] = {"AES": 16, "AES128": 16, "AES192": 24, "AES256": 32}

FLAG_AUTH, FLAG_PRIV, FLAG_REPORTABLE = 1, 2, 4
_USM = 3
_MAX_SIZE = 65507
_ACCEPTED = RESPONSE_PDUS | {REPORT}
_PASSWORD_BYTES = 1_048_576
MAX_BOOTS: Final = 2**31 - 1
TIME_WINDOW: Final = 150  # seconds (RFC 3414 3.2 step 7)
_KEY_CACHE = 4  # engine IDs whose localised keys are kept (one agent has one; a few for changes)

USM_STATS: Final[Oid] = (1, 3, 6, 1, 6, 3, 15, 1, 1)
UNSUPPORTED_SEC_LEVEL, NOT_IN_TIME_WINDOW, UNKNOWN_USER, UNKNOWN_ENGINE_ID, WRONG_DIGEST, DECRYPTION_ERROR = (
    1,
    2,
    3,
    4,
    5,
    6,
)
REPORT_NAMES: Final[dict[int, str]] = {
    UNSUPPORTED_SEC_LEVEL: "usmStatsUnsupportedSecLevels",
    NOT_IN_TIME_WINDOW: "usmStatsNotInTimeWindows",
    UNKNOWN_USER: "usmStatsUnknownUserNames",
    UNKNOWN_ENGINE_ID: "usmStatsUnknownEngineIDs",
    WRONG_DIGEST: "usmStatsWrongDigests",
    DECRYPTION_ERROR: "usmStatsDecryptionErrors",
}


class UsmError(ValueError):
    """A v3 message that fails USM processing (bad digest, undecryptable, malformed)."""


def supports(auth: str | None, priv: str | None) -> bool:
    """Whether this module handles ``auth``/``priv`` (otherwise the caller uses pysnmp)."""
    return (auth is None or auth in AUTH) and (priv is None or priv in PRIV)


def password_to_key(password: bytes, hash_new: Callable[..., hashlib._Hash]) -> bytes:
    """RFC 3414 A.2: hash 1 MiB of the repeated passphrase.

    Raises:
        UsmError: an empty passphrase.
    """
    if not password:
        raise UsmError("empty passphrase")
    repeated = password * (_PASSWORD_BYTES // len(password) + 1)
    return hash_new(repeated[:_PASSWORD_BYTES]).digest()


def localize(key: bytes, engine_id: bytes, hash_new: Callable[..., hashlib._Hash]) -> bytes:
    """RFC 3414 A.2: Kul = H(Ku || engineID || Ku)."""
    return hash_new(key + engine_id + key).digest()


def extend_blumenthal(key: bytes, size: int, hash_new: Callable[..., hashlib._Hash]) -> bytes:
    """Extend a localised key to ``size`` bytes by appending H(key) (net-snmp, Blumenthal draft)."""
    while len(key) < size:
        key += hash_new(key).digest()
    return key[:size]


@dataclass
class Credentials:
    """A user's passphrases and protocols; localised keys are derived per engine ID and cached."""

    user: bytes
    auth: str | None = None
    auth_password: bytes = b""
    priv: str | None = None
    priv_password: bytes = b""
    _local: dict[bytes, tuple[bytes, bytes]] = field(default_factory=dict, repr=False)

    @property
    def flags(self) -> int:
        """msgFlags for a request at this user's security level (reportable)."""
        return FLAG_REPORTABLE | (FLAG_AUTH if self.auth else 0) | (FLAG_PRIV if self.priv else 0)

    def keys(self, engine_id: bytes) -> tuple[bytes, bytes]:
        """The localised (auth key, AES key) for ``engine_id``; empty when not used."""
        cached = self._local.get(engine_id)
        if cached is not None:
            return cached
        auth_key = priv_key = b""
        if self.auth:
            hash_new = AUTH[self.auth][0]
            auth_key = localize(password_to_key(self.auth_password, hash_new), engine_id, hash_new)
            if self.priv:
                raw = localize(password_to_key(self.priv_password, hash_new), engine_id, hash_new)
                priv_key = extend_blumenthal(raw, PRIV[self.priv], hash_new)
        if len(self._local) >= _KEY_CACHE:
            self._local.clear()  # bounded: a stream of engine IDs must not grow the cache
        self._local[engine_id] = (auth_key, priv_key)
        return auth_key, priv_key


@dataclass
class Engine:
    """What the manager knows about the authoritative (agent) engine."""

    engine_id: bytes = b""
    boots: int = 0
    time: int = 0
    synced_at: float = 0.0  # monotonic seconds when ``time`` was read
    trusted: bool = False  # boots/time came from an authenticated message (the time-window baseline)

    def now(self, monotonic: float) -> int:
        """The agent's snmpEngineTime estimate at ``monotonic``."""
        return self.time + int(monotonic - self.synced_at)

    def learn(self, boots: int, etime: int, monotonic: float) -> None:
        """Advance to an authenticated message's boots/time when newer (RFC 3414 3.2 step 7b)."""
        if not self.trusted or boots > self.boots or (boots == self.boots and etime > self.time):
            self.boots, self.time, self.synced_at, self.trusted = boots, etime, monotonic, True


@dataclass
class Message:
    """A decoded v3 message (after authentication check and decryption)."""

    msg_id: int
    flags: int
    engine_id: bytes
    boots: int
    time: int
    user: bytes
    pdu_tag: int
    request_id: int
    status: int
    index: int
    binds: list[VarBind]
    authenticated: bool = False

    def report(self) -> int | None:
        """The usmStats counter a Report names (1..6), or None for another report or a response."""
        if self.pdu_tag != REPORT or not self.binds:
            return None
        oid = self.binds[0][0]
        if len(oid) == len(USM_STATS) + 2 and oid[: len(USM_STATS)] == USM_STATS:
            return oid[len(USM_STATS)]
        return None


_salt = int.from_bytes(os.urandom(8), "big")


def _next_salt() -> bytes:
    global _salt
    _salt = (_salt + 1) & 0xFFFF_FFFF_FFFF_FFFF
    return _salt.to_bytes(8, "big")


def _aes(key: bytes, iv: bytes, data: bytes, encrypt: bool) -> bytes:
    # Imported on first use: only SNMPv3 with privacy needs it, and it costs every process ~7 MB.
    from cryptography.hazmat.decrepit.ciphers.modes import CFB
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    cipher = Cipher(algorithms.AES(key), CFB(iv))
    ctx = cipher.encryptor() if encrypt else cipher.decryptor()
    return ctx.update(data) + ctx.finalize()


def encode(
    creds: Credentials,
    engine: Engine,
    engine_time: int,
    msg_id: int,
    oids: Sequence[Oid],
    max_repetitions: int,
    discovery: bool = False,
) -> bytes:
    """A v3 GetRequest/GetBulkRequest message, authenticated and encrypted per ``creds``.

    Args:
        creds: the user.
        engine: the agent's engine ID and boots.
        engine_time: the agent's engine time estimate.
        msg_id: msgID, also used as request-id.
        oids: the variables.
        max_repetitions: 0 for GET, else GETBULK repetitions.
        discovery: an unauthenticated probe with an empty user and engine ID (to learn the engine ID).

    Returns:
        the datagram.

    Raises:
        UsmError: boots or time outside 0..2^31-1 (never sent: the agent would reject it anyway).
    """
    header = request_header(creds, engine, engine_time, msg_id, discovery)
    return wrap(creds, header, encode_pdu(msg_id, oids, max_repetitions))


@dataclass(frozen=True, slots=True)
class Header:
    """The clear-text fields of a v3 message that USM processing reads (RFC 3412 6, RFC 3414 2.4)."""

    msg_id: int
    flags: int
    engine_id: bytes
    boots: int
    time: int
    user: bytes

    @property
    def level(self) -> int:
        """The security level as the auth/priv bits of msgFlags."""
        return self.flags & (FLAG_AUTH | FLAG_PRIV)


def request_header(
    creds: Credentials, engine: Engine, engine_time: int, msg_id: int, discovery: bool
) -> Header:
    """The header of a request: the user's level, or an unauthenticated discovery probe (RFC 3414 4)."""
    if discovery:
        return Header(msg_id, FLAG_REPORTABLE, b"", 0, 0, b"")
    return Header(msg_id, creds.flags, engine.engine_id, engine.boots, engine_time, creds.user)


def wrap(creds: Credentials, header: Header, pdu: bytes) -> bytes:
    """Frame ``pdu`` (any PDU TLV) as a v3 message at ``header``'s security level: MAC and encryption.

    Raises:
        UsmError: boots/time out of range, or a level the user has no keys for.
    """
    if not (in_range(header.boots) and in_range(header.time)):
        raise UsmError(f"engine boots/time out of range ({header.boots}, {header.time})")
    flags = header.flags
    if (flags & FLAG_AUTH and creds.auth is None) or (flags & FLAG_PRIV and creds.priv is None):
        raise UsmError("security level above the user's keys")
    scoped = tlv(0x30, tlv(TAG_OCTETS, header.engine_id) + tlv(TAG_OCTETS, b"") + pdu)
    auth_key, priv_key = creds.keys(header.engine_id) if flags & FLAG_AUTH else (b"", b"")
    mac_len = AUTH[creds.auth][1] if flags & FLAG_AUTH and creds.auth else 0
    salt = b""
    if flags & FLAG_PRIV:
        salt = _next_salt()
        iv = header.boots.to_bytes(4, "big") + header.time.to_bytes(4, "big") + salt
        scoped = tlv(TAG_OCTETS, _aes(priv_key, iv, scoped, encrypt=True))
    head = (
        tlv(TAG_OCTETS, header.engine_id)
        + encode_int(header.boots)
        + encode_int(header.time)
        + tlv(TAG_OCTETS, header.user)
    )
    auth_tlv = tlv(TAG_OCTETS, b"\x00" * mac_len)
    salt_tlv = tlv(TAG_OCTETS, salt)
    sec = tlv(0x30, head + auth_tlv + salt_tlv)
    sec_outer = tlv(TAG_OCTETS, sec)
    global_data = tlv(
        0x30,
        encode_int(header.msg_id)
        + encode_int(_MAX_SIZE)
        + tlv(TAG_OCTETS, bytes((flags,)))
        + encode_int(_USM),
    )
    msg = tlv(0x30, encode_int(3) + global_data + sec_outer + scoped)
    if not mac_len:
        return msg
    # where the zeroed MAC sits: start of msgSecurityParameters, past its OCTET STRING and SEQUENCE
    # headers, past engine ID/boots/time/user, past the MAC's own header
    offset = len(msg) - len(scoped) - len(sec_outer)
    offset += len(sec_outer) - len(sec)
    offset += len(sec) - len(head) - len(auth_tlv) - len(salt_tlv)
    offset += len(head) + len(auth_tlv) - mac_len
    mac = hmac.new(auth_key, msg, AUTH[creds.auth or "SHA"][0]).digest()[:mac_len]
    return msg[:offset] + mac + msg[offset + mac_len :]


def in_range(value: int) -> bool:
    """Whether ``value`` fits snmpEngineBoots/snmpEngineTime (0..2^31-1, RFC 3414 2.2.1)."""
    return 0 <= value <= MAX_BOOTS


def msg_id_of(buf: bytes) -> int | None:
    """The msgID of a v3 message, or None (used to route responses to requests)."""
    try:
        end = len(buf)
        start, stop = expect(buf, 0, end, 0x30)
        _, pos = read_int(buf, start, stop)
        g_start, g_end = expect(buf, pos, stop, 0x30)
        return read_int(buf, g_start, g_end)[0]
    except BerError:
        return None


def decode(buf: bytes, creds: Credentials) -> Message:
    """Decode a v3 Response/Report with no request to check it against (tools and tests).

    Checks the MAC when the message claims authentication and decrypts when it claims privacy; the
    walker uses ``receive``, which also holds the message to the request it answers.

    Raises:
        BerError: malformed BER.
        UsmError: wrong MAC, unknown security model, or a private message we cannot decrypt.
    """
    parsed = _parse(buf)
    if parsed.header.flags & FLAG_AUTH:
        _check_mac(buf, parsed.mac_at, parsed.mac, creds, parsed.header.engine_id)
    return _open(buf, parsed, creds)


class Drop(UsmError):
    """A reply the receive checks discard (RFC 3412 7.2, RFC 3414 3.2); ``reason`` labels its count."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Sent:
    """The outstanding request a reply must match (RFC 3412 7.2.10-7.2.12: the cached request)."""

    header: Header
    discovery: bool = False


def receive(buf: bytes, creds: Credentials, sent: Sent, engine: Engine, now: float) -> Message:
    """Decode a reply to ``sent`` and apply the receive checks; state is not changed here.

    A Response must come at the request's security level, for its user, from its engine, inside the time
    window, with its msgID and request-id. A lower level is only allowed for a Report (RFC 3412 7.1.3e:
    an agent reports an authentication failure unauthenticated, and a time-window one at authNoPriv).

    Args:
        buf: the datagram.
        creds: the user.
        sent: the request it claims to answer.
        engine: what is known of the agent's engine (for the time window).
        now: monotonic seconds (for the time window).

    Returns:
        the message; ``authenticated`` says whether its MAC was verified.

    Raises:
        Drop: the datagram fails a check; discard it and keep waiting.
    """
    try:
        parsed = _parse(buf)
    except UsmError as e:
        raise Drop("security_model", str(e)) from None
    except BerError as e:
        raise Drop("malformed", f"malformed message ({e})") from None
    head, want = parsed.header, sent.header
    if head.flags & FLAG_PRIV and not head.flags & FLAG_AUTH:
        raise Drop("security_level", "privacy without authentication (invalid msgFlags)")
    if head.level & ~want.level:
        raise Drop("security_level", "reply at a higher security level than the request")
    if head.msg_id != want.msg_id:
        raise Drop("msg_id", "msgID of another request")
    authenticated = bool(head.flags & FLAG_AUTH)
    if authenticated:
        # Only the engine and user asked can authenticate: also bounds key derivation to one engine ID.
        if head.engine_id != want.engine_id:
            raise Drop("engine_id", "authenticated reply from another engine ID")
        if head.user != want.user:
            raise Drop("user", "authenticated reply for another user")
        try:
            _check_mac(buf, parsed.mac_at, parsed.mac, creds, head.engine_id)
        except UsmError as e:
            raise Drop("digest", str(e)) from None
        _check_time(head, engine, now)
    try:
        msg = _open(buf, parsed, creds)
    except (BerError, UsmError) as e:
        raise Drop("malformed", f"undecodable scoped PDU ({e})") from None
    if msg.pdu_tag != REPORT:
        if head.level != want.level:
            raise Drop("security_level", "response below the request's security level")
        if head.user != want.user:
            raise Drop("user", "response for another user")
        if msg.request_id != want.msg_id:
            raise Drop("request_id", "request-id does not match the request")
    elif msg.request_id not in (want.msg_id, 0):
        # an agent that could not read the scoped PDU reports with request-id 0
        raise Drop("request_id", "report for another request")
    return msg


def _check_time(head: Header, engine: Engine, now: float) -> None:
    """RFC 3414 3.2 step 7b: an authenticated message must not be older than what we already trust."""
    if not (in_range(head.boots) and in_range(head.time)) or head.boots == MAX_BOOTS:
        raise Drop("time_window", f"engine boots/time out of range ({head.boots}, {head.time})")
    if not engine.trusted:
        return  # the first authenticated message sets the baseline (discovery values are unauthenticated)
    if head.boots < engine.boots or (
        head.boots == engine.boots and head.time < engine.now(now) - TIME_WINDOW
    ):
        raise Drop("time_window", "authenticated message outside the time window (stale boots/time)")


@dataclass(frozen=True, slots=True)
class _Parsed:
    header: Header
    mac_at: int
    mac: bytes
    salt: bytes
    data_at: int
    stop: int


def _parse(buf: bytes) -> _Parsed:
    end = len(buf)
    start, stop = expect(buf, 0, end, 0x30)
    if stop != end:
        raise BerError("trailing bytes after the message")
    version, pos = read_int(buf, start, stop)
    if version != 3:
        raise BerError(f"not SNMPv3 (version {version})")
    g_start, g_end = expect(buf, pos, stop, 0x30)
    msg_id, p = read_int(buf, g_start, g_end)
    _, p = read_int(buf, p, g_end)
    f_start, f_end = expect(buf, p, g_end, TAG_OCTETS)
    if f_end - f_start != 1:
        raise BerError("msgFlags is not one octet")
    flags = buf[f_start]
    model, _ = read_int(buf, f_end, g_end)
    if model != _USM:
        raise UsmError(f"security model {model} is not USM")
    s_start, s_end = expect(buf, g_end, stop, TAG_OCTETS)
    engine_id, boots, etime, user, mac_at, mac, salt = _security_parameters(buf, s_start, s_end)
    header = Header(msg_id, flags, engine_id, boots, etime, user)
    return _Parsed(header, mac_at, mac, salt, s_end, stop)


def _open(buf: bytes, parsed: _Parsed, creds: Credentials) -> Message:
    """Decrypt (when private) and decode the scoped PDU; the MAC was checked before."""
    head = parsed.header
    data_at, stop = parsed.data_at, parsed.stop
    if head.flags & FLAG_PRIV:
        c_start, c_end = expect(buf, data_at, stop, TAG_OCTETS)
        if not (in_range(head.boots) and in_range(head.time)):
            raise UsmError("engine boots/time out of range")
        _, priv_key = creds.keys(head.engine_id) if creds.auth else (b"", b"")
        if not priv_key or len(parsed.salt) != 8:
            raise UsmError("encrypted message without usable privacy parameters")
        iv = head.boots.to_bytes(4, "big") + head.time.to_bytes(4, "big") + parsed.salt
        buf, data_at, stop = _aes(priv_key, iv, buf[c_start:c_end], encrypt=False), 0, c_end - c_start
    sc_start, sc_end = expect(buf, data_at, stop, 0x30)
    _, p = expect(buf, sc_start, sc_end, TAG_OCTETS)
    _, p = expect(buf, p, sc_end, TAG_OCTETS)
    tag, request_id, status, index, binds = decode_pdu(buf, p, sc_end, _ACCEPTED)
    return Message(
        head.msg_id,
        head.flags,
        head.engine_id,
        head.boots,
        head.time,
        head.user,
        tag,
        request_id,
        status,
        index,
        binds,
        authenticated=bool(head.flags & FLAG_AUTH),
    )


def _security_parameters(
    buf: bytes, start: int, end: int
) -> tuple[bytes, int, int, bytes, int, bytes, bytes]:
    s_start, s_end = expect(buf, start, end, 0x30)
    e_start, p = expect(buf, s_start, s_end, TAG_OCTETS)
    engine_id = buf[e_start:p]
    boots, p = _uint(buf, p, s_end)
    etime, p = _uint(buf, p, s_end)
    u_start, p = expect(buf, p, s_end, TAG_OCTETS)
    user = buf[u_start:p]
    mac_at, p = expect(buf, p, s_end, TAG_OCTETS)
    mac = buf[mac_at:p]
    salt_start, salt_end = expect(buf, p, s_end, TAG_OCTETS)
    return engine_id, boots, etime, user, mac_at, mac, buf[salt_start:salt_end]


def _uint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    tag, start, stop = read_tlv(buf, pos, end)
    if tag != TAG_INTEGER:
        raise BerError(f"expected INTEGER, got 0x{tag:02x}")
    return int.from_bytes(buf[start:stop], "big", signed=True), stop


def _check_mac(buf: bytes, mac_at: int, mac: bytes, creds: Credentials, engine_id: bytes) -> None:
    if creds.auth is None:
        raise UsmError("authenticated message for a user without authentication")
    hash_new, mac_len = AUTH[creds.auth]
    if len(mac) != mac_len:
        raise UsmError("authentication parameters of the wrong length")
    auth_key, _ = creds.keys(engine_id)
    zeroed = buf[:mac_at] + b"\x00" * mac_len + buf[mac_at + mac_len :]
    if not hmac.compare_digest(hmac.new(auth_key, zeroed, hash_new).digest()[:mac_len], mac):
        raise UsmError("response failed authentication (wrong digest)")
