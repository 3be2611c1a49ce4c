"""TWAMP-light (RFC 5357, appendix I): unauthenticated test packets, a stateless reflector and a sender.

No control session: the sender sends test packets to a reflector it was configured with; the reflector
answers each at once, with its own sequence number, its receive and transmit timestamps and the sender's
fields copied (RFC 5357 4.2.1). The sender then has four timestamps, T1 (sent), T2 (received at the
reflector), T3 (sent back) and T4 (received back):

- round trip = (T4 - T1) - (T3 - T2): the reflector's own time does not count;
- forward / reverse one-way delay = T2 - T1 / T4 - T3, meaningful only when both clocks are synchronised.

Receive times are the kernel's (SO_TIMESTAMPNS), not when the event loop got round to the datagram, so a
busy collector does not inflate the figures. Timestamps are NTP format (RFC 4656 4.1.2): 32-bit seconds
since 1900 and a 32-bit fraction. A reply is never larger than the request (the sender pads its packet to
the reflector's size), so a reflector cannot be used to amplify traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

NTP_UNIX_OFFSET_S = 2_208_988_800  # 1900-01-01 to 1970-01-01
SENDER = struct.Struct("!IQH")  # sequence number, timestamp, error estimate (RFC 4656 4.1.2)
# sequence, timestamp, error estimate, MBZ, receive timestamp, sender sequence, sender timestamp,
# sender error estimate, MBZ, sender TTL (RFC 5357 4.2.1)
REFLECTOR = struct.Struct("!IQHHQIQHHB")
TIMESTAMP = struct.Struct("!Q")  # at offset 4 in both packets
SENDER_PADDING = REFLECTOR.size - SENDER.size  # 27 octets: request and reply are the same size
# Error estimate (RFC 4656 4.1.2): S (synchronised) = 0, Z = 0 (NTP format), scale 22, multiplier 1:
# 2^22 x 2^-32 s, about 1 ms; the clock's real error is unknown to us, so we do not claim synchronisation.
ERROR_ESTIMATE = (22 << 8) | 1
SENDER_TTL = 255  # RFC 5357 4.1.2: test packets are sent with TTL 255, so a reflector can tell hops

# Linux values where Python's socket module lacks the name.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
IP_RECVTTL = getattr(socket, "IP_RECVTTL", 12)
TIMESPEC = struct.Struct("@qq")
ANCILLARY_BYTES = 256
READS_PER_WAKE = 64  # datagrams handled per wake-up, so a flood cannot starve the rest of the loop
MAX_DEFERRED = 4096  # replies an emulating reflector holds at once; beyond, requests are dropped


def to_ntp(unix_ns: int) -> int:
    """Unix time in nanoseconds -> 64-bit NTP timestamp."""
    seconds, ns = divmod(unix_ns, 1_000_000_000)
    # Rounded to the nearest 2^-32 s, so that a round trip through from_ntp gives the same nanosecond.
    return ((seconds + NTP_UNIX_OFFSET_S) << 32) + ((ns << 32) + 500_000_000) // 1_000_000_000 & (1 << 64) - 1


def from_ntp(value: int) -> int:
    """64-bit NTP timestamp -> Unix time in nanoseconds (era 0: 1900-2036)."""
    seconds, fraction = value >> 32, value & 0xFFFFFFFF
    return (seconds - NTP_UNIX_OFFSET_S) * 1_000_000_000 + ((fraction * 1_000_000_000 + (1 << 31)) >> 32)


def sender_packet(sequence: int, sent_ns: int) -> bytes:
    """A session-sender test packet, padded to the reflector's size."""
    return SENDER.pack(sequence & 0xFFFFFFFF, to_ntp(sent_ns), ERROR_ESTIMATE) + bytes(SENDER_PADDING)


@dataclass(frozen=True, slots=True)
class Reflected:
    """A decoded reflector packet (times in Unix nanoseconds)."""

    sequence: int
    transmit_ns: int  # T3
    receive_ns: int  # T2
    sender_sequence: int
    sender_ntp: int  # T1 as the sender stamped it (NTP format, compared exactly)
    sender_ttl: int


def reflector_packet(
    sequence: int, request: bytes, received_ns: int, transmit_ns: int, ttl: int
) -> bytes | None:
    """The reflector's answer to ``request`` (None when it is too short to be a test packet).

    The reply is as long as the request when that is longer than the reflector's fields (the sender's
    padding is kept, shortened by the 27 octets the reflector adds), else exactly 41 octets.
    """
    if len(request) < SENDER.size:
        return None
    sender_sequence, sender_ts, sender_error = SENDER.unpack_from(request)
    head = REFLECTOR.pack(
        sequence & 0xFFFFFFFF,
        to_ntp(transmit_ns),
        ERROR_ESTIMATE,
        0,
        to_ntp(received_ns),
        sender_sequence,
        sender_ts,
        sender_error,
        0,
        ttl & 0xFF,
    )
    return head + bytes(max(0, len(request) - REFLECTOR.size))


def parse_reflected(data: bytes) -> Reflected | None:
    """Decode a reflector packet (None when too short)."""
    if len(data) < REFLECTOR.size:
        return None
    seq, t3, _, _, t2, sseq, t1, _, _, ttl = REFLECTOR.unpack_from(data)
    return Reflected(seq, from_ntp(t3), from_ntp(t2), sseq, t1, ttl)


def _kernel_time(ancillary: list[tuple[int, int, bytes]]) -> tuple[int | None, int | None]:
    """(receive time in Unix ns, TTL or hop limit) from a datagram's ancillary data."""
    stamp = ttl = None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= TIMESPEC.size:
            seconds, ns = TIMESPEC.unpack_from(data)
            stamp = seconds * 1_000_000_000 + ns
        elif (level, kind) in (
            (socket.IPPROTO_IP, socket.IP_TTL),
            (socket.IPPROTO_IPV6, socket.IPV6_HOPLIMIT),
        ):
            ttl = int.from_bytes(data[:4], sys.byteorder) & 0xFF
    return stamp, ttl


def _open(family: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    return sock


def _resolve(host: str, port: int) -> tuple[int, tuple[str, int]]:
    info = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
    return info[0], info[4][:2]  # type: ignore[return-value]


class Reflector:
    """A stateless TWAMP-light reflector on one UDP socket, driven by the running event loop.

    Args:
        host, port: where to listen (port 0: any free port, see ``port``).
        delay_s: emulation only (the simulated fabric): the one-way delay of the path the reflector
            stands at the end of. Each request is taken as arriving that much later than it did, and its
            answer leaves that much before it is sent, so the timestamps describe the emulated path.
    """

    def __init__(self, host: str, port: int, delay_s: Callable[[], float] | None = None) -> None:
        family, address = _resolve(host, port)
        self.sock = _open(family)
        with contextlib.suppress(OSError):  # the TTL is informative; a platform without it answers 0
            if family == socket.AF_INET:
                self.sock.setsockopt(socket.IPPROTO_IP, IP_RECVTTL, 1)
            else:
                self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVHOPLIMIT, 1)
        self.sock.bind(address)
        self.port: int = self.sock.getsockname()[1]
        self.delay_s = delay_s
        self.sequence = 0
        self.reflected = 0
        self.deferred = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Start answering on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.sock.fileno(), self._readable)

    def close(self) -> None:
        """Stop answering and close the socket (deferred answers are dropped)."""
        if self._loop is not None:
            self._loop.remove_reader(self.sock.fileno())
            self._loop = None
        self.sock.close()

    def _readable(self) -> None:
        for _ in range(READS_PER_WAKE):
            try:
                data, ancillary, _, peer = self.sock.recvmsg(2048, ANCILLARY_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # an ICMP error from an earlier reply: nothing to answer
                log.debug("reflector: %s", e)
                continue
            received, ttl = _kernel_time(ancillary)
            received = received if received is not None else time.time_ns()
            delay = self.delay_s() if self.delay_s is not None else 0.0
            if delay <= 0:
                self._answer(data, peer, received, ttl or 0, 0)
            elif self.deferred < MAX_DEFERRED and self._loop is not None:
                self.deferred += 1
                wait = max(0.0, 2 * delay - (time.time_ns() - received) / 1e9)
                self._loop.call_later(wait, self._answer_deferred, data, peer, received, ttl or 0, delay)

    def _answer_deferred(
        self, data: bytes, peer: tuple[Any, ...], received: int, ttl: int, delay: float
    ) -> None:
        self.deferred -= 1
        self._answer(data, peer, received, ttl, delay)

    def _answer(self, data: bytes, peer: tuple[Any, ...], received: int, ttl: int, delay: float) -> None:
        delay_ns = int(delay * 1e9)
        reply = reflector_packet(self.sequence, data, received + delay_ns, 0, ttl)
        if reply is None:
            return
        # T3 is stamped last, just before the send, so building the packet does not count as path delay.
        packet = bytearray(reply)
        TIMESTAMP.pack_into(packet, 4, to_ntp(time.time_ns() - delay_ns))
        try:
            self.sock.sendto(packet, peer)
        except OSError as e:  # a full send buffer or a vanished peer: the sender counts a loss
            log.debug("reflector: cannot answer %s: %s", peer, e)
            return
        self.sequence += 1
        self.reflected += 1


@dataclass(frozen=True, slots=True)
class Measurement:
    """One answered probe, in seconds."""

    rtt_s: float
    forward_s: float
    reverse_s: float


class Sender:
    """Probes one reflector: ``probe()`` sends one test packet and waits for its answer.

    Args:
        host, port: the reflector.
    """

    def __init__(self, host: str, port: int) -> None:
        family, self.address = _resolve(host, port)
        self.sock = _open(family)
        with contextlib.suppress(OSError):
            if family == socket.AF_INET:
                self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, SENDER_TTL)
            else:
                self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, SENDER_TTL)
        # Connected, so the kernel drops datagrams from anyone else and reports "port unreachable".
        self.sock.connect(self.address)
        self.sequence = 0
        self._pending: dict[int, tuple[int, asyncio.Future[Measurement]]] = {}
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.sock.fileno(), self._readable)

    def close(self) -> None:
        self._loop.remove_reader(self.sock.fileno())
        self.sock.close()
        for _, future in self._pending.values():
            future.cancel()
        self._pending.clear()

    async def probe(self, wait_s: float) -> Measurement | None:
        """Send one test packet; its measurement, or None when no answer came within ``wait_s``.

        Raises:
            OSError: the reflector is unreachable (ICMP port or host unreachable) or sending failed.
        """
        sequence = self.sequence
        self.sequence = (sequence + 1) & 0xFFFFFFFF
        future: asyncio.Future[Measurement] = self._loop.create_future()
        packet = bytearray(sender_packet(sequence, 0))
        sent = time.time_ns()  # T1, as close to the send as Python gets
        TIMESTAMP.pack_into(packet, 4, to_ntp(sent))
        self._pending[sequence] = (sent, future)
        try:
            self.sock.send(packet)
            # asyncio.timeout, not wait_for: on 3.11 wait_for loses a cancellation that lands together
            # with the answer, and the probe task then outlives the daemon's stop.
            async with asyncio.timeout(wait_s):
                return await future
        except TimeoutError:
            return None
        finally:
            self._pending.pop(sequence, None)

    def _readable(self) -> None:
        for _ in range(READS_PER_WAKE):
            try:
                data, ancillary, _, _ = self.sock.recvmsg(2048, ANCILLARY_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # ECONNREFUSED and the like: every waiting probe learns it
                for _, future in self._pending.values():
                    if not future.done():
                        future.set_exception(OSError(e.errno, e.strerror))
                return
            received, _ = _kernel_time(ancillary)
            self._match(data, received if received is not None else time.time_ns())

    def _match(self, data: bytes, t4: int) -> None:
        reply = parse_reflected(data)
        waiting = None if reply is None else self._pending.get(reply.sender_sequence)
        # The echoed send time must be ours: a late answer to an earlier probe with a reused number is not.
        if reply is None or waiting is None or to_ntp(waiting[0]) != reply.sender_ntp:
            return
        t1, future = waiting
        if future.done():
            return
        rtt = (t4 - t1) - (reply.transmit_ns - reply.receive_ns)
        future.set_result(
            Measurement(rtt / 1e9, (reply.receive_ns - t1) / 1e9, (t4 - reply.transmit_ns) / 1e9)
        )
