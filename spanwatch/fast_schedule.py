"""Every snapshot time of a fast recording, known before it runs, so that the model can step to all of them.

The recorder (``spanwatch.fast``) draws each snapshot's time from the run's generator after the collector's
work before the last snapshot, so one drawn after the other, a model in another process would wait for the
recorder at every snapshot (and the recorder's work comes in bursts: a gNMI round a second, a flush every
ten). But that work draws from the generator only in SNMP polls (a poll's duration, which decides when the
next poll is) and probe windows (their round trips), and its times follow from those draws alone, never
from what a snapshot holds. So ``Lookahead`` replays just those draws, on a copy of the generator taken
where the model loop starts, and gives the snapshot times the loop will draw; the recorder checks each one
it draws against them (``ScheduleError`` if they ever part).
"""

from __future__ import annotations

import copy
import heapq
import itertools

import numpy as np

from collector.errors import SpanwatchError
from spanwatch.fast_feeds import Timing
from spanwatch.fast_model import stepped


class ScheduleError(SpanwatchError):
    """The recorder drew another snapshot time than the lookahead replayed (a bug: the two must agree)."""


def next_poll(now: float, interval: float, ended: float) -> float:
    """When a poll started at ``now`` and ended at ``ended`` polls next: an overrun skips intervals, as
    ``collector.scheduler.Poller.run`` does."""
    nxt = now + interval
    while nxt < ended:
        nxt += interval
    return nxt


class Lookahead:
    """The recorder's draws without its work (see the module docstring).

    Args:
        timing: the recorder's delays.
    """

    def __init__(self, timing: Timing) -> None:
        self.timing = timing
        self._events: list[tuple[float, int, float, int]] = []  # (when, order, interval, probes or 0)
        self._seq = itertools.count()

    def poll(self, first: float, interval: float) -> None:
        """An SNMP target polled from ``first`` every ``interval``."""
        heapq.heappush(self._events, (first, next(self._seq), interval, 0))

    def probe(self, first: float, interval: float, count: int) -> None:
        """A probe target whose windows of ``count`` round trips close from ``first`` every ``interval``."""
        heapq.heappush(self._events, (first, next(self._seq), interval, count))

    def snapshot_times(
        self, rng: np.random.Generator, streams: int, start: float, dt: float, duration: float
    ) -> list[float]:
        """The times ``Recorder._run_model`` will ask the model for, from ``rng`` as it is now (not used).

        Args:
            rng: the recorder's generator where its model loop starts (copied).
            streams: the gNMI streams (a draw each per snapshot).
            start: the model's time.
            dt: the model's step.
            duration: the loop's end (model seconds).
        """
        rng, t = copy.deepcopy(rng), self.timing
        events = list(self._events)
        dues: list[float] = []

        def request(now: float) -> float:
            dues.append(now + t.snapshot_s + float(rng.uniform(0.0, t.snapshot_slack_s)))
            return stepped(now, dt, dues[-1])

        published, now = 0.0, start
        more = now < duration
        if more:
            now = request(now)
        while more:  # ``Recorder._run_model``'s loop, its draws only
            taken = now
            wall = max(published, taken + t.lag(rng))
            self._until(events, rng, wall)
            published = wall
            t.deliver(rng)
            for _ in range(streams):
                rng.uniform()
            more = taken < duration
            if more:
                now = request(now)
        return dues

    def _until(
        self, events: list[tuple[float, int, float, int]], rng: np.random.Generator, wall: float
    ) -> None:
        while events and events[0][0] < wall:
            when, _, interval, probes = heapq.heappop(events)
            if probes:
                self.timing.round_trips(rng, 0.0, probes)
                nxt = when + interval
            else:
                nxt = next_poll(when, interval, when + self.timing.poll(rng))
            heapq.heappush(events, (nxt, next(self._seq), interval, probes))
