"""Shedding at the source (issue 33): a process that cannot ingest its gNMI streams asks for less.

Folding (``collector.coalesce``) keeps the exposition fresh while a stream is behind, but it cannot skip
what grpc has already queued: past capacity the lag keeps growing. The cure is at the device: a stream
resubscribed with a longer sample interval sends less. One ``Shedder`` per process (the streams of a
process share its event loop, so capacity is the process's) looks every ``period`` at what each stream
showed and asks ``ShedPolicy`` which targets to resubscribe:

- **shed**: a stream whose every batch was more than ``shed_lag`` of its intervals behind, for
  ``shed_periods`` periods in a row (it never caught up): the heaviest targets (updates per second)
  carrying ``shed_share`` of the process's updates (all of them past ``deep_lag``) get twice their
  interval, up to ``max_factor`` times the configured one. The CPU the process had then is remembered as
  its capacity, and shedding goes on while the process uses more than ``shed_util`` of it and a batch is
  still ``restore_lag`` late;
- **restore**: the process had room (no batch of any stream ``restore_lag`` intervals behind) for
  ``restore_hold`` seconds: the lightest shed targets get half their interval back while the process's
  CPU, predicted with their updates doubled, stays under ``restore_share`` of that capacity.

After any change nothing more is decided for ``settle_intervals`` of the longest new interval: the first
rounds at the new interval must arrive before the lag says anything about the new load. The numbers
(``ShedSettings``) are why each step cannot flap: shedding needs a sustained backlog (or late values
near a capacity already seen), restoring a long quiet spell and a prediction with room to spare.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShedSettings:
    """The numbers of the policy, each with its reason."""

    period: float = 2.0
    """Seconds between decisions: several rounds of sub-second streams, and a shed within seconds."""
    start_grace: float = 10.0
    """Seconds after the first stream registers before anything is judged: dialling every target and
    their initial full dumps are a backlog of start-up, not the load to come."""
    shed_lag: float = 0.5
    """Intervals behind that, held by every batch of a period (the stream never caught up), mean over
    capacity: a stream that keeps up drains each round before the next, however bursty, while one that
    does not keeps a floor of backlog; past half an interval its values get older than 1.5 intervals."""
    shed_util: float = 0.75
    """Share of the capacity above which a process that ran out of it goes on shedding while a batch is
    ``restore_lag`` late: brought to 0.94x by a first step, it would sit where a round's lag nears an
    interval; this takes it under 3/4. (Without late batches, CPU alone is no reason: on a busy machine
    the capacity seen is small and noisy.)"""
    shed_periods: int = 2
    """Periods in a row over ``shed_lag`` (or ``shed_util``) before shedding: one GC pause or burst is
    not overload."""
    shed_share: float = 0.5
    """Share of the process's updates whose targets are doubled per step: the load drops by a quarter
    (1.25x capacity -> 0.94x); a step that is not enough is followed by another once settled."""
    deep_lag: float = 2.0
    """Intervals behind, held by every batch, past which every target is doubled at once: a backlog of
    two rounds that never drains is far past capacity, and steps of a quarter would take a minute."""
    settle_intervals: float = 2.0
    """After a change, wait this many of the longest interval (and at least two periods) before judging:
    the new subscriptions start empty (what grpc held for the old ones is dropped with them), but the
    first rounds at the new interval have to arrive."""
    restore_lag: float = 0.5
    """Intervals behind (the worst batch of any stream) under which the process counts as having room:
    every value is then at most 1.5 intervals old, the issue's staleness bound."""
    restore_share: float = 0.5
    """Share of the capacity the process may reach once restored targets send twice as much. Capacity is
    the CPU the process got the last time it could not keep up (a busy machine gives it less than a
    core), else one core; half of it is where the lag of a round stays under half an interval (measured
    in bench/README.md: 102k of 205k updates/s read at most 1.5 intervals old)."""
    capacity_memory: float = 600.0
    """Seconds a capacity seen at overload is believed: a machine that got quieter is tried again, at the
    cost of one shed at most this often."""
    restore_hold: float = 30.0
    """Seconds with room before a restore step: far longer than it takes to shed, so it cannot flap."""
    max_factor: int = 8
    """Longest interval, in configured intervals: beyond that the data is too coarse to be worth having."""


@dataclass(frozen=True)
class StreamLoad:
    """What one target's stream(s) showed over a period."""

    lag: float
    """Seconds: the worst backlog of a batch (``spanwatch_ingest_backlog_seconds``)."""
    floor: float
    """Seconds: the least backlog of a batch; above zero when the stream never caught up."""
    interval: float
    """Seconds: the sample interval in effect."""
    updates_per_second: float
    """Updates received (decoded or folded)."""
    factor: int
    """The interval in effect over the configured one (1, 2, 4, ...)."""
    max_factor: int
    """The largest factor this target may get."""


@dataclass
class ShedPolicy:
    """The decision, as a state machine over periods (pure: time and measurements are given)."""

    settings: ShedSettings = field(default_factory=ShedSettings)
    _over: int = 0  # periods in a row over shed_lag
    _room_since: float | None = None  # since when every stream was under restore_lag
    _settled_at: float | None = None  # no decision before this time (None: not started)
    _capacity: tuple[float, float] | None = None  # (CPU in cores, when) at the last overload

    def capacity(self, now: float) -> float:
        """The CPU, in cores, the process is believed to be able to use."""
        if self._capacity is not None and now - self._capacity[1] > self.settings.capacity_memory:
            self._capacity = None
        return 1.0 if self._capacity is None else self._capacity[0]

    def decide(self, now: float, loads: Mapping[str, StreamLoad], util: float) -> dict[str, int]:
        """The targets to resubscribe and their new factors (empty: nothing to do).

        Args:
            now: monotonic seconds.
            loads: each target's stream over the last period.
            util: the process's CPU over the last period, in cores.
        """
        s = self.settings
        if self._settled_at is None:
            self._settled_at = now + s.start_grace
        if not loads or now < self._settled_at:
            return {}
        floor = max(load.floor / load.interval for load in loads.values())
        peak = max(load.lag / load.interval for load in loads.values())
        overloaded = floor >= s.shed_lag
        capacity = self.capacity(now)  # (forgets one seen too long ago)
        busy = self._capacity is not None and util >= s.shed_util * capacity and peak >= s.restore_lag
        self._over = self._over + 1 if overloaded or busy else 0
        if peak >= s.restore_lag:
            self._room_since = None
        elif self._room_since is None:
            self._room_since = now
        changes: dict[str, int] = {}
        if self._over >= s.shed_periods:
            if overloaded:
                self._capacity = (max(util, 0.05), now)
            changes = self._shed(loads, 1.0 if floor >= s.deep_lag else s.shed_share)
        elif self._room_since is not None and now - self._room_since >= s.restore_hold:
            changes = self._restore(loads, util, s.restore_share * capacity)
        if changes:
            longest = max(
                loads[name].interval * factor / loads[name].factor for name, factor in changes.items()
            )
            longest = max(longest, max(load.interval for load in loads.values()))
            self._settled_at = now + max(s.settle_intervals * longest, 2 * s.period)
            self._over = 0
            self._room_since = None
        return changes

    def _shed(self, loads: Mapping[str, StreamLoad], share: float) -> dict[str, int]:
        """Double the heaviest targets that carry ``share`` of the updates (at least one)."""
        total = sum(load.updates_per_second for load in loads.values())
        cap = self.settings.max_factor
        room = [(n, load) for n, load in loads.items() if load.factor * 2 <= min(load.max_factor, cap)]
        room.sort(key=lambda item: (-item[1].updates_per_second, item[0]))
        changes: dict[str, int] = {}
        carried = 0.0
        for name, load in room:
            if changes and carried >= share * total:
                break
            changes[name] = load.factor * 2
            carried += load.updates_per_second
        return changes

    def _restore(self, loads: Mapping[str, StreamLoad], util: float, limit: float) -> dict[str, int]:
        """Halve the intervals of the lightest shed targets while the predicted CPU stays under ``limit``
        (cores): a target's CPU is taken as its share of the process's updates."""
        total = sum(load.updates_per_second for load in loads.values())
        shed = [(n, load) for n, load in loads.items() if load.factor > 1]
        shed.sort(key=lambda item: (item[1].updates_per_second, item[0]))
        predicted = util
        changes: dict[str, int] = {}
        for name, load in shed:
            extra = util * load.updates_per_second / total if total > 0 else 0.0
            if predicted + extra > limit:
                break
            predicted += extra
            changes[name] = load.factor // 2
        return changes


class Sheddable(Protocol):
    """A stream the shedder can slow down: ``collector.sources.gnmi.source.GnmiSource``."""

    device: str

    def shed_load(self) -> StreamLoad:
        """What the stream showed since the last call (and start a new period)."""
        ...

    def shed_to(self, factor: int, reason: str) -> None:
        """Resubscribe at ``factor`` times the configured interval."""
        ...


class Shedder:
    """The per-process loop that applies ``ShedPolicy`` to the streams registered with it.

    It runs while at least one stream is registered (started by the first, stopped with the last).

    Args:
        settings: the policy's numbers.
        cpu_seconds: the process's CPU time (tests may count something else).
    """

    def __init__(
        self,
        settings: ShedSettings | None = None,
        cpu_seconds: Callable[[], float] = time.process_time,
    ) -> None:
        self.policy = ShedPolicy(settings or ShedSettings())
        self.cpu_seconds = cpu_seconds
        self.streams: dict[str, Sheddable] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def settings(self) -> ShedSettings:
        return self.policy.settings

    def register(self, stream: Sheddable) -> None:
        self.streams[stream.device] = stream
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="gnmi-shedder")

    def unregister(self, stream: Sheddable) -> None:
        if self.streams.get(stream.device) is stream:
            del self.streams[stream.device]
        if not self.streams and self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        wall, cpu = loop.time(), self.cpu_seconds()
        while True:
            await asyncio.sleep(self.settings.period)
            now, cpu_now = loop.time(), self.cpu_seconds()
            util = (cpu_now - cpu) / max(now - wall, 1e-9)
            wall, cpu = now, cpu_now
            with contextlib.suppress(Exception):  # a bug here must not stop the streams; it is logged
                self.step(now, util)

    def step(self, now: float, util: float) -> dict[str, int]:
        """One decision over the registered streams; applies and returns it."""
        try:
            loads = {name: stream.shed_load() for name, stream in self.streams.items()}
            changes = self.policy.decide(now, loads, util)
            for name, factor in changes.items():
                load = loads[name]
                why = (
                    f"a stream stayed {max(x.floor / x.interval for x in loads.values()):.1f} intervals "
                    f"behind, CPU {util:.2f} of a core"
                    if factor > load.factor
                    else f"room: CPU {util:.2f} of a core"
                )
                self.streams[name].shed_to(factor, why)
            return changes
        except Exception:
            log.exception("gnmi shedding: decision failed; intervals left as they are")
            raise
