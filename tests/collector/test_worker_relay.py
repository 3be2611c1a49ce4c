"""A worker relays its changes at a tenth of its shortest interval (issue 33: never stale past 1.5)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from collector import config as configuration
from collector import worker
from collector.clock import FakeClock
from collector.relay import read_frame
from collector.store import Store, TargetLabels


@pytest.fixture(autouse=True)
def _community(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("C", "public")


def _config(snmp: tuple[str | None, ...] = (), gnmi: tuple[str, ...] = ()) -> configuration.Config:
    targets: list[dict[str, Any]] = [
        {"name": f"s{i}", "snmp": {"address": "192.0.2.1:161", "community_env": "C"}}
        for i in range(len(snmp))
    ]
    for target, interval in zip(targets, snmp, strict=True):
        if interval is not None:
            target["snmp"]["interval"] = interval
    targets += [
        {"name": f"g{i}", "gnmi": {"address": "192.0.2.2:6030", "insecure": True, "sample_interval": sample}}
        for i, sample in enumerate(gnmi)
    ]
    return configuration.parse({"defaults": {"interval": "10s"}, "targets": targets})


@pytest.mark.parametrize(
    ("sources", "seconds"),
    [
        (None, worker.RELAY_MAX),  # before the first config is read
        ({}, worker.RELAY_MAX),  # no targets
        ({"snmp": (None,)}, worker.RELAY_MAX),  # the SNMP default, 10 s: a tenth is past the longest
        ({"snmp": (None, "2s")}, 0.2),  # a target's own interval counts
        ({"snmp": (None,), "gnmi": ("5s", "1s")}, 0.1),  # the shortest of every source
        ({"gnmi": ("800ms",)}, 0.08),
        ({"gnmi": ("300ms",)}, worker.RELAY_MIN),
    ],
)
def test_the_relay_period_is_a_tenth_of_the_shortest_interval(
    sources: dict[str, Any] | None, seconds: float
) -> None:
    config = None if sources is None else _config(**sources)
    assert worker.relay_seconds(config) == pytest.approx(seconds)


class _Shedder:
    def __init__(self) -> None:
        self.gaps: list[float] = []

    def relayed(self, gap: float) -> None:
        self.gaps.append(gap)


class _Daemon:
    """What ``worker.relay`` reads of a ``Daemon``: its store and its config."""

    def __init__(self, config: configuration.Config) -> None:
        self.store = Store(FakeClock(), rendered=False)
        self.store.set_target("g0", TargetLabels(ttl=30))
        self.config = config
        self.shedder = _Shedder()

    def stop(self) -> None:
        raise AssertionError("the supervisor's end of the pipe stays open")


async def _frames_in(daemon: _Daemon, seconds: float) -> int:
    """Frames the relay sends in ``seconds`` while a value changes every 5 ms."""
    read_fd, write_fd = os.pipe()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0)
    )
    stopped = asyncio.Event()
    sender = asyncio.create_task(worker.relay(daemon, write_fd, stopped))  # type: ignore[arg-type]
    frames = 0

    async def count() -> None:
        nonlocal frames
        while await read_frame(reader) is not None:
            frames += 1

    counter = asyncio.create_task(count())
    end = loop.time() + seconds
    while loop.time() < end:
        daemon.store.inc("spanwatch_gnmi_updates_total", (("device", "g0"),), 1)
        await asyncio.sleep(0.005)
    stopped.set()
    await sender
    await asyncio.wait_for(counter, 5)
    transport.close()
    return frames


async def test_a_worker_with_sub_second_streams_relays_many_times_a_second() -> None:
    # 300 ms streams: a frame every 50 ms (``RELAY_MIN``), about 20 in a second (the fixed 0.25 s of
    # before sent 4), so the exposition trails the worker by a sixth of an interval, not most of one. A
    # loaded machine may delay the timer; 8 still tells the two apart.
    frames = await _frames_in(_Daemon(_config(gnmi=("300ms",))), 1.0)
    assert frames >= 8


async def test_the_shedder_hears_how_long_changes_waited_for_a_frame() -> None:
    daemon = _Daemon(_config(gnmi=("300ms",)))
    frames = await _frames_in(daemon, 0.6)
    gaps = daemon.shedder.gaps
    assert len(gaps) >= frames  # one a tick, with a frame or without
    assert all(0.03 < gap < 1.0 for gap in gaps[:-1])  # about 50 ms apart (the last is cut by the stop)


async def test_a_reload_changes_the_period() -> None:
    daemon = _Daemon(_config(gnmi=("300ms",)))
    reload = asyncio.get_running_loop().call_later(0.3, setattr, daemon, "config", _config(snmp=(None,)))
    frames = await _frames_in(daemon, 1.3)
    reload.cancel()
    # about 6 frames in the first 0.3 s, then one per 0.25 s for the last second (never reloaded: 26)
    assert 4 <= frames <= 16
