"""Whether the network showed each episode: what any instrument on the switches could have seen of it.

A random scenario may draw an episode that leaves no trace in the network: another tenant's "congestion" at
0.3 of a link's capacity that every queue absorbs below its marking threshold, an incast the far buffer takes
without pausing or dropping, a degradation of a wave that is down the whole time. No counter, gauge or
optical reading the witness watches differs from a run without it. The truth marks them ``shown: false``;
event recall still judges them (the spec's figure) and the score counts their misses apart
(``spanwatch.score``: ``missed_unshown``), a diagnosis. Not yet a proof of invisibility: on 101 random runs
8 of 48 unshown episodes were found by the analyzer anyway (an ingress or watermark rise below the marking
threshold, or another episode's event beside them).

Shown means, while the episode ran (checked at every 100 ms watermark window it overlaps):

- traffic kinds (congestion, burst, incast): on the episode's egress queues, in its class, the queue stood
  above the switch's own marking threshold (``ECN_MIN`` of its buffer: where the switch itself starts to
  call it congestion and mark), or packets were dropped, or the far end paused them; for an incast also the
  far switch's receive stage, which it fills, above that threshold or dropping;
- ``optical_degradation``: its wave carried light (a dark wave has no OSNR to lower);
- ``wave_down``: always (the interface goes down).

No level here is fitted: the threshold is the simulated switch's configured marking threshold; a drop counts
from one byte (the fluid model's rounding leaves +-1e-9 bytes where nothing was dropped), a pause from one
paused step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spanwatch.sim.layout import F, Layout
from spanwatch.sim.scenario import (
    Burst,
    ComputeStall,
    Congestion,
    Incast,
    OpticalDegradation,
    Scenario,
)
from spanwatch.sim.scenario import Episode as ScenarioEpisode

DROPPED_BYTES = 1.0  # less is float rounding of the fluid model, not a packet
PAUSED_STEPS = 1.0  # the pause counters count whole paused steps


@dataclass
class _Watch:
    """One network episode and the places that would show it."""

    start: float
    end: float
    job_class: bool  # in the job's class (its queue rows T + X), else the background class (row O)
    egress: slice | None  # the queues its traffic waits in (sender-indexed)
    receive: slice | None  # an incast's far receive stage (receiver-indexed)
    wave: int | None  # an optical degradation's receiver index
    shown: bool


@dataclass
class Window:
    """What one 100 ms window of the fabric held, per queue: peaks and the counters' increase."""

    job_peak: F  # the job's class queue (T + X), egress
    other_peak: F  # the background class queue, egress
    receive_peak: F  # the job's class in the receive stage, receiver-indexed
    job_dropped: F  # egress drops of T and X
    job_paused: F  # steps the far end paused the job's class
    other_dropped: F
    receive_dropped: F  # receive-stage drops of T and X
    up: np.ndarray  # waves with light


class Witness:
    """Follows every network episode of a run and says which the network showed (``shown``)."""

    def __init__(self, scenario: Scenario, lay: Layout, threshold: F) -> None:
        self.threshold = threshold  # per queue, bytes: the switch's marking threshold
        self.watches = [self._watch(scenario, lay, e) for e in scenario.episodes]

    @staticmethod
    def _watch(s: Scenario, lay: Layout, e: ScenarioEpisode) -> _Watch | None:
        if isinstance(e, ComputeStall):
            return None
        li = lay.link_index(e.link)
        near, far = lay.block(li, 0), lay.block(li, 1)
        if isinstance(e, Congestion | Burst | Incast):
            job = s.traffic_class(e) == s.job.traffic_class
            receive = far if isinstance(e, Incast) else None
            return _Watch(e.start, e.end, job, near, receive, None, False)
        wave = lay.index(li, 1, e.wave - 1) if isinstance(e, OpticalDegradation) else None
        return _Watch(e.start, e.end, True, None, None, wave, wave is None)  # a wave down always shows

    def window(self, start: float, end: float, w: Window) -> None:
        """Note what the window ``[start, end)`` showed of the episodes it overlaps."""
        for watch in self.watches:
            if watch is None or watch.shown or not (watch.start < end and start < watch.end):
                continue
            watch.shown = self._shows(watch, w)

    def _shows(self, watch: _Watch, w: Window) -> bool:
        if watch.wave is not None:
            return bool(w.up[watch.wave])
        shown = False
        if watch.egress is not None:
            q = watch.egress
            if watch.job_class:
                shown = bool(
                    (w.job_peak[q] > self.threshold[q]).any()
                    or (w.job_dropped[q] >= DROPPED_BYTES).any()
                    or (w.job_paused[q] >= PAUSED_STEPS).any()
                )
            else:
                shown = bool(
                    (w.other_peak[q] > self.threshold[q]).any() or (w.other_dropped[q] >= DROPPED_BYTES).any()
                )
        if not shown and watch.receive is not None:
            r = watch.receive
            shown = bool(
                (w.receive_peak[r] > self.threshold[r]).any() or (w.receive_dropped[r] >= DROPPED_BYTES).any()
            )
        return shown

    def shown(self) -> list[bool | None]:
        """Per episode of the scenario, in its order: shown or not (None for a compute stall)."""
        return [None if w is None else w.shown for w in self.watches]


__all__ = ["Window", "Witness"]
