"""Keep ``grpc.aio``'s completion queue from stalling every gRPC call of the process on a slow event loop.

grpc.aio's poller thread takes each finished operation from the core's completion queue and writes one
byte per operation to a socketpair the event loop watches; the loop's reader then reads a single byte and
handles every queued operation. When the loop turns fewer times than operations finish (a fabric
catching up holds it for a model chunk per turn, and the collector's streams finish several operations
per sample), unread bytes pile up until the socket's buffer (a few hundred one-byte writes) is full. The
poller thread then blocks in ``write`` and no operation of any channel or server completes: every gNMI
stream stops, for as long as the loop needs to read the backlog one byte per turn (seconds; seen as
gNMI samples missing from the archive for 2-10 s while SNMP went on). ``drain_wakeups`` wraps that reader
so that each turn reads every pending byte but the one grpc's own reader consumes.
"""

from __future__ import annotations

import array
import asyncio
import fcntl
import functools
import socket
import termios
from collections.abc import Callable
from typing import Any

GRPC_READER = "_handle_events"  # grpc._cython.cygrpc.PollerCompletionQueue's wake-up reader


def pending_bytes(sock: socket.socket) -> int:
    """Bytes waiting to be read on ``sock``."""
    out = array.array("i", [0])
    fcntl.ioctl(sock.fileno(), termios.FIONREAD, out)
    return out[0]


def grpc_wakeup_socket(loop: asyncio.AbstractEventLoop) -> tuple[socket.socket, Callable[[], Any]] | None:
    """grpc.aio's wake-up socket on ``loop`` and its reader, or None (no grpc.aio on this loop yet, or a
    grpc whose completion queue works otherwise)."""
    selector = getattr(loop, "_selector", None)
    if selector is None:
        return None
    for key in selector.get_map().values():
        handle = key.data[0] if key.data else None
        callback = getattr(handle, "_callback", None)
        target = callback.func if isinstance(callback, functools.partial) else callback
        ours = getattr(target, "drains", False)
        grpc_reader = ours or getattr(target, "__name__", "") == GRPC_READER
        if grpc_reader and callable(callback) and isinstance(key.fileobj, socket.socket):
            return key.fileobj, callback
    return None


def drain_wakeups(loop: asyncio.AbstractEventLoop) -> bool:
    """Make grpc.aio's wake-up reader on ``loop`` read all pending wake-ups at once (idempotent).

    Call it once a grpc.aio server or channel exists on the loop. Returns whether the reader was found.
    """
    found = grpc_wakeup_socket(loop)
    if found is None:
        return False
    sock, reader = found
    if getattr(reader, "drains", False):
        return True

    def read_all() -> None:
        # Every byte but one: grpc's reader reads that one (a blocking recv) and handles every queued
        # operation, including those whose bytes were read here (each is queued before its byte is
        # written, so none is left waiting for a byte already read).
        extra = pending_bytes(sock) - 1
        if extra > 0:
            sock.recv(extra)
        reader()

    read_all.drains = True  # type: ignore[attr-defined]
    loop.add_reader(sock, read_all)  # replaces grpc's reader for that socket
    return True
