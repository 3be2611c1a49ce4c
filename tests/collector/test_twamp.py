"""TWAMP-light (RFC 5357 appendix I): the packets field by field, and a sender against a reflector."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from collector.probes import twamp

# 2024-01-02T03:04:05.5Z, in NTP: seconds since 1900 and half of 2^32.
UNIX_NS = 1_704_164_645_500_000_000
NTP = (1_704_164_645 + 2_208_988_800) << 32 | 0x8000_0000


def test_ntp_timestamps() -> None:
    assert twamp.to_ntp(UNIX_NS) == NTP
    assert twamp.from_ntp(NTP) == UNIX_NS
    for ns in (UNIX_NS + 123, UNIX_NS + 999_999_999, 0):
        assert twamp.from_ntp(twamp.to_ntp(ns)) == ns


def test_sender_packet_is_the_rfc_layout_padded_to_the_reflector_size() -> None:
    packet = twamp.sender_packet(7, UNIX_NS)
    assert len(packet) == 41  # 14 octets of fields + 27 of padding: the answer is no larger
    assert int.from_bytes(packet[0:4], "big") == 7
    assert int.from_bytes(packet[4:12], "big") == NTP
    error = int.from_bytes(packet[12:14], "big")
    assert error >> 15 == 0 and (error >> 14) & 1 == 0 and error & 0xFF != 0  # S=0, Z=0, multiplier > 0
    assert packet[14:] == bytes(27)


def test_reflector_packet_copies_the_sender_fields() -> None:
    request = twamp.sender_packet(9, UNIX_NS) + b"x" * 10
    reply = twamp.reflector_packet(3, request, UNIX_NS + 1_000, UNIX_NS + 2_000, 64)
    assert reply is not None and len(reply) == len(request)  # sender padding kept: no amplification
    assert int.from_bytes(reply[0:4], "big") == 3  # the reflector's own sequence number
    assert twamp.from_ntp(int.from_bytes(reply[4:12], "big")) == UNIX_NS + 2_000  # T3
    assert reply[14:16] == b"\0\0"  # MBZ
    assert twamp.from_ntp(int.from_bytes(reply[16:24], "big")) == UNIX_NS + 1_000  # T2
    assert reply[24:38] == request[:14]  # sender sequence, timestamp, error estimate
    assert reply[38:40] == b"\0\0" and reply[40] == 64  # MBZ, sender TTL
    parsed = twamp.parse_reflected(reply)
    assert parsed is not None and parsed.sender_sequence == 9 and parsed.sender_ntp == NTP
    assert twamp.reflector_packet(0, b"short", 0, 0, 0) is None
    assert twamp.parse_reflected(b"\0" * 40) is None


async def test_round_trip_and_one_way_delays_through_an_emulating_reflector() -> None:
    reflector = twamp.Reflector("127.0.0.1", 0, delay_s=lambda: 0.002)
    reflector.start()
    sender = twamp.Sender("127.0.0.1", reflector.port)
    try:
        results = [await sender.probe(1.0) for _ in range(5)]
    finally:
        sender.close()
        reflector.close()
    assert all(r is not None for r in results)
    best = min(results, key=lambda r: r.rtt_s if r else 1.0)
    assert best is not None
    assert 0.004 <= best.rtt_s < 0.0045  # 2 x 2 ms plus loopback
    assert 0.002 <= best.forward_s < 0.00225 and 0.002 <= best.reverse_s < 0.00225
    assert reflector.reflected == 5


async def test_the_reflector_answers_with_the_ttl_it_received() -> None:
    reflector = twamp.Reflector("127.0.0.1", 0)
    reflector.start()
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, 255)
    client.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_sendto(client, twamp.sender_packet(1, UNIX_NS), ("127.0.0.1", reflector.port))
        data = await asyncio.wait_for(loop.sock_recv(client, 2048), 2)
    finally:
        client.close()
        reflector.close()
    reply = twamp.parse_reflected(data)
    assert reply is not None and reply.sender_ttl == 255 and reply.sender_sequence == 1


async def test_a_stale_answer_is_not_taken_for_the_current_probe() -> None:
    reflector = twamp.Reflector("127.0.0.1", 0)
    reflector.start()
    sender = twamp.Sender("127.0.0.1", reflector.port)
    try:
        # An answer echoing sequence 0 but another send time: ignored, the probe times out.
        forged = twamp.reflector_packet(0, struct.pack("!IQH", 0, twamp.to_ntp(1), 1), 0, 0, 0)
        assert forged is not None
        waiting = asyncio.ensure_future(sender.probe(0.2))
        await asyncio.sleep(0)
        sender._match(forged, 10)
        reflector.close()  # and nothing answers the real packet in time... unless it already did
        result = await waiting
        assert result is None or result.rtt_s < 0.1
    finally:
        sender.close()


async def test_no_reflector_is_unreachable_or_a_timeout() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sender = twamp.Sender("127.0.0.1", port)
    try:
        with pytest.raises(OSError):  # loopback answers ICMP port unreachable
            await sender.probe(0.5)
    finally:
        sender.close()
