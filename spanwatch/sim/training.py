"""The training job on the simulated fabric: per-rank compute, then collectives over the job's links.

A step: every rank computes (``compute`` jittered per rank; frozen through ``compute_stall`` episodes;
plus the checkpoint's seconds on checkpoint steps), the collective starts when the slowest rank is done,
then runs in phases. A phase puts ``bytes / links`` on each job link in each direction (ECMP by flow:
equal per link), spread evenly over the link's up waves; the hosts inject at line rate times their
congestion-control rate. A queue's share is done when its last byte has left the switch, plus one round
trip (propagation and the completion coming back), or, when the far end's receive stage held it back
(incast), when that stage cleared plus one propagation delay. The phase ends with its last queue.

- data: every step, 2 phases (reduce-scatter, all-gather) of half the gradient (params x bytes_per_param);
- diloco: the same outer sync every ``sync_every`` steps, no communication in between;
- pipeline: every step, ``2 x MICROBATCHES`` phases (forward activations, backward gradients) of
  ``params x bytes_per_param x ACTIVATION_FRACTION`` in all: latency-bound, many round trips.

A clean phase takes ``max over links (bytes per wave / wave rate + round trip)``; what a phase took beyond
its clean end is the network's doing, split by link (airport rule, see ``truth``) and by cause (what took
each link's waves' service during the phase: the fabric's ``lost`` rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from spanwatch.sim.layout import B, F, Layout
from spanwatch.sim.scenario import ComputeStall, Scenario

MICROBATCHES = 4
ACTIVATION_FRACTION = 1 / 16  # activations crossing the stage boundary per step, of the model's bytes
DONE_BYTES = 1.0
REROUTE = 4  # row of the network's ``lost``


class Network(Protocol):
    """What the job needs of the fabric (the fabric satisfies it; this module never imports it)."""

    dt: float
    lay: Layout
    up: B
    src: F
    retx: F
    retx_total: F
    lost: F
    tail: F
    drain_step: F

    def egress_outstanding(self) -> F: ...

    def rx_backlog(self) -> F: ...


@dataclass
class StepRecord:
    """One completed step, model time (switches' clock)."""

    step: int
    start_s: float
    compute_s: F  # per rank, stalls and checkpoint included
    comm_start_s: float = math.nan
    end_s: float = math.nan
    clean_s: float = 0.0
    network_s: float = 0.0
    by_link: F = field(default_factory=lambda: np.zeros(0))
    by_cause: F = field(default_factory=lambda: np.zeros(5))
    checkpoint: bool = False


def airport(lateness: F, total: float) -> F:
    """Split ``total`` (the max of ``lateness``) over links: each increment of lateness equally among the
    links at least that late (the airport game's Shapley value)."""
    out = np.zeros_like(lateness)
    if total <= 0 or not lateness.any():
        return out
    order = np.argsort(lateness)
    prev = 0.0
    for k, i in enumerate(order):
        layer = float(lateness[i]) - prev
        if layer > 0:
            out[order[k:]] += layer / (len(order) - k)
            prev = float(lateness[i])
    return out * (total / max(float(lateness.max()), 1e-30))


def compute_end(start: float, work: float, frozen: list[tuple[float, float]]) -> float:
    """When ``work`` seconds of compute started at ``start`` finish, not progressing in ``frozen``."""
    t, left = start, work
    for a, b in frozen:
        if b <= t:
            continue
        if a >= t + left:
            break
        left -= max(0.0, a - t)
        t = max(t, b)
    return t + left


class TrainingJob:
    """The job's state machine, driven by the fabric's steps."""

    def __init__(self, scenario: Scenario, net: Network) -> None:
        self.s = scenario
        self.net = net
        lay = self.lay = net.lay
        job = scenario.job
        self.rng = np.random.default_rng(scenario.seed + 1)
        self.ranks = scenario.ranks
        self.frozen: list[list[tuple[float, float]]] = [[] for _ in range(self.ranks)]
        for e in scenario.episodes:
            if isinstance(e, ComputeStall):
                for r in e.ranks:
                    self.frozen[r].append((e.start, e.end))
        for windows in self.frozen:
            windows.sort()
        total = job.params * job.bytes_per_param
        if job.parallelism == "pipeline":
            self.phases, self.phase_bytes = 2 * MICROBATCHES, total * ACTIVATION_FRACTION / (2 * MICROBATCHES)
        else:
            self.phases, self.phase_bytes = 2, total / 2
        self.sync_every = job.sync_every if job.parallelism == "diloco" else 1
        self.job_links = np.flatnonzero(lay.job_link)
        self.link_bytes = np.where(lay.job_link, self.phase_bytes / max(1, len(self.job_links)), 0.0)
        n_links = len(lay.links)
        self.waves = np.asarray([lk.waves for lk in lay.links], dtype=np.float64)
        cap_link = np.asarray([lay.cap[lay.offsets[i]] for i in range(n_links)])
        rtt_link = np.asarray([lay.rtt[lay.offsets[i]] for i in range(n_links)])
        self.clean_link = np.where(lay.job_link, self.link_bytes / (self.waves * cap_link) + rtt_link, 0.0)
        self.clean_phase = float(self.clean_link.max())
        self.step_no = 0
        self.completed: list[StepRecord] = []
        self.state = "compute"
        self.phase = 0
        self.record = self._new_record(0.0)
        self.t_next = self.record.comm_start_s
        size = lay.size
        self.assigned = np.zeros(size, dtype=bool)
        self.egress_finish = np.zeros(size)
        self.rx_held = np.zeros(size, dtype=bool)
        self.rx_clear = np.zeros(size)
        self.prev_tail = np.zeros(size)
        self.phase_start = 0.0
        self.mark = net.lost.copy()

    @property
    def syncing(self) -> bool:
        return self.state == "sync"

    def _new_record(self, start: float) -> StepRecord:
        job = self.s.job
        work = job.compute * (1 + job.compute_jitter * self.rng.standard_normal(self.ranks))
        work = np.maximum(work, 0.0)
        k = self.step_no
        checkpoint = job.checkpoint.every > 0 and (k + 1) % job.checkpoint.every == 0
        if checkpoint:
            work = work + job.checkpoint.seconds
        ends = np.asarray([compute_end(start, float(w), self.frozen[r]) for r, w in enumerate(work)])
        r = StepRecord(k, start, ends - start, checkpoint=checkpoint)
        r.comm_start_s = float(ends.max())
        r.by_link = np.zeros(len(self.lay.links))
        return r

    def quiet_until(self) -> float:
        """A step ending by this time changes nothing in the job (it computes or waits); -inf while it syncs."""
        return -math.inf if self.state == "sync" else self.t_next

    def communicates(self, step: int) -> bool:
        return (step + 1) % self.sync_every == 0

    # -- hooks the fabric calls ------------------------------------------------------------------------
    def before_step(self, t: float, dt: float) -> float:
        """Start what begins in ``[t, t + dt)``; returns the fraction of the step the hosts may inject."""
        if self.state == "sync" or self.t_next >= t + dt:
            return 1.0
        start = self.t_next
        if (self.state == "wait" and self.phase == self.phases) or not self.communicates(self.step_no):
            self._end_step(start)
            return 1.0
        self._start_phase(start)
        return (t + dt - start) / dt

    def after_step(self, t: float, dt: float, served_t: F) -> None:
        """Note the queues whose share of the phase finished in this step."""
        if self.state != "sync":
            return
        net, lay = self.net, self.lay
        busy = (net.egress_outstanding() > DONE_BYTES) & self.assigned
        self.egress_finish[busy] = math.nan
        newly = np.isnan(self.egress_finish) & ~busy
        if newly.any():
            begin = max(t, self.phase_start)
            ahead = np.minimum((self.prev_tail + served_t) / lay.cap, dt)
            self.egress_finish[newly] = (begin + ahead)[newly]
        self.prev_tail = net.tail.copy()
        held = (net.rx_backlog() > net.drain_step[lay.peer] + DONE_BYTES) & self.assigned
        self.rx_held |= held
        self.rx_clear[held] = math.nan
        self.rx_clear[np.isnan(self.rx_clear) & ~held] = t + dt
        if not (np.isnan(self.egress_finish).any() or np.isnan(self.rx_clear).any()):
            self._end_phase()

    def reroute(self, going: B, stranded: F) -> None:
        """Waves went down: their share of the job moves to the up waves at the same end of the link."""
        net, lay = self.net, self.lay
        moving = stranded + net.src * going + net.retx_total * going
        net.src[going] = 0.0
        net.retx[:, going] = 0.0
        net.retx_total[going] = 0.0
        staying = net.up & ~going
        for li in range(len(lay.links)):
            for side in (0, 1):
                block = lay.block(li, side)
                amount = float(moving[block].sum())
                if amount <= 0:
                    continue
                stay = staying[block]
                if not stay.any():
                    net.src[block] += moving[block]  # nowhere to go: it waits for a wave to come back
                    continue
                share = np.where(stay, amount / int(stay.sum()), 0.0)
                net.src[block] += share
                net.lost[REROUTE, block] += share / lay.cap[block]

    # -- phases and steps ----------------------------------------------------------------------------
    def _start_phase(self, start: float) -> None:
        net, lay = self.net, self.lay
        self.assigned = lay.job_link[lay.link_of].copy()
        up = net.up
        n_up = lay.per_link(up.astype(np.float64)) / 2  # both ends of a wave go down together
        all_down = n_up == 0
        per_wave = self.link_bytes / np.maximum(n_up, 1)
        share = np.where(
            all_down[lay.link_of],
            self.link_bytes[lay.link_of] / self.waves[lay.link_of],
            per_wave[lay.link_of],
        )
        net.src += np.where(up | all_down[lay.link_of], share, 0.0) * self.assigned
        self.phase_start = start
        self.egress_finish = np.where(self.assigned, math.nan, start)
        self.rx_held = np.zeros(lay.size, dtype=bool)
        self.rx_clear = np.full(lay.size, start)
        self.prev_tail = net.tail.copy()
        self.mark = net.lost.copy()
        self.state = "sync"

    def _end_phase(self) -> None:
        lay = self.lay
        finish = self.egress_finish + lay.rtt
        finish = np.where(self.rx_held, np.maximum(finish, self.rx_clear + lay.one_way), finish)
        finish = np.where(self.assigned, finish, self.phase_start)
        end = float(finish.max())
        clean_end = self.phase_start + self.clean_phase
        extra = max(0.0, end - clean_end)
        finish_link = np.maximum.reduceat(finish, lay.offsets)
        lateness = np.where(lay.job_link, np.maximum(finish_link - clean_end, 0.0), 0.0)
        shares = airport(lateness, extra)
        r = self.record
        r.clean_s += self.clean_phase
        r.network_s += extra
        r.by_link += shares
        if extra > 0:
            lost = self.net.lost - self.mark
            weights = np.stack([lay.per_link(row) for row in lost])  # (cause, link)
            total = weights.sum(axis=0)
            frac = np.where(total > 0, weights / np.maximum(total, 1e-30), 0.0)
            frac[3] = np.where(total > 0, frac[3], 1.0)  # nothing classified: congestion-control slowdown
            r.by_cause += frac @ shares
        self.phase += 1
        self.state = "wait"
        self.t_next = max(end, self.phase_start)

    def _end_step(self, end: float) -> None:
        self.record.end_s = end
        self.completed.append(self.record)
        self.step_no += 1
        self.phase = 0
        self.record = self._new_record(end)
        self.t_next = self.record.comm_start_s
        self.state = "compute"
