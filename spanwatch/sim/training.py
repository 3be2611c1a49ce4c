"""The training job on the simulated fabric: compute, then a gradient sync across the link, each step.

A step computes for ``compute_s`` (jittered), then syncs in ``phases`` phases (reduce-scatter, then
all-gather). A phase puts ``gradient_bytes / phases`` on each site's hosts, spread evenly over the up
waves; the hosts inject at ``host_rate_factor`` x a wave's rate into the egress queues (paused by PFC,
tail-dropped when lossy); lost bytes are sent again one round trip later. A phase ends when its last byte
has left the queues, plus one round trip (the last byte's propagation and the completion coming back).
So a step's network time is made of serialisation, propagation x round trips, queueing behind other
traffic, PFC pauses and retransmissions, all from the model. Finish times have the model step's
resolution (1 ms by default; a queue that empties mid-step is credited with the fraction it served).

The ideal network time is ``phases x (bytes per wave / min(host rate, wave rate) + RTT)``; what a step
took beyond it is its exposed excess. It is attributed to the (device, wave) queues that finished more
than 0.2 ms after the phase's median queue (the ones the step waited for), with the causes seen on them
during the phase (queueing, pfc_pause, drops, fcs_errors), and to waves that went down (wave_down).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from spanwatch.sim import physics
from spanwatch.sim.params import TrainingParams

if TYPE_CHECKING:
    from spanwatch.sim.fabric import Fabric

LATE_S = 2e-4  # a queue finishing this much after the phase's median wave is a culprit
DONE_BYTES = 1.0


@dataclass
class Culprit:
    """One (device, wave) queue that made a step late."""

    device: int
    wave: int
    late_s: float
    causes: set[str] = field(default_factory=set)


@dataclass
class StepRecord:
    """One completed step in model time."""

    step: int
    start_s: float
    compute_end_s: float
    end_s: float
    ideal_network_s: float
    culprits: dict[tuple[int, int], Culprit] = field(default_factory=dict)

    @property
    def network_s(self) -> float:
        return self.end_s - self.compute_end_s

    @property
    def excess_s(self) -> float:
        return max(0.0, self.network_s - self.ideal_network_s)


class TrainingJob:
    """The job's state machine, driven by the fabric's steps.

    Args:
        params: the job.
        fabric: the model it runs on (its queues, source backlogs and counters).
    """

    def __init__(self, params: TrainingParams, fabric: Fabric) -> None:
        self.p = params
        self.f = fabric
        self.rng = np.random.default_rng(fabric.p.seed + 1)
        self.host_rate = params.host_rate_factor * physics.WAVE_BYTES_PER_S
        self.step_no = 0
        self.completed: list[StepRecord] = []
        self.phase = 0
        self.state = "compute"
        self.record = self._new_record(0.0)
        self.t_next = self.record.compute_end_s
        self.finish = np.zeros(2 * fabric.n)
        self.prev_tail = np.zeros(2 * fabric.n)
        self.phase_start = 0.0
        self.phase_ideal_serial = 0.0
        self.mark: np.ndarray = fabric.acc.copy()
        self.rerouted: set[int] = set()

    def _new_record(self, start: float) -> StepRecord:
        compute = self.p.compute_s * (1 + self.p.compute_jitter * float(self.rng.standard_normal()))
        return StepRecord(self.step_no, start, start + max(compute, 0.0), math.nan, 0.0)

    # -- hooks the fabric calls ------------------------------------------------------------------------
    def before_step(self, t: float, dt: float) -> float:
        """Start what begins in ``[t, t + dt)``; returns the fraction of the step the hosts may inject."""
        due = self.f.resend_due()
        if due is not None:
            self.f.src += due
        if self.state == "sync" or self.t_next >= t + dt:
            return 1.0
        start = self.t_next
        if self.state == "wait" and self.phase == self.p.phases:
            self._end_step(start)
            return 1.0
        self._start_phase(start)
        return (t + dt - start) / dt

    def after_step(self, t: float, dt: float, served_t: np.ndarray) -> None:
        """Note the queues that finished their share of the phase in this step."""
        if self.state != "sync":
            return
        f = self.f
        busy = (f.src + f.retx.sum(axis=0) + f.tail) > DONE_BYTES
        self.finish[busy] = math.nan
        newly = np.isnan(self.finish) & ~busy
        if newly.any():
            # The last byte left within this step: after what was ahead of it (step resolution otherwise).
            begin = max(t, self.phase_start)
            ahead = np.minimum((self.prev_tail + served_t) / physics.WAVE_BYTES_PER_S, dt)
            self.finish[newly] = (begin + ahead)[newly]
        self.prev_tail = f.tail.copy()
        if not np.isnan(self.finish).any():
            self._end_phase()

    def reroute(self, going: np.ndarray, flushed_t: np.ndarray) -> None:
        """Waves went down: their share of the job (flushed bytes too) moves to each site's up waves.

        Args:
            going: flat mask of the (device, wave) queues going down.
            flushed_t: the job's bytes their queues held (flat).
        """
        f, n = self.f, self.f.n
        stranded = flushed_t + f.src * going + f.retx.sum(axis=0) * going
        staying = f.up2 & ~going
        if not staying.any():
            f.src += flushed_t  # nowhere to go: it waits at the hosts until a wave comes back
            return
        f.src[going] = 0.0
        f.retx[:, going] = 0.0
        for d in (0, 1):
            side = slice(d * n, (d + 1) * n)
            f.src[side][staying[side]] += stranded[side].sum() / max(1, int(staying[side].sum()))
        self.rerouted.update(int(i) % n for i in np.flatnonzero(going))

    # -- phases and steps ----------------------------------------------------------------------------
    def _start_phase(self, start: float) -> None:
        f = self.f
        up = f.up
        n_up = max(1, int(up.sum()))
        per_wave = self.p.gradient_bytes / self.p.phases / n_up
        f.src += per_wave * f.up2
        self.phase_start = start
        self.phase_ideal_serial = per_wave / min(self.host_rate, physics.WAVE_BYTES_PER_S)
        self.record.ideal_network_s += self.phase_ideal_serial + f.rtt_s
        self.finish = np.where(f.up2, math.nan, start)
        self.prev_tail = f.tail.copy()
        self.mark = f.acc.copy()
        self.rerouted = set()
        self.state = "sync"

    def _end_phase(self) -> None:
        last = float(np.nanmax(self.finish))
        self._blame()
        self.phase += 1
        self.state = "wait"
        self.t_next = last + self.f.rtt_s

    def _blame(self) -> None:
        from spanwatch.sim import fabric as fab

        delta = self.f.acc - self.mark
        # Late means later than the typical wave of the phase: the waves everyone waited for.
        due = max(self.phase_start + self.phase_ideal_serial, float(np.median(self.finish))) + LATE_S
        n = self.f.n
        for i in np.flatnonzero(self.finish > due):
            d, w = divmod(int(i), n)
            key = (d, w)
            c = self.record.culprits.setdefault(key, Culprit(key[0], key[1], 0.0))
            c.late_s = max(c.late_s, float(self.finish[i]) - due + LATE_S)
            c.causes.add("queueing")
            if delta[fab.PAUSE_S, i] > 0:
                c.causes.add("pfc_pause")
            if delta[fab.DROP_T, i] > 0:
                c.causes.add("drops")
            if delta[fab.LOST_T, (1 - d) * n + w] > 0:
                c.causes.add("fcs_errors")
        for w in self.rerouted:
            for d in (0, 1):
                c = self.record.culprits.setdefault((d, w), Culprit(d, w, 0.0))
                c.causes.add("wave_down")

    def _end_step(self, end: float) -> None:
        self.record.end_s = end
        self.completed.append(self.record)
        self.step_no += 1
        self.phase = 0
        self.record = self._new_record(end)
        self.t_next = self.record.compute_end_s
        self.state = "compute"
