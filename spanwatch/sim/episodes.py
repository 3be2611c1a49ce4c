"""Injected episodes as per-queue arrays the model reads every step (rebuilt only when one starts or ends).

Network kinds (the scenario names a link, and a wave for the optical ones; traffic goes from the link's
first site to its second):

- ``congestion`` / ``burst``: another tenant's traffic, ``load`` x the link's capacity spread over its up
  waves, in the job's class (it queues with the job) or in the background class (it does not: the job's
  class is served first);
- ``incast``: ``fan_in`` senders at the far site converge on the hosts the job writes to, so the far
  switch drains the job's class to them at 1/fan_in of line rate; its receive buffer fills, then it
  pauses the near end over the wave (lossless) or drops (lossy);
- ``optical_degradation``: OSNR drops by ``osnr_drop_db`` at the far receiver of one wave;
- ``wave_down``: the wave loses light, both ends.

``compute_stall`` is the job's (see ``training``); it has no network effect.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spanwatch.sim.layout import B, F, Layout
from spanwatch.sim.scenario import (
    Burst,
    ComputeStall,
    Congestion,
    Incast,
    OpticalDegradation,
    Scenario,
    WaveDown,
)


@dataclass
class Effects:
    """Per-queue arrays: extra offered load in the job's class and in the background class (fraction of
    the wave's capacity, egress-indexed), waves down, the receive-side drain share and the OSNR drop
    (receiver-indexed)."""

    job_load: F
    other_load: F
    down: B
    drain: F
    penalty_db: F


class Schedule:
    """The scenario's network episodes, evaluated cheaply every model step."""

    def __init__(self, scenario: Scenario, layout: Layout) -> None:
        self.s = scenario
        self.lay = layout
        self.episodes = [e for e in scenario.episodes if not isinstance(e, ComputeStall)]
        self.bounds = sorted({b for e in self.episodes for b in (e.start, e.end)} | {float("inf")})
        self._next = -1.0
        self._until = -1.0
        self.fx = self._build(0.0)
        self.version = 0

    def effects(self, t: float) -> Effects:
        """The effects at ``t`` (the same object until an episode starts or ends)."""
        if t >= self._until or t < self._next:
            self.fx = self._build(t)
            self.version += 1
        return self.fx

    @property
    def until(self) -> float:
        """When the effects last returned change (an episode starts or ends)."""
        return self._until

    def _build(self, t: float) -> Effects:
        lay, size = self.lay, self.lay.size
        i = int(np.searchsorted(self.bounds, t, side="right"))
        self._next = self.bounds[i - 1] if i else -float("inf")
        self._until = self.bounds[i]
        job_load, other_load = np.zeros(size), np.zeros(size)
        down = np.zeros(size, dtype=bool)
        drain, penalty = np.ones(size), np.zeros(size)
        active = [e for e in self.episodes if e.start <= t < e.end]
        for e in active:
            if isinstance(e, WaveDown):
                li = lay.link_index(e.link)
                down[[lay.index(li, 0, e.wave - 1), lay.index(li, 1, e.wave - 1)]] = True
        for e in active:
            li = lay.link_index(e.link)
            far = lay.block(li, 1)
            if isinstance(e, Congestion | Burst):
                near = lay.block(li, 0)
                up = ~down[near]
                spread = up * (len(up) / max(1, int(up.sum())))
                target = job_load if self.s.traffic_class(e) == self.s.job.traffic_class else other_load
                target[near] += e.load * spread
            elif isinstance(e, Incast) and self.s.traffic_class(e) == self.s.job.traffic_class:
                drain[far] = np.minimum(drain[far], 1.0 / e.fan_in)
            elif isinstance(e, OpticalDegradation):
                penalty[lay.index(li, 1, e.wave - 1)] += e.osnr_drop_db
        return Effects(job_load, other_load, down, drain, penalty)
