"""The fluid model of every link of the fabric, stepped in numpy over flat per-queue arrays (``layout``).

Each step of ``dt`` (1 ms) is a fluid update, exact for rates constant within the step:

- arrivals at each egress queue: the job's bytes from its hosts (at line rate times its congestion-control
  rate), another tenant's traffic in the job's class (``congestion``/``burst`` episodes) and background
  traffic in one other class (noisy, plus episodes in that class);
- the port serves the job's class first (strict priority, as RoCE classes are configured), then the
  background class with what is left: traffic in another class never slows the job;
- lossless links (PFC on the job's class): the hosts are paused for the part of a step that would take the
  queue past xoff, so that queue never tail-drops; the background class is lossy everywhere;
- lossy: what does not fit in the buffer is tail-dropped, split by the arrivals' mix;
- ECN marks departures with a probability rising from 0 at ecn_min to 1 at ecn_max; the marks (and drops)
  reach the job's sender one round trip later as congestion notifications and cut its rate
  multiplicatively (DCQCN-style, at most once a round trip), and it recovers additively;
- departures travel one propagation delay to the far switch (frames hit by post-FEC errors are lost there:
  FCS errors) into its receive stage, which drains the job's class to its hosts at line rate (at 1/fan_in
  of it under incast). When that stage passes xoff on a lossless link the far switch pauses the sender's
  job class over the wave (PFC received at the near end); past the buffer it drops (on a lossless link
  only if the headroom, the buffer above xoff, is less than what is in flight: shallow buffers at
  distance). The job's lost bytes are sent again one round trip later. The receive stage is the far
  switch's ingress queue of the job's class on that port (a deep-buffer switch's VOQ or ingress priority
  group): it is reported as such (``ingress_occupancy``, ``ingress_watermark``) and it shares the
  device's buffer pool with the egress queues.

While the job is syncing, each step also classifies the service each of its waves did not get into the
truth's causes (``lost``): a wave down (lost_capacity), paused (pause), retransmissions pending
(loss_recovery), or other traffic ahead / a rate cut (queueing).

Counters accumulate as float64 totals per class (T the job, X other traffic in its class, O background);
egress-side rows are indexed by the sending queue, receive-side rows (RX, LOST, DROP_RX, FEC) by the
receiver. ``conservation`` gives the totals of admitted = transmitted + queued + tail-dropped + flushed.

Speed: the arrays are tiny, so a step costs its number of numpy calls. Terms that are exact zeros are not
computed (the job's class idle at every sender: ``_background_only``; nothing of it arriving:
``_background_arrives``; no queue above ecn_min; nothing paused): the state stays the same bit for bit, and
``tests/sim/test_fast_step.py`` holds the step to the straightforward one (change the arithmetic in both).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spanwatch.sim.episodes import Effects, Schedule
from spanwatch.sim.layout import ECN_MAX, ECN_MIN, XOFF, XON, F, Layout
from spanwatch.sim.optics import Optics
from spanwatch.sim.scenario import Scenario
from spanwatch.sim.training import TrainingJob
from spanwatch.sim.witness import Window, Witness

(TX_T, TX_X, TX_O, RX_T, RX_X, RX_O, LOST_T, LOST_X, LOST_O, DROP_T, DROP_X, DROP_O) = range(12)
(DROP_RX_T, DROP_RX_X, FLUSH_T, FLUSH_X, FLUSH_O, ECN_T, ECN_X, ECN_O) = range(12, 20)
(PAUSE_HOST, PAUSE_RX, STORMS, FEC_CORR, FEC_UNCORR, ADMITTED) = range(20, 26)
N_ACC = 26  # PAUSE_* count paused steps (x dt = seconds)
WITNESSED = [DROP_T, DROP_X, DROP_O, PAUSE_RX, DROP_RX_T, DROP_RX_X]  # the counters ``Witness`` reads
LOST_CAPACITY, PAUSE, LOSS_RECOVERY, QUEUEING, REROUTE = range(5)  # rows of ``lost``
CAUSE_NAMES = ("lost_capacity", "pause", "loss_recovery", "queueing", "reroute")

STEP_S = 1e-3
BACKGROUND_LOAD = 0.3  # of each wave, in the background class
BACKGROUND_FRAME_BYTES = 1024.0
FRAME_BYTES = 4096.0  # RoCE frames of the job (and of other traffic in its class)
FEC_BLOCK_BITS = 10_240.0
RATE_MIN = 0.02
RATE_CUT = 0.5  # x marked fraction, per notification
RATE_RECOVER = 0.05  # of line rate, per round trip without notifications
WATCHDOG_S = 0.2  # a priority paused this long without a break is a PFC storm
WINDOW_S = 0.1  # watermark / stat window granularity
WINDOWS = 10  # watermarks cover the last WINDOWS x 100 ms = 1 s
NOISE_ROWS = 4096
EPS = 1e-30


@dataclass
class Conservation:
    """Byte totals of the egress law (summed over every queue)."""

    admitted: float
    transmitted: float
    queued: float
    dropped: float
    flushed: float


def _unit(x: F) -> F:
    """``x`` clipped to [0, 1] (``np.clip``'s result, without its overhead on tiny arrays)."""
    return np.minimum(np.maximum(x, 0.0), 1.0)


def _in_order(total: F, rows: F) -> F:
    """``total`` plus each row of ``rows`` in turn: what a ``+=`` a step gives, bit for bit (``accumulate``
    adds in order, where ``sum`` may pair)."""
    return np.asarray(np.add.accumulate(np.vstack((total, rows)), axis=0)[-1])


def steps_until(now: float, dt: float, due: float, tolerance: float) -> tuple[int, float]:
    """How many steps of ``dt`` from ``now`` end by ``due`` (+ ``tolerance``), and the time after them:
    ``Fabric.step`` adds ``dt`` a step, so these are the same float operations, and so the same time."""
    n = 0
    while now + dt <= due + tolerance:
        now = now + dt
        n += 1
    return n, now


class Fabric:
    """Every link, its switches and the job, advanced by ``step()``."""

    def __init__(self, scenario: Scenario, dt: float = STEP_S) -> None:
        self.s = scenario
        lay = self.lay = Layout(scenario)
        size = lay.size
        self.dt = dt
        self.t = 0.0
        self.steps = 0
        self.schedule = Schedule(scenario, lay)
        self.rng = np.random.default_rng(scenario.seed)
        self.cap = lay.cap
        self.inv_cap = 1.0 / lay.cap
        self.xoff = XOFF * lay.buffer
        self.xon = XON * lay.buffer
        self.ecn_min = ECN_MIN * lay.buffer
        self.ecn_slope = 1.0 / ((ECN_MAX - ECN_MIN) * lay.buffer)
        self.lossy = ~lay.lossless
        self.lossless_peer = lay.lossless[lay.peer]
        self.any_lossy, self.all_lossy = bool(self.lossy.any()), bool(self.lossy.all())
        self.recover_step = (
            RATE_RECOVER * dt / lay.rtt
        )  # the additive recovery of one step without notification
        self.pause_refresh_s = 65535 * 512 / (lay.cap * 8) / 2  # half the maximal pause quantum
        z = np.zeros
        self.q_t, self.q_x, self.q_o = z(size), z(size), z(size)
        self.src = z(size)  # the job's bytes waiting at the hosts, per egress queue
        self.tail = z(size)  # bytes up to and including the job's last byte in each queue (FIFO)
        self.rate = np.ones(size)  # the job's congestion-control rate, fraction of line rate
        self.cut_timer = z(size)
        self.rq_t, self.rq_x = z(size), z(size)  # receive stage (receiver-indexed)
        self.rx_paused = np.zeros(size, dtype=bool)  # receiver r pauses its peer
        self.in_flight_t = z(size)  # the job's bytes on the fibre, by sender
        self.acc = z((N_ACC, size))
        self.lost = z((5, size))
        self.ar = np.arange(size)
        self.delay_steps = np.maximum(1, np.round(lay.one_way / dt)).astype(np.int64)
        self.rtt_steps = np.maximum(1, np.ceil(lay.rtt / dt)).astype(np.int64)
        ring = int(max(self.delay_steps.max(), self.rtt_steps.max())) + 1
        self.ring = ring
        self.line = z((3, ring, size))  # [class, slot, sender]
        self.retx = z((ring, size))
        self.retx_total = z(size)
        self.signal = z((ring, size))  # congestion notifications on their way back to the sender
        # Flat offsets into those rings: a step reads and writes one slot per queue with take/put on a flat
        # view, far cheaper than 2-d fancy indexing on arrays this small.
        self._ring_size = ring * size
        self._delay_at = self.delay_steps * size + self.ar  # + steps x size, modulo the ring: the slot
        self._rtt_at = self.rtt_steps * size + self.ar
        self._classes_at = (np.arange(3) * ring * size)[:, None]
        # ...and those slots for each step modulo the ring, once: ``(steps x size + at) % ring_size`` depends
        # on ``steps % ring`` only (integers: the same offsets), so a step looks its own up.
        slot_base = np.arange(ring)[:, None] * size
        self._deliver_slots = ((slot_base + self._delay_at) % self._ring_size)[:, None, :] + self._classes_at
        self._rtt_slots = (slot_base + self._rtt_at) % self._ring_size
        self._no_bytes = np.zeros(size)  # an empty receive stage (read only: shared by every quiet step)
        self._no_bytes.flags.writeable = False
        self.noise = 1 + 0.25 * self.rng.standard_normal((NOISE_ROWS, size)).clip(-3, 3)
        self.win_steps = max(1, round(WINDOW_S / dt))
        self.peak, self.peak_o = z(size), z(size)
        self.peaks, self.peaks_o = z((WINDOWS, size)), z((WINDOWS, size))
        self.rq_peak, self.rq_peaks = z(size), z((WINDOWS, size))
        self.pool_peak = z(len(lay.devices))
        self.pool_peaks = z((WINDOWS, len(lay.devices)))
        self.pause_run = z(size)
        self._pause_mark = z(size)
        self.up = np.ones(size, dtype=bool)
        self.optics = Optics(lay, self.rng, dt)
        self.job = TrainingJob(scenario, self)
        self.witness = Witness(scenario, lay, self.ecn_min)
        self._witnessed = self.acc[WITNESSED]
        self._fx_version = -1
        self.cap_step: F = np.zeros(size)  # bytes a wave moves in a step (zero when down): ``_links`` sets it
        self._links(np.zeros(size, dtype=bool))
        self._apply(self.schedule.effects(0.0))

    # -- the step ----------------------------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        """Run whole steps until ``seconds`` more of model time have passed (at least one step)."""
        self.run(max(1, round(seconds / self.dt)))

    def step_until(self, due: float, tolerance: float) -> None:
        """Run every step that ends by ``due`` (+ ``tolerance``: ``steps_until``)."""
        self.run(steps_until(self.t, self.dt, due, tolerance)[0])

    def run(self, n: int) -> None:
        """Run ``n`` steps; each quiet stretch (``_quiet_steps``) runs as one block, to the same state."""
        while n > 0:
            self._begin_step()
            quiet = self._quiet_steps(n)
            if quiet:
                self._quiet_block(quiet)
                n -= quiet
            else:
                self._rest_of_step()
                n -= 1

    def step(self) -> None:
        """Advance the model by one ``dt``."""
        self._begin_step()
        self._rest_of_step()

    def _begin_step(self) -> None:
        """What starts a step: the episodes' effects at its time, and the optics when an update is due."""
        fx = self.schedule.effects(self.t)
        if self.schedule.version != self._fx_version:
            self._fx_version = self.schedule.version
            self._apply(fx)
        if self.steps % self.optics.every == 0:
            self._optics(fx)

    def _rest_of_step(self) -> None:
        dt, t = self.dt, self.t
        self._resend_due()
        host_frac = self.job.before_step(t, dt)
        srv_t = self._queues(host_frac)
        self.job.after_step(t, dt, srv_t)
        if (self.steps + 1) % self.win_steps == 0:
            self._window()
        self.t = t + dt
        self.steps += 1

    def _quiet_steps(self, limit: int) -> int:
        """How many steps from this one (begun) are quiet, up to ``limit``; 0 unless at least two.

        Quiet: the job computes or waits (its hooks change nothing), nothing of its class is at a host, in a
        queue, on a fibre, in a receive stage or due again; no notification or pause is pending; the
        background queues are empty and every arrival fits its port; no episode starts or ends. Each such step
        is ``_background_only`` on empty queues, a rate recovering and ``_background_arrives``, all of which
        ``_quiet_block`` does for many steps at once. A block ends before the next optics update (its random
        draws keep their order) and with a 100 ms window at the latest.
        """
        if not (self.x_idle and self.bg_fits):
            return 0
        n0, every, window = self.steps, self.optics.every, self.win_steps
        most = min(limit, (n0 // every + 1) * every - n0, (n0 // window + 1) * window - n0)
        until, job_until, dt = self.schedule.until, self.job.quiet_until(), self.dt
        t, k = self.t, 0
        while k < most and t < until and t + dt <= job_until:
            t = t + dt
            k += 1
        if k < 2:
            return 0
        held = (self.src, self.q_t, self.q_x, self.tail, self.q_o, self.line[:2], self.rq_t, self.rq_x)
        pending = (self.retx, self.signal, self.rx_paused)
        return 0 if any(np.count_nonzero(a) for a in held + pending) else k

    def _quiet_block(self, k: int) -> None:
        """``k`` quiet steps (``_quiet_steps``) at once: each step's arithmetic, in the same order."""
        n0, acc = self.steps, self.acc
        a_o = self.bg_arrivals.take(np.arange(n0, n0 + k) % NOISE_ROWS, axis=0)  # all of it leaves at once
        # The fibre's rings turn as in ``_deliver``, a slot a step (only the background class is on them).
        arrived = np.empty_like(a_o)
        line, row_o = self.line.reshape(-1), self.line[2]
        for i in range(k):
            slot = (n0 + i) % self.ring
            arrived[i] = row_o[slot]
            row_o[slot] = 0.0
            at = self._deliver_slots[slot][2]
            line.put(at, line.take(at) + a_o[i])
        arr_o = arrived.take(self.lay.peer, axis=1)  # by receiver
        if self.optics.lossy:
            loss = self.optics.frame_loss_rx
            acc[LOST_O] = _in_order(acc[LOST_O], arr_o * loss)
            arr_o = arr_o * (1 - loss)
        acc[RX_O] = _in_order(acc[RX_O], arr_o)
        acc[ADMITTED] = _in_order(acc[ADMITTED], a_o)
        acc[TX_O] = _in_order(acc[TX_O], a_o)
        # ``_rate`` with nothing arriving: the rate recovers to at most 1 (once there it stays), timers run.
        np.minimum(_in_order(self.rate, np.broadcast_to(self.recover_step, a_o.shape)), 1.0, out=self.rate)
        self.cut_timer = _in_order(self.cut_timer, np.full(a_o.shape, -self.dt))
        for peak in (self.peak, self.rq_peak, self.pool_peak):  # every queue and buffer held +0.0 bytes
            np.maximum(peak, 0.0, out=peak)
        np.maximum(self.peak_o, self.q_o, out=self.peak_o)
        for _ in range(k - 1):
            self.t = self.t + self.dt
        self.steps += k - 1
        if (self.steps + 1) % self.win_steps == 0:
            self._window()
        self.t = self.t + self.dt
        self.steps += 1

    def _apply(self, fx: Effects) -> None:
        """New episode effects: offered loads, drain shares, waves going down or coming back."""
        if not np.array_equal(~self.up, fx.down):
            self._links(fx.down)
        step = self.cap * self.dt * self.up
        self.x_step = fx.job_load * step
        self.x_idle = not np.count_nonzero(self.x_step)  # no other traffic in the job's class
        self.bg_step = BACKGROUND_LOAD * step
        self.o_step = fx.other_load * step
        # The background arrivals of every noise row, until the next episode change (a row a step).
        self.bg_arrivals = self.noise * self.bg_step + self.o_step
        self.bg_fits = bool((self.bg_arrivals <= self.cap_step).all())  # every step's arrivals fit the port
        self.drain_step = fx.drain * self.cap * self.dt  # the far switch drains to hosts, wave up or not
        self.fx = fx

    def _queues(self, host_frac: float) -> F:
        """One fluid step of every queue; returns the job's bytes each queue transmitted."""
        if self._job_class_idle():
            return self._background_only()
        acc, q_t, q_x, q_o = self.acc, self.q_t, self.q_x, self.q_o
        paused = self.rx_paused[self.lay.peer]  # the far end pauses this sender's job class
        some_paused = np.count_nonzero(paused)
        cap_j = self.cap_step * ~paused if some_paused else self.cap_step  # (x 1.0 where none is)
        inj = np.minimum(self.src, self.cap_step * self.rate * host_frac)
        a_j = inj + self.x_step
        qj = q_t + q_x
        if self.all_lossy:  # what ``np.where(self.lossy, ...)`` gives, without the unused half
            adm_j = a_j
        else:
            room = np.maximum(self.xoff + cap_j - qj, 0.0)
            adm_j = (
                np.where(self.lossy, a_j, np.minimum(a_j, room)) if self.any_lossy else np.minimum(a_j, room)
            )
        ratio = (adm_j + EPS) / (a_j + EPS)
        a_t, a_x = inj * ratio, self.x_step * ratio
        acc[PAUSE_HOST] += 1.0 - ratio
        if some_paused:
            acc[PAUSE_RX] += paused
        self.src -= a_t
        serve_j = np.minimum(qj + adm_j, cap_j)
        from_q = np.minimum(qj, serve_j)
        share_t = a_t / (adm_j + EPS)  # the job's share of what was admitted this step
        # Rows by class (T, X, O), as the accumulators' TX_* and DROP_* rows are: one update each.
        served, dropped = np.empty((3, self.lay.size)), np.empty((3, self.lay.size))
        srv_t, srv_x, srv_o = served
        np.add(from_q * (q_t / (qj + EPS)), (serve_j - from_q) * share_t, out=srv_t)
        np.subtract(serve_j, srv_t, out=srv_x)
        q_t += a_t - srv_t
        q_x += a_x - srv_x
        a_o = self.bg_arrivals[self.steps % NOISE_ROWS]
        np.minimum(q_o + a_o, self.cap_step - serve_j, out=srv_o)
        q_o += a_o - srv_o
        drop_t, drop_x, drop_o = dropped
        over = np.maximum(q_t + q_x - self.lay.buffer, 0.0) * self.lossy
        np.minimum(over * share_t, q_t, out=drop_t)
        np.minimum(over - drop_t, q_x, out=drop_x)
        q_t -= drop_t
        q_x -= drop_x
        np.maximum(q_o - self.lay.buffer, 0.0, out=drop_o)
        q_o -= drop_o
        acc[DROP_T : DROP_O + 1] += dropped
        acc[ADMITTED] += adm_j + a_o
        acc[TX_T : TX_O + 1] += served
        qj = q_t + q_x
        # ECN marks only above ecn_min; below it every mark is an exact 0 and adds nothing.
        lost = np.asarray((drop_t > 0) * 1.0, dtype=np.float64)  # a drop notifies in full
        if np.count_nonzero(qj > self.ecn_min):
            mark = _unit((qj - self.ecn_min) * self.ecn_slope)
            acc[ECN_T : ECN_X + 1] += served[:2] * mark
            self.resend(drop_t)
            self._notify(np.maximum(mark * (srv_t > 1.0), lost))
        else:
            self.resend(drop_t)
            self._notify(lost)
        if np.count_nonzero(q_o > self.ecn_min):
            acc[ECN_O] += srv_o * _unit((q_o - self.ecn_min) * self.ecn_slope)
        self.tail = np.where(a_t > 1.0, qj, np.maximum(self.tail - serve_j, 0.0))
        np.maximum(self.peak, qj, out=self.peak)
        np.maximum(self.peak_o, q_o, out=self.peak_o)
        rq = self._deliver(served)
        # The devices' buffers (``_pool``) from what this step already has: the same sums, in the same order.
        held = np.maximum(qj, 0.0) + np.maximum(q_o, 0.0) + np.maximum(rq, 0.0)
        np.maximum(self.pool_peak, np.add.reduceat(held, self.lay.device_starts), out=self.pool_peak)
        if self.job.syncing:
            self._causes(srv_t, paused | (ratio < 0.999), srv_x)
        return srv_t

    def _job_class_idle(self) -> bool:
        """Nothing in the job's class at any sender: no bytes at its hosts, in its queues, none arriving."""
        return self.x_idle and not (
            np.count_nonzero(self.src)
            or np.count_nonzero(self.q_t)
            or np.count_nonzero(self.q_x)
            or np.count_nonzero(self.tail)
        )

    def _background_only(self) -> F:
        """``_queues`` while the job's class is idle (``_job_class_idle``): the same arithmetic, less the terms
        that are exact zeros then (nothing admitted, served, dropped or marked in that class; x + 0.0 == x)."""
        acc, q_o = self.acc, self.q_o
        if np.count_nonzero(self.rx_paused):
            paused = self.rx_paused[self.lay.peer]
            acc[PAUSE_RX] += paused
        else:  # nobody pauses: adding its zeros changes nothing
            paused = self.rx_paused
        served = np.zeros((3, self.lay.size))
        srv_o = served[2]
        a_o = self.bg_arrivals[self.steps % NOISE_ROWS]
        empty = self.bg_fits and not np.count_nonzero(q_o)
        if empty:
            # No background queue and every arrival fits: all of it leaves now, the queue stays empty and
            # unmarked (the general lines below give exactly this).
            srv_o[:] = a_o
            acc[ADMITTED] += a_o
            acc[TX_O] += srv_o
        else:
            np.minimum(q_o + a_o, self.cap_step, out=srv_o)
            q_o += a_o - srv_o
            drop_o = np.maximum(q_o - self.lay.buffer, 0.0)
            q_o -= drop_o
            acc[DROP_O] += drop_o
            acc[ADMITTED] += a_o
            acc[TX_O] += srv_o
            acc[ECN_O] += srv_o * _unit((q_o - self.ecn_min) * self.ecn_slope)
        self._rate()
        np.maximum(self.peak, 0.0, out=self.peak)
        np.maximum(self.peak_o, q_o, out=self.peak_o)
        rq = self._deliver(served, job_sent=False)
        if empty and rq is self._no_bytes:  # every buffer holds +0.0 bytes: so does every pool
            np.maximum(self.pool_peak, 0.0, out=self.pool_peak)
        else:
            held = np.maximum(q_o, 0.0) + np.maximum(rq, 0.0)
            np.maximum(self.pool_peak, np.add.reduceat(held, self.lay.device_starts), out=self.pool_peak)
        srv_t: F = served[0]  # zeros
        if self.job.syncing:
            self._causes(srv_t, paused, served[1])
        return srv_t

    def _notify(self, sig: F) -> None:
        """Congestion notifications reach the sender one round trip later; cut or recover its rate."""
        if np.count_nonzero(sig):  # a notification no larger than what the slot holds changes nothing
            flat = self.signal.reshape(-1)
            at = self._rtt_slots[self.steps % self.ring]
            flat.put(at, np.maximum(flat.take(at), sig))
        self._rate()

    def _rate(self) -> None:
        """The notifications arriving now cut the senders' rate (at most once a round trip), or it recovers."""
        now = self.signal[self.steps % self.ring]
        if not np.count_nonzero(now):  # nothing arrives: every sender recovers
            np.minimum(self.rate + self.recover_step, 1.0, out=self.rate)
            self.cut_timer -= self.dt
            return
        cut = (now > 0) & (self.cut_timer <= 0)
        self.rate = np.where(
            cut,
            np.maximum(self.rate * (1 - RATE_CUT * now), RATE_MIN),
            np.where(now > 0, self.rate, np.minimum(self.rate + self.recover_step, 1.0)),
        )
        self.cut_timer = np.where(cut, self.lay.rtt, self.cut_timer - self.dt)
        now[:] = 0.0

    def _deliver(self, served: F, job_sent: bool = True) -> F:
        """Put departures (rows T, X, O) on the fibre; what arrives now goes through FCS and the receive
        stage. Returns the bytes of the job's class in each receive stage after the step. ``job_sent``
        False: row T is zeros (the job's class idle).
        """
        srv_t = served[0]
        lay, acc = self.lay, self.acc
        slot_now = self.steps % self.ring
        arrived = self.line[:, slot_now, :].copy()  # by sender
        self.line[:, slot_now, :] = 0.0
        at = self._deliver_slots[slot_now]
        line = self.line.reshape(-1)
        line.put(at, line.take(at) + served)
        job_arrives = np.count_nonzero(arrived[:2])
        if job_sent or job_arrives:  # else it would add 0.0 - 0.0
            self.in_flight_t += srv_t - arrived[0]
        if not (job_arrives or np.count_nonzero(self.rq_t) or np.count_nonzero(self.rq_x)):
            return self._background_arrives(srv_t, arrived[2])
        arr = arrived.take(lay.peer, axis=1)  # by receiver: the job's, other traffic in its class, background
        if self.optics.lossy:
            loss = self.optics.frame_loss_rx
            acc[LOST_T : LOST_O + 1] += arr * loss
            arr = arr * (1 - loss)
            self.resend(srv_t * loss[lay.peer])  # the peer will lose them: sent again after a NACK
        acc[RX_T : RX_O + 1] += arr
        rq_t, rq_x = self.rq_t, self.rq_x
        rq_t += arr[0]
        rq_x += arr[1]
        rq = rq_t + rq_x
        drained = np.minimum(rq, self.drain_step)
        keep = 1.0 - drained / (rq + EPS)
        rq_t *= keep
        rq_x *= keep
        rq = rq_t + rq_x
        over = np.maximum(rq - lay.buffer, 0.0)
        if np.count_nonzero(over):
            share = rq_t / (rq + EPS)
            d_t, d_x = over * share, over * (1 - share)
            rq_t -= d_t
            rq_x -= d_x
            acc[DROP_RX_T] += d_t
            acc[DROP_RX_X] += d_x
            self.resend(d_t[lay.peer])
            rq = rq_t + rq_x
        np.maximum(self.rq_peak, rq, out=self.rq_peak)
        self.rx_paused = self.lossless_peer & ((rq > self.xoff) | ((rq >= self.xon) & self.rx_paused))
        return rq

    def _background_arrives(self, srv_t: F, arrived_o: F) -> F:
        """``_deliver``'s receive side when nothing of the job's class arrives or waits in any receive stage:
        only background bytes are counted; the stages stay empty (exact zeros), so none pauses its peer."""
        lay, acc = self.lay, self.acc
        arr_o = arrived_o.take(lay.peer)
        if self.optics.lossy:
            loss = self.optics.frame_loss_rx
            acc[LOST_O] += arr_o * loss
            arr_o = arr_o * (1 - loss)
            self.resend(srv_t * loss[lay.peer])
        acc[RX_O] += arr_o
        np.maximum(self.rq_peak, 0.0, out=self.rq_peak)
        self.rx_paused = np.zeros(lay.size, dtype=bool)
        return self._no_bytes

    def _causes(self, srv_t: F, paused: np.ndarray, srv_x: F) -> None:
        """While the job syncs: the service each of its waves did not get this step, by cause (seconds)."""
        lay = self.lay
        own = self.job_outstanding() > 1.0
        pending = np.maximum.reduceat(own, lay.offsets)[lay.link_of]
        down = ~self.up
        short = pending * (down | own) * np.maximum(self.dt - srv_t * self.inv_cap, 0.0)
        if not np.count_nonzero(short):
            return
        lost = self.lost
        lost[LOST_CAPACITY] += short * down
        rest = short * ~down
        lost[PAUSE] += rest * paused
        rest = rest * ~paused
        retx = self.retx_total > 1.0
        lost[LOSS_RECOVERY] += rest * retx
        rest = rest * ~retx
        queued = (self.q_x > 1.0) | (srv_x > 1.0) | (self.rate < 0.999) | (self.rq_t[lay.peer] > 1.0)
        lost[QUEUEING] += rest * queued

    # -- the job's view ------------------------------------------------------------------------------
    def job_outstanding(self) -> F:
        """The job's bytes not yet delivered to the far hosts, per sending queue."""
        return np.asarray(
            self.src + self.retx_total + self.tail + self.in_flight_t + self.rq_t[self.lay.peer],
            dtype=np.float64,
        )

    def egress_outstanding(self) -> F:
        """The job's bytes not yet sent onto the fibre (hosts, retransmissions, queue), per queue."""
        return np.asarray(self.src + self.retx_total + self.tail, dtype=np.float64)

    def rx_backlog(self) -> F:
        """The job's bytes waiting in the far end's receive stage, by sender."""
        return np.asarray(self.rq_t[self.lay.peer] + self.in_flight_t, dtype=np.float64)

    def resend(self, lost_t: F) -> None:
        """Schedule the job's lost bytes for retransmission one round trip from now."""
        if not np.count_nonzero(lost_t):
            return
        at = self._rtt_slots[self.steps % self.ring]
        retx = self.retx.reshape(-1)
        retx.put(at, retx.take(at) + lost_t)
        self.retx_total += lost_t

    def _resend_due(self) -> None:
        slot = self.steps % self.ring
        due = self.retx[slot]
        if np.count_nonzero(due):
            self.src += due
            self.retx_total = np.maximum(self.retx_total - due, 0.0)
            due[:] = 0.0

    def _links(self, down: np.ndarray) -> None:
        """Take waves down / up; a wave going down discards its queues, and the job's share moves."""
        going = down & self.up
        if going.any():
            acc = self.acc
            acc[FLUSH_T] += self.q_t * going
            acc[FLUSH_X] += self.q_x * going
            acc[FLUSH_O] += self.q_o * going
            # The job's bytes in the queue and on the dark fibre are stranded: the job sends them again.
            on_fibre = self.line[0][:, going].sum(axis=0)
            self.line[:, :, going] = 0.0
            stranded = self.q_t * going
            stranded[going] += on_fibre
            self.in_flight_t[going] = 0.0
            self.job.reroute(going, stranded)
            for q in (self.q_t, self.q_x, self.q_o):
                q[going] = 0.0
            self.tail[going] = 0.0
        self.up = ~down
        self.cap_step = self.cap * self.dt * self.up

    def _optics(self, fx: Effects) -> None:
        """Optics at 100 Hz; FEC blocks are counted here, over the update period."""
        o = self.optics
        o.update(fx.penalty_db, self.up)
        blocks = self.cap * 8 * self.dt * o.every / FEC_BLOCK_BITS * self.up
        self.acc[FEC_CORR] += blocks * o.block_error_rx
        self.acc[FEC_UNCORR] += blocks * o.block_uncorrectable_rx

    def _window(self) -> None:
        """Close a 100 ms window: watermarks, pool peaks, optics stats and the PFC watchdog."""
        i = (self.steps // self.win_steps) % WINDOWS
        self._witness()
        qj = self.q_t + self.q_x
        self.peaks[i], self.peak = self.peak, qj.copy()
        self.peaks_o[i], self.peak_o = self.peak_o, self.q_o.copy()
        self.rq_peaks[i], self.rq_peak = self.rq_peak, self.ingress_occupancy()
        self.pool_peaks[i] = self.pool_peak
        self.pool_peak = self._pool()
        self.optics.roll()
        paused = self.acc[PAUSE_RX] - self._pause_mark
        self._pause_mark = self.acc[PAUSE_RX].copy()
        whole = paused >= 0.999 * self.win_steps
        before = self.pause_run >= WATCHDOG_S
        self.pause_run = np.where(whole, self.pause_run + self.win_steps * self.dt, 0.0)
        self.acc[STORMS] += (self.pause_run >= WATCHDOG_S) & ~before

    def _witness(self) -> None:
        """Show the window closing now (its peaks, its counters' increase) to the episodes' witness."""
        counts = self.acc[WITNESSED]
        d = counts - self._witnessed
        self._witnessed = counts
        end = self.t + self.dt
        window = Window(self.peak, self.peak_o, self.rq_peak, d[0] + d[1], d[3], d[2], d[4] + d[5], self.up)
        self.witness.window(end - self.win_steps * self.dt, end, window)

    # -- views ---------------------------------------------------------------------------------------
    def occupancy(self) -> F:
        """Bytes in the job's class queue of each port now (never below zero)."""
        return np.asarray(np.maximum(self.q_t + self.q_x, 0.0))

    def occupancy_other(self) -> F:
        return np.asarray(np.maximum(self.q_o, 0.0))

    def watermark(self) -> F:
        """Peak bytes in the job's class queue of each port over the last second."""
        return np.asarray(np.maximum(self.peaks.max(axis=0), self.peak))

    def watermark_other(self) -> F:
        return np.asarray(np.maximum(self.peaks_o.max(axis=0), self.peak_o))

    def ingress_occupancy(self) -> F:
        """Bytes of the job's class in the receive stage of each port now: its ingress queue."""
        return np.asarray(np.maximum(self.rq_t + self.rq_x, 0.0))

    def ingress_watermark(self) -> F:
        """Peak bytes in the job's class ingress queue of each port over the last second."""
        return np.asarray(np.maximum(self.rq_peaks.max(axis=0), self.rq_peak))

    def _pool(self) -> F:
        # One buffer per device: its egress queues and its receive stages (ingress queues) share it.
        held = self.occupancy() + self.occupancy_other() + self.ingress_occupancy()
        return np.asarray(np.add.reduceat(held, self.lay.device_starts))

    def pool_occupancy(self) -> F:
        """Bytes in each device's buffer (the sum of its egress and ingress queues)."""
        return self._pool()

    def pool_watermark(self) -> F:
        return np.asarray(np.maximum(self.pool_peaks.max(axis=0), self.pool_peak))

    def conservation(self) -> Conservation:
        """Byte totals over every queue (see the module docstring)."""
        a = self.acc
        return Conservation(
            admitted=float(a[ADMITTED].sum()),
            transmitted=float((a[TX_T] + a[TX_X] + a[TX_O]).sum()),
            queued=float((self.q_t + self.q_x + self.q_o).sum()),
            dropped=float((a[DROP_T] + a[DROP_X] + a[DROP_O]).sum()),
            flushed=float((a[FLUSH_T] + a[FLUSH_X] + a[FLUSH_O]).sum()),
        )
