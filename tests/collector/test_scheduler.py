"""The scheduler: deadlines on the injected clock, failures as telemetry, no target delays another."""

from __future__ import annotations

import asyncio
import logging
import random

from collector.clock import FakeClock
from collector.errors import AuthError
from collector.model import Sample, gauge, labels
from collector.scheduler import Poller, Schedule
from collector.store import Store


class FakeSource:
    """A polled source whose behaviour the test picks: answer, hang, or fail."""

    source = "snmp"

    def __init__(self, device: str, clock: FakeClock, behaviour: str = "ok") -> None:
        self.device = device
        self.clock = clock
        self.behaviour = behaviour
        self.polls = 0

    async def poll(self) -> list[Sample]:
        self.polls += 1
        if self.behaviour == "hang":
            await asyncio.Event().wait()
        if self.behaviour == "auth":
            raise AuthError("wrong digest")
        if self.behaviour == "bug":
            raise ValueError("surprise")
        return [gauge("dci_interface_oper_up", labels(interface="Eth1"), 1.0)]

    async def close(self) -> None:
        pass


def _status(store: Store, device: str, status: str) -> float | None:
    return store.value("spanwatch_polls_total", (("device", device), ("source", "snmp"), ("status", status)))


async def test_a_hung_target_times_out_and_never_delays_the_others() -> None:
    clock = FakeClock()
    store = Store(clock)
    good, dead = FakeSource("good", clock), FakeSource("dead", clock, "hang")
    tasks = [
        asyncio.create_task(Poller(src, store, Schedule(10, 5, jitter=0), clock, random.Random(1)).run())
        for src in (good, dead)
    ]
    for _ in range(60):  # one minute in one-second steps
        await clock.advance(1)
    for t in tasks:
        t.cancel()
    assert good.polls == 6  # t = 0, 10, ..., 50: on time despite the hung neighbour
    assert _status(store, "good", "success") == 6
    assert _status(store, "dead", "timeout") == 6
    assert store.value("spanwatch_target_up", (("device", "dead"), ("source", "snmp"))) == 0.0
    assert store.value("spanwatch_target_up", (("device", "good"), ("source", "snmp"))) == 1.0


async def test_failures_become_statuses_and_log_lines(caplog) -> None:
    clock = FakeClock()
    store = Store(clock)
    for behaviour, status in (("auth", "auth_error"), ("bug", "error")):
        poller = Poller(FakeSource(behaviour, clock, behaviour), store, Schedule(10, 5), clock)
        assert await poller.poll_once() == status
        assert _status(store, behaviour, status) == 1
    assert "target=auth source=snmp step=poll status=auth_error cause=wrong digest" in caplog.text


async def test_each_poll_logs_its_exact_duration_at_debug(caplog) -> None:
    # The histogram keeps a poll's bucket only; the exact duration is in the debug log (bench_scale's p99).
    clock = FakeClock()
    source = FakeSource("sw1", clock)
    slow = source.poll

    async def poll() -> list[Sample]:
        await clock.advance(0.0375)
        return await slow()

    source.poll = poll  # type: ignore[method-assign]
    caplog.set_level(logging.DEBUG, logger="collector.scheduler")
    assert await Poller(source, Store(clock), Schedule(10, 5), clock).poll_once() == "success"
    assert "target=sw1 source=snmp step=poll status=success seconds=0.037500" in caplog.text


async def test_first_poll_is_jittered_within_the_interval() -> None:
    clock = FakeClock()
    store = Store(clock)
    src = FakeSource("sw", clock)
    task = asyncio.create_task(Poller(src, store, Schedule(10, 5), clock, random.Random(7)).run())
    offset = random.Random(7).uniform(0, 10)
    await clock.advance(offset - 0.01)
    assert src.polls == 0
    await clock.advance(0.02)
    assert src.polls == 1
    task.cancel()


async def test_a_phase_polls_at_that_share_of_every_interval() -> None:
    clock = FakeClock()
    await clock.advance(13)  # started mid-interval: the first poll waits for its phase, not a whole interval
    store = Store(clock)
    polls: list[tuple[float, str]] = []

    class Recording(FakeSource):
        async def poll(self) -> list[Sample]:
            polls.append((round(self.clock.monotonic(), 6), self.device))
            return await super().poll()

    tasks = [
        asyncio.create_task(
            Poller(Recording(f"sw{i}", clock), store, Schedule(10, 5, phase=i / 4), clock).run()
        )
        for i in range(4)
    ]
    for _ in range(80):  # to 33 s in quarter seconds
        await clock.advance(0.25)
    for t in tasks:
        t.cancel()
    # Evenly spread over the interval, each target on its own phase, every interval.
    assert polls == [
        (15.0, "sw2"), (17.5, "sw3"), (20.0, "sw0"), (22.5, "sw1"),
        (25.0, "sw2"), (27.5, "sw3"), (30.0, "sw0"), (32.5, "sw1"),
    ]  # fmt: skip


def test_the_daemon_spreads_polled_targets_evenly_in_config_order() -> None:
    from collector.config import Config
    from collector.daemon import _phases

    config = Config.model_validate(
        {
            "targets": [
                {"name": "a", "snmp": {"address": "127.0.0.1:161", "community_env": "C"}},
                {"name": "g", "gnmi": {"address": "127.0.0.1:6030", "insecure": True}},
                {"name": "b", "snmp": {"address": "127.0.0.1:162", "community_env": "C"}},
            ]
        }
    )
    assert _phases(config) == {"a": 0.0, "b": 0.5}  # a streaming target takes no phase
