"""Shedding at the source (issue 33): a process that cannot ingest its gNMI streams asks for less.

Folding (``collector.coalesce``) keeps the exposition fresh while a stream is behind, but it cannot skip
what grpc has already queued: past capacity the lag keeps growing. The cure is at the device: a stream
resubscribed with a longer sample interval sends less. One ``Shedder`` per process (the streams of a
process share its event loop, so capacity is the process's) looks every ``period`` at what each stream
showed and at how busy the event loop was (``collector.loop_busy``: the share of the wall time it worked
rather than waited for I/O), and asks ``ShedPolicy`` which targets to resubscribe:

- **shed** only when the process cannot keep up: for ``shed_periods`` periods in a row a stream's every
  batch was more than ``shed_lag`` of its intervals behind (it never caught up), the loop had no time to
  spare (busy share ``saturated`` or more: the lateness is the process's own, not the device's, the
  network's or a connection's start), and the deepest backlog did not shrink by ``drain_rate`` (a process
  that drains a backlog, as after start-up's dials and first rounds, has room). The heaviest targets
  (updates per second) carrying ``shed_share`` of the process's updates (all of them past ``deep_lag``)
  get twice their interval, up to ``max_factor`` times the configured one. While any target is shed (the
  process was past capacity), it goes on shedding while a batch is still ``restore_lag`` late: keeping up
  at the edge is not keeping values fresh. With nothing shed yet, it also sheds when at least half of its
  streams had a batch ``shared_lag`` late, in a loop busy ``restore_busy`` or more, with a backlog not
  draining: lateness most streams share is made where they meet, in this process, not by one device, and
  a loop that the restore rule would not load further has no room to call it someone else's. Here the
  loop's busy share counts also the time the process's other threads waited for a CPU
  (``collector.loop_busy.CpuWaits``): grpc's threads hand the loop its messages, so while they wait the
  loop idles for its own process, not for the network;
- **restore**: no batch of any stream was ``restore_lag`` intervals behind for ``restore_hold`` seconds:
  the lightest shed targets get half their interval back while the loop's busy share, predicted with
  their updates doubled, stays under ``restore_busy``, and the spell's worst lag, grown in proportion,
  stays under ``restore_lag`` (a restore that would make values late would only be shed again).

How late a batch is (``StreamLoad.lag``) is how long after their timestamps its values could be scraped:
until its ingest ended, plus a worker's wait for its next relay frame. That, not how far behind the batch
was when its ingest began, is what the staleness bound is about.

After any change nothing more is decided for ``settle_intervals`` of the longest new interval: the first
rounds at the new interval must arrive before the lag says anything about the new load. The numbers
(``ShedSettings``) are why each step cannot flap: shedding needs a sustained backlog in a saturated loop,
most streams a whole interval late in a busy one, or late values while already shed; restoring needs a
long quiet spell and a prediction with room to spare. The busy share is wall time, so a machine that gives the process less CPU shows as a busier
loop: the capacity is whatever the machine gives, measured every period, never a remembered figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from collector.lograte import RateLimitedLog
from collector.loop_busy import CpuWaits, LoopBusy

log = logging.getLogger(__name__)

LATE_LOG_SECONDS = 600.0  # one line per ten minutes for values late with nothing shed: a state, not an event


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
    saturated: float = 0.85
    """Busy share of the event loop (wall time running or waiting for a CPU, not waiting for I/O) from
    which it has no room. Past capacity it read 0.86-0.99 a period (bench/README.md, issue 33), not 1: the
    streams' drains gather for part of an interval while behind, and a loop waits briefly for I/O between
    bursts even when the backlog sits in grpc. A loop with more spare time read what arrived when it
    arrived: a backlog then was made upstream (a starved sender, a starting connection), and a longer
    interval is not the process's cure."""
    drain_rate: float = 0.1
    """Seconds of backlog per second that the deepest backlog must shrink by for a process to count as
    catching up (not overloaded): after start-up a process with room drains the first rounds' backlog at
    its spare share of the loop, while one past capacity holds or grows it; a tenth is far above the
    period-to-period noise of a backlog held at a steady level, and reached by any process with that much
    spare capacity."""
    shed_periods: int = 2
    """Periods in a row of overload before shedding, or of a batch ``restore_lag`` late while already
    shed before shedding more: one GC pause or burst is not overload. Once past capacity the bound is the
    values' age, whoever makes them late: brought to 0.94x by a first step, a process keeps up, but a
    round's lag nears an interval and values age past 1.5 intervals; and a longer interval lightens the
    device, the network and the exposition's relay share of an interval as well as the process."""
    shed_share: float = 0.5
    """Share of the process's updates whose targets are doubled per step: the load drops by a quarter
    (1.25x capacity -> 0.94x); a step that is not enough is followed by another once settled."""
    shared_lag: float = 1.0
    """Intervals late, in a batch of at least half of the process's streams, that shed a process with
    nothing shed yet whose loop is busy ``restore_busy`` or more: a round that comes when the next is due
    has let values reach two intervals, past the bound whatever the scrape's timing. Half an interval
    (``restore_lag``) is where values may pass it, and a process under its capacity reads that much: at
    51k updates/s on 2 shared cores a synchronised round of 50 targets took a process 0.5-0.65 of the
    interval, batches 0.43-0.63 late with values at most 1.06 intervals old, while past the capacity the
    worst batches of a process that shed nothing were 1.0-2.8 intervals late (bench/README.md, issue 33)."""
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
    restore_busy: float = 0.6
    """Busy share the process may reach once restored targets send twice as much (their share of the
    updates, of the loop's mean busy share over the quiet spell): a prediction 40 % short still leaves it
    under ``saturated``, and it errs on the safe side (a loop's fixed work, scrapes and timers, does not
    double). It is also where a loop stops having room for lateness most of its streams share
    (``shared_lag``): at 1.15-1.45x the capacity of 2 shared cores the loop of a worker that shed
    nothing read 0.57-0.84 busy, under ``saturated``, while values aged 1.5-5.4 intervals, nearly all
    of it after the senders handed them over (bench/README.md, issue 33). In that rule the busy share is
    the loop's plus its process's other threads' waits for a CPU (``decide``'s ``starved``): with the
    loop alone, a worker at 153.6k offered (past the capacity) read 0.60 and kept values 3.1 intervals
    old; where this rule shed at that load its loops read 0.52-0.80 busy and its other threads waited 0.38-0.93
    thread-seconds a second (two of nine sheds, at 0.52 and 0.57, only the sum makes).
    Under the capacity the sum passes 0.6 too (one process at 102k: 0.48-0.65 busy, 0.25-0.37 waited),
    and ``shared_lag`` is what keeps it: its streams' median lag read 0.43-0.59 of an interval."""
    restore_hold: float = 30.0
    """Seconds with room before a restore step: far longer than it takes to shed, so it cannot flap."""
    max_factor: int = 8
    """Longest interval, in configured intervals: beyond that the data is too coarse to be worth having."""


@dataclass(frozen=True)
class StreamLoad:
    """What one target's stream(s) showed over a period."""

    lag: float
    """Seconds: the latest a batch's values could be scraped after their timestamps (net of the device
    clock's offset): how late they landed in the store, plus the longest wait for a worker's relay. A
    value is at most one interval plus this old when the next one is scraped, so past half an interval
    values may pass the staleness bound (1.5 intervals)."""
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
    _over: int = 0  # periods in a row of overload (or of late values while shed)
    late_kept: int = 0
    """Periods in a row with a batch ``shared_lag`` late (values past the staleness bound whatever the
    scrape's timing) and nothing shed for it; ``kept_because`` says why (the shedder logs it)."""
    kept_because: str = ""
    shed_because: str = ""  # what the last shed answered, for its log line
    _room: tuple[float, float, int, float] | None = None  # quiet spell: since, busy sum, periods, worst lag s
    _settled_at: float | None = None  # no decision before this time (None: not started)
    _deepest: tuple[float, float] | None = None  # (the deepest backlog floor, seconds; when) last period

    def decide(
        self, now: float, loads: Mapping[str, StreamLoad], busy: float, starved: float = 0.0
    ) -> dict[str, int]:
        """The targets to resubscribe and their new factors (empty: nothing to do).

        Args:
            now: monotonic seconds.
            loads: each target's stream over the last period.
            busy: the share of the last period's wall time the process's event loop worked (0..1).
            starved: seconds the process's other threads waited for a CPU, per second of the period.
        """
        s = self.settings
        if self._settled_at is None:
            self._settled_at = now + s.start_grace
        if not loads:
            return {}
        # The backlog's trend is followed through the grace and settling, so the first period judged
        # already says whether the process is draining what it holds.
        deepest = max(load.floor for load in loads.values())
        draining = self._deepest is not None and deepest <= self._deepest[0] - s.drain_rate * (
            now - self._deepest[1]
        )
        self._deepest = (deepest, now)
        if now < self._settled_at:
            return {}
        floor = max(load.floor / load.interval for load in loads.values())
        peak = max(load.lag / load.interval for load in loads.values())
        worst_lag = max(load.lag for load in loads.values())  # seconds
        overloaded = floor >= s.shed_lag and busy >= s.saturated and not draining
        shed = any(load.factor > 1 for load in loads.values())
        # at least half of the process's streams had a batch a whole interval late (the lower median)
        lags = sorted(load.lag / load.interval for load in loads.values())
        shared = lags[(len(lags) - 1) // 2] >= s.shared_lag
        own = busy + starved  # the loop's time, working or idle for its own process's threads
        stale = (shed and peak >= s.restore_lag) or (shared and own >= s.restore_busy and not draining)
        self._over = self._over + 1 if overloaded or stale else 0
        self._keep(peak, busy, starved, draining, loads)
        if peak >= s.restore_lag:
            self._room = None
        elif self._room is None:
            self._room = (now, busy, 1, worst_lag)
        else:
            since, busy_sum, periods, worst = self._room
            self._room = (since, busy_sum + busy, periods + 1, max(worst, worst_lag))
        changes: dict[str, int] = {}
        if self._over >= s.shed_periods:
            changes = self._shed(loads, 1.0 if overloaded and floor >= s.deep_lag else s.shed_share)
            self.shed_because = (
                f"a stream stayed {floor:.1f} intervals behind"
                if overloaded
                else f"batches up to {peak:.1f} intervals late" + ("" if shed else " in most streams")
            )
        elif self._room is not None and now - self._room[0] >= s.restore_hold:
            _, busy_sum, periods, worst = self._room
            changes = self._restore(loads, busy_sum / periods, worst)
        if changes:
            longest = max(
                loads[name].interval * factor / loads[name].factor for name, factor in changes.items()
            )
            longest = max(longest, max(load.interval for load in loads.values()))
            self._settled_at = now + max(s.settle_intervals * longest, 2 * s.period)
            self._over = 0
            self._room = None
        return changes

    def _keep(
        self, peak: float, busy: float, starved: float, draining: bool, loads: Mapping[str, StreamLoad]
    ) -> None:
        """Count a period whose values were late and that sheds nothing for it, and say why."""
        s = self.settings
        bounded = all(load.factor * 2 > min(load.max_factor, s.max_factor) for load in loads.values())
        if peak < s.shared_lag or (self._over and not bounded):
            self.late_kept = 0
            return
        self.late_kept += 1
        if bounded:
            why = f"every target is at its longest interval ({s.max_factor}x)"
        elif draining:
            why = f"the backlog is draining (event loop busy {busy:.2f})"
        elif busy + starved < s.restore_busy:
            waits = f" + {starved:.2f} of threads waiting for a CPU" if starved else ""
            why = (
                f"the event loop had room (busy {busy:.2f}{waits} < {s.restore_busy:g}): lateness made "
                "upstream, by the devices or the network, is not shed"
            )
        else:
            why = (
                f"fewer than half of the process's streams were {s.shared_lag:g} interval late (event loop "
                f"busy {busy:.2f}): one device's lateness, or a round taking part of an interval"
            )
        self.kept_because = f"batches up to {peak:.1f} intervals late, nothing shed: {why}"

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

    def _restore(self, loads: Mapping[str, StreamLoad], busy: float, worst: float) -> dict[str, int]:
        """Halve the intervals of the lightest shed targets while the predicted busy share stays under
        ``restore_busy`` and the spell's worst lag (``worst`` seconds), grown with it, under
        ``restore_lag`` of the target's new interval: a target's share of the loop is taken as its share
        of the process's updates."""
        total = sum(load.updates_per_second for load in loads.values())
        shed = [(n, load) for n, load in loads.items() if load.factor > 1]
        shed.sort(key=lambda item: (item[1].updates_per_second, item[0]))
        predicted = busy
        changes: dict[str, int] = {}
        for name, load in shed:
            extra = busy * load.updates_per_second / total if total > 0 else 0.0
            after = predicted + extra
            grown = worst * after / busy if busy > 0 else worst
            if after > self.settings.restore_busy or grown >= self.settings.restore_lag * load.interval / 2:
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
        # values past the staleness bound that nothing sheds: said once per window, the lag metrics
        # and ``spanwatch_ingest_backlog_seconds`` carry the detail
        self._late = RateLimitedLog(log, window=LATE_LOG_SECONDS)
        self._relay_wait = 0.0  # seconds: the longest gap between a worker's relay frames since a decision

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

    def relayed(self, gap: float) -> None:
        """A worker sent its changes to the exposition ``gap`` seconds after the frame before: a value that
        landed just after that one was that much older when it could be scraped. The longest gap of a
        period is added to every stream's lag (``StreamLoad.lag``), so the policy judges what a scrape
        sees. A process that serves its own exposition never calls this."""
        self._relay_wait = max(self._relay_wait, gap)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        busy, waits = LoopBusy(loop), CpuWaits()
        wall, cpu = loop.time(), self.cpu_seconds()
        try:
            while True:
                await asyncio.sleep(self.settings.period)
                now, cpu_now = loop.time(), self.cpu_seconds()
                util = (cpu_now - cpu) / max(now - wall, 1e-9)
                wall, cpu = now, cpu_now
                share, starved = busy.share(), waits.share()
                with contextlib.suppress(Exception):  # a bug here must not stop the streams; it is logged
                    # a loop that cannot be measured: its CPU is the best guess (one thread runs it)
                    self.step(now, min(util, 1.0) if share is None else share, util, starved or 0.0)
        finally:
            busy.close()

    def step(
        self, now: float, busy: float, util: float | None = None, starved: float = 0.0
    ) -> dict[str, int]:
        """One decision over the registered streams; applies and returns it.

        Args:
            now: monotonic seconds.
            busy: the event loop's busy share over the last period.
            util: the process's CPU over it, in cores (for the log line).
            starved: the other threads' seconds waited for a CPU per second (``CpuWaits``).
        """
        try:
            relay, self._relay_wait = self._relay_wait, 0.0
            loads = {name: _relayed(stream.shed_load(), relay) for name, stream in self.streams.items()}
            changes = self.policy.decide(now, loads, busy, starved)
            cpu = "" if util is None else f", CPU {util:.2f} of a core"
            cpu += f", threads waited {starved:.2f} for a CPU" if starved else ""
            if self.policy.late_kept >= self.settings.shed_periods:
                self._late.log(logging.WARNING, "late", "gnmi: %s%s", self.policy.kept_because, cpu)
            for name, factor in changes.items():
                load = loads[name]
                why = (
                    f"{self.policy.shed_because}, event loop busy {busy:.2f}{cpu}"
                    if factor > load.factor
                    else f"room: event loop busy {busy:.2f}{cpu}"
                )
                self.streams[name].shed_to(factor, why)
            return changes
        except Exception:
            log.exception("gnmi shedding: decision failed; intervals left as they are")
            raise


def _relayed(load: StreamLoad, gap: float) -> StreamLoad:
    return dataclasses.replace(load, lag=load.lag + gap) if gap else load
