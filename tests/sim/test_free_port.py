"""``free_port``: a port free now, drawn outside the kernel's ephemeral range so that no ``bind(0)`` or
outgoing connection can be handed it before the caller binds it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from spanwatch.sim import commands
from spanwatch.sim.commands import ephemeral_range, free_port


@pytest.mark.parametrize("kind", [socket.SOCK_STREAM, socket.SOCK_DGRAM])
def test_the_port_is_outside_the_ephemeral_range_and_can_be_bound(kind: socket.SocketKind) -> None:
    low, high = ephemeral_range()
    for _ in range(20):
        port = free_port(kind)
        assert 1024 <= port < 65536 and not low <= port <= high
        with socket.socket(socket.AF_INET, kind) as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        held = taken.getsockname()[1]
        other = free_port()
        monkeypatch.setattr(commands.random, "sample", lambda ports, k: [held, other])
        assert free_port() == other


def test_no_free_port_in_the_draws_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        held = taken.getsockname()[1]
        monkeypatch.setattr(commands.random, "sample", lambda ports, k: [held] * k)
        with pytest.raises(OSError, match="no free SOCK_STREAM port"):
            free_port()


def test_the_range_is_read_from_the_kernel_or_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sysctl = tmp_path / "ip_local_port_range"
    sysctl.write_text("40000\t50000\n")
    monkeypatch.setattr(commands, "EPHEMERAL_RANGE", sysctl)
    assert ephemeral_range() == (40000, 50000)
    assert not 40000 <= free_port() <= 50000
    sysctl.write_text("1024 65535\n")  # every port ephemeral: drawn from them all, still free
    assert 1024 <= free_port() < 65536
    monkeypatch.setattr(commands, "EPHEMERAL_RANGE", tmp_path / "absent")
    assert ephemeral_range() == (32768, 60999)
