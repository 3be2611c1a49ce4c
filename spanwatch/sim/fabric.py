"""The fluid model of the simulated link: one egress queue per (device, wave), stepped in numpy.

Arrays are flat, ``2 x waves`` long: index ``d * waves + w`` is the egress queue of device ``d`` onto wave
``w`` (toward device ``1 - d``) or, for receive-side quantities, what device ``d`` receives on wave ``w``
(flat 1-D arrays halve numpy's per-operation cost on arrays this small). Each step of ``dt`` (1 ms by
default) is a fluid update, exact for rates constant within the step:

- arrivals: the job's bytes from the hosts (at most the host rate), background traffic (noisy, spread over
  the up waves), another tenant's traffic and incast bursts (episodes);
- lossless (PFC): the hosts are paused for the part of the step that would take the queue past xoff, so
  the queue never passes xoff and nothing is tail-dropped; a pause is refreshed every half maximal pause
  quantum (65535 x 512 bit times), which is how pause frames are counted;
- lossy: what does not fit in the buffer is tail-dropped, split by the arrivals' mix;
- service: FIFO at the wave's capacity (old backlog first); ECN marks departures with a probability rising
  linearly from 0 at ecn_min to 1 at ecn_max (a DCQCN-style RED ramp) on the queue length; departures reach the peer one propagation delay later, where frames hit by post-FEC errors are
  lost (FCS errors); the job's lost bytes are sent again one round trip later.

Counters accumulate as float64 totals, split by traffic class so packet counts follow from bytes; the
snapshot exports their floor (exact integers up to 2^53, about 25 hours of a saturated 800G wave).
``conservation`` gives the totals of the law admitted = transmitted + queued + tail-dropped + flushed (a
wave going down discards its queue).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from spanwatch.sim import physics
from spanwatch.sim.episodes import Effects, Schedule
from spanwatch.sim.optics import Optics
from spanwatch.sim.params import FabricParams
from spanwatch.sim.training import TrainingJob

# Rows of the accumulator array: byte totals per traffic class (T = the job, O = other), and helpers.
TX_T, TX_O, RX_T, RX_O, LOST_T, LOST_O, DROP_T, DROP_O, FLUSH_T, FLUSH_O = range(10)
ECN_T, ECN_O, PAUSE_S, STORMS, FEC_CORR, FEC_UNCORR, ADMITTED = range(10, 17)
N_ACC = 17  # PAUSE_S counts paused steps (x dt = seconds)

PAUSE_REFRESH_S = 65535 * 512 / physics.WAVE_BPS / 2
WATCHDOG_S = 0.2  # a priority paused this long without a break is a PFC storm
WINDOW_S = 0.1  # watermark / stat window granularity
WINDOWS = 10  # watermarks cover the last WINDOWS x 100 ms = 1 s
NOISE_ROWS = 4096
EPS = 1e-30


class _Constants:
    """Scalars of the step as arrays of the queues' shape (see ``Fabric._queues``)."""

    def __init__(self, size: int, ecn_min: float, ecn_slope: float) -> None:
        self.zero = np.zeros(size)
        self.one = np.ones(size)
        self.eps = np.full(size, EPS)
        self.ecn_min = np.full(size, ecn_min)
        self.ecn_slope = np.full(size, ecn_slope)


@dataclass
class Conservation:
    """Byte totals for the conservation law (summed over every queue)."""

    admitted: float
    transmitted: float
    queued: float
    dropped: float
    flushed: float


class Fabric:
    """The simulated link and its two DCI switches, advanced by ``step()``.

    Args:
        params: the fabric (validated here).
        schedule: the injected episodes (none when omitted).

    Raises:
        SpanwatchError: parameters out of range.
    """

    def __init__(self, params: FabricParams, schedule: Schedule | None = None) -> None:
        self.p = params.validate()
        n = self.n = params.waves
        self.dt = params.step_s
        self.t = 0.0
        self.steps = 0
        self.schedule = schedule or Schedule([], n)
        self.rng = np.random.default_rng(params.seed)
        self.one_way_s = physics.propagation_delay_s(params.distance_km)
        self.rtt_s = 2 * self.one_way_s
        prof = params.profile
        self.buffer_bytes = prof.queue_bytes
        self.xoff = prof.xoff * prof.queue_bytes
        self.ecn_min = prof.ecn_min * prof.queue_bytes
        self.ecn_max = prof.ecn_max * prof.queue_bytes
        # RED-style ramp: no marks below ecn_min, every departure marked from ecn_max up.
        self._k = _Constants(2 * n, self.ecn_min, 1.0 / (self.ecn_max - self.ecn_min))
        self.lossless = params.lossless
        self.inv_fb = 1 / params.training.frame_bytes
        self.inv_bg = 1 / params.background_frame_bytes
        self.peer = np.concatenate([np.arange(n, 2 * n), np.arange(n)])
        self.up = np.ones(n, dtype=bool)
        self.up2 = np.ones(2 * n, dtype=bool)
        self.q_t = np.zeros(2 * n)
        self.q_o = np.zeros(2 * n)
        self.src = np.zeros(2 * n)  # the job's bytes waiting at the hosts, per egress queue
        self.tail = np.zeros(2 * n)  # bytes up to and including the job's last byte in each queue
        self.acc = np.zeros((N_ACC, 2 * n))
        self.delay_steps = max(1, round(self.one_way_s / self.dt))
        self.line = np.zeros((self.delay_steps, 2, 2 * n))  # [slot, job/other bytes, sender queue]
        self.retx_steps = max(1, math.ceil(self.rtt_s / self.dt))
        self.retx = np.zeros((self.retx_steps, 2 * n))
        self.retx_pending = False
        self.noise = 1 + 0.25 * self.rng.standard_normal((NOISE_ROWS, 2 * n)).clip(-3, 3)
        self.win_steps = max(1, round(WINDOW_S / self.dt))
        self.peak = np.zeros(2 * n)
        self.peaks = np.zeros((WINDOWS, 2 * n))
        self.pool_peak = np.zeros(2)
        self._halves = np.array([0, n])
        self.pool_peaks = np.zeros((WINDOWS, 2))
        self.pause_run = np.zeros(2 * n)
        self._pause_mark = np.zeros(2 * n)
        self.optics = Optics(params, self.rng)
        self.job = TrainingJob(params.training, self)
        self._fx: Effects | None = None
        self._offered = np.zeros(2 * n)
        self._bg = np.zeros(2 * n)
        self._links(np.zeros(n, dtype=bool))
        self.effects(self.schedule.effects(0.0))

    # -- the step ----------------------------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        """Run whole steps until ``seconds`` more of model time have passed (at least one step)."""
        for _ in range(max(1, round(seconds / self.dt))):
            self.step()

    def step(self) -> None:
        """Advance the model by one ``dt``."""
        dt, t = self.dt, self.t
        fx = self.schedule.effects(t)
        if fx is not self._fx:
            self.effects(fx)
        if self.steps % self.optics.every == 0:
            self._optics(t)
        host_frac = self.job.before_step(t, dt)
        served_t = self._queues(host_frac)
        self.job.after_step(t, dt, served_t)
        if (self.steps + 1) % self.win_steps == 0:
            self._window()
        self.t = t + dt
        self.steps += 1

    def effects(self, fx: Effects) -> None:
        """Apply new episode effects: offered load, and waves going down or coming back."""
        self._fx = fx
        if not np.array_equal(~self.up, fx.down):
            self._links(fx.down)
        n_up = int(self.up.sum())
        rate = physics.WAVE_BYTES_PER_S * self.dt
        spread = self.n / n_up if n_up else 0.0
        self._bg = self.p.background_load * rate * spread * self.up2
        self._offered = fx.load * rate * self.up2

    def _queues(self, host_frac: float) -> np.ndarray:
        """One fluid step of every queue; returns the job's bytes each queue transmitted.

        Every operand is a preallocated array: numpy's per-call overhead, not arithmetic, is the cost at
        this size, and Python scalars as operands cost a conversion each.
        """
        acc, k = self.acc, self._k
        q_t, q_o, eps = self.q_t, self.q_o, k.eps
        a_t = np.minimum(self.src, self.host_step if host_frac == 1.0 else self.host_step * host_frac)
        a_o = self.noise[self.steps % NOISE_ROWS] * self._bg + self._offered
        q = q_t + q_o
        if self.lossless:
            a = a_t + a_o
            adm = np.minimum(a, np.maximum(self.xoff_s - q, k.zero))
            ratio = (adm + eps) / (a + eps)
            a_t *= ratio
            a_o *= ratio
            acc[PAUSE_S] += k.one - ratio
        else:
            adm = a_t + a_o
        self.src -= a_t
        serve = np.minimum(q + adm, self.cap_step)
        from_q = np.minimum(q, serve)
        srv_t = from_q * (q_t / (q + eps)) + (serve - from_q) * (a_t / (adm + eps))
        srv_o = serve - srv_t
        q_t += a_t - srv_t
        q_o += a_o - srv_o
        if not self.lossless:
            self._tail_drop(a_t / (adm + eps))
        acc[ADMITTED] += adm
        acc[TX_T] += srv_t
        acc[TX_O] += srv_o
        qn = q_t + q_o
        mark = np.minimum(np.maximum((qn - k.ecn_min) * k.ecn_slope, k.zero), k.one)
        acc[ECN_T] += srv_t * mark
        acc[ECN_O] += srv_o * mark
        # FIFO position of the job's last byte: the back of the queue while the hosts still send, then
        # moving forward as the queue drains (the class split above is a fluid mix; this is exact FIFO).
        self.tail = np.where(a_t > k.one, qn, np.maximum(self.tail - serve, k.zero))
        np.maximum(self.peak, qn, out=self.peak)
        np.maximum(self.pool_peak, np.add.reduceat(qn, self._halves), out=self.pool_peak)
        self._deliver(srv_t, srv_o)
        return np.asarray(srv_t)

    def _tail_drop(self, share_new: np.ndarray) -> None:
        over = np.maximum(self.q_t + self.q_o - self.buffer_bytes, 0.0)
        drop_t = np.minimum(over * share_new, self.q_t)
        drop_o = over - drop_t
        self.q_t -= drop_t
        self.q_o -= drop_o
        self.acc[DROP_T] += drop_t
        self.acc[DROP_O] += drop_o
        self.resend(drop_t)

    def _deliver(self, srv_t: np.ndarray, srv_o: np.ndarray) -> None:
        """Put departures on the fibre; count what arrives now at each receiver (FCS losses removed)."""
        line = self.line[self.steps % self.delay_steps]
        arr_t = line[0][self.peer]  # what the peer sent one delay ago, indexed by receiver
        arr_o = line[1][self.peer]
        line[0] = srv_t
        line[1] = srv_o
        acc = self.acc
        if self.optics.lossy:
            loss = self.optics.frame_loss_rx
            acc[LOST_T] += arr_t * loss
            acc[LOST_O] += arr_o * loss
            arr_t = arr_t * (1 - loss)
            arr_o = arr_o * (1 - loss)
            # The job's frames the peer will lose are sent again after a NACK (one round trip).
            self.resend(srv_t * loss[self.peer])
        acc[RX_T] += arr_t
        acc[RX_O] += arr_o

    def resend(self, lost_t: np.ndarray) -> None:
        """Schedule the job's lost bytes for retransmission one round trip from now."""
        self.retx[(self.steps + self.retx_steps - 1) % self.retx_steps] += lost_t
        self.retx_pending = True

    def resend_due(self) -> np.ndarray | None:
        """The job's lost bytes whose retransmission starts now (taken off the pending ring)."""
        if not self.retx_pending:
            return None
        slot = self.steps % self.retx_steps
        due = self.retx[slot].copy()
        self.retx[slot] = 0.0
        self.retx_pending = bool(self.retx.any())
        return np.asarray(due)

    def _links(self, down: np.ndarray) -> None:
        """Take waves down / up; a wave going down discards its queue and its share of the job moves."""
        going = np.tile(down & self.up, 2)
        if going.any():
            self.acc[FLUSH_T] += self.q_t * going
            self.acc[FLUSH_O] += self.q_o * going
            self.job.reroute(going, self.q_t * going)
            self.q_t[going] = 0.0
            self.q_o[going] = 0.0
        self.up = ~down
        self.up2 = np.tile(self.up, 2)
        self.cap_step = physics.WAVE_BYTES_PER_S * self.dt * self.up2
        self.xoff_s = self.xoff + self.cap_step
        self.host_step = self.p.training.host_rate_factor * physics.WAVE_BYTES_PER_S * self.dt * self.up2

    def _optics(self, t: float) -> None:
        """Optics at 100 Hz; FEC blocks are counted here, over the update period."""
        o = self.optics
        o.update(self.schedule.osnr_penalty_db(t), self.up2)
        blocks = physics.WAVE_BPS * self.dt * o.every / physics.FEC_BLOCK_BITS * self.up2
        self.acc[FEC_CORR] += blocks * o.block_error_rx
        self.acc[FEC_UNCORR] += blocks * o.block_uncorrectable_rx

    def _window(self) -> None:
        """Close a 100 ms window: watermarks, pool peaks, optics stats and the PFC watchdog."""
        i = (self.steps // self.win_steps) % WINDOWS
        qn = self.q_t + self.q_o
        self.peaks[i] = self.peak
        self.peak = qn.copy()
        self.pool_peaks[i] = self.pool_peak
        self.pool_peak = qn.reshape(2, self.n).sum(axis=1)
        self.optics.roll()
        paused = self.acc[PAUSE_S] - self._pause_mark
        self._pause_mark = self.acc[PAUSE_S].copy()
        whole = paused >= 0.999 * self.win_steps
        before = self.pause_run >= WATCHDOG_S
        self.pause_run = np.where(whole, self.pause_run + self.win_steps * self.dt, 0.0)
        self.acc[STORMS] += (self.pause_run >= WATCHDOG_S) & ~before

    # -- views ---------------------------------------------------------------------------------------
    def occupancy(self) -> np.ndarray:
        """Bytes in each queue now (rounding can leave a queue a hair below zero: shown as zero)."""
        return np.asarray(np.maximum(self.q_t + self.q_o, 0.0))

    def watermark(self) -> np.ndarray:
        """Peak bytes in each queue over the last second."""
        return np.asarray(np.maximum(self.peaks.max(axis=0), self.peak))

    def pool_occupancy(self) -> np.ndarray:
        """Bytes in each device's buffer (the sum of its queues)."""
        return np.asarray(self.occupancy().reshape(2, self.n).sum(axis=1))

    def pool_watermark(self) -> np.ndarray:
        """Peak bytes in each device's buffer over the last second."""
        return np.asarray(np.maximum(self.pool_peaks.max(axis=0), self.pool_peak))

    def conservation(self) -> Conservation:
        """Byte totals over every queue (see the module docstring)."""
        a = self.acc
        return Conservation(
            admitted=float(a[ADMITTED].sum()),
            transmitted=float((a[TX_T] + a[TX_O]).sum()),
            queued=float(self.occupancy().sum()),
            dropped=float((a[DROP_T] + a[DROP_O]).sum()),
            flushed=float((a[FLUSH_T] + a[FLUSH_O]).sum()),
        )
