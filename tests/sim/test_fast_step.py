"""The fabric's optimised step against a straightforward one: the same state, bit for bit.

``Fabric``'s step skips numpy calls that cannot change anything and replaces slow ones (2-d fancy indexing,
``np.clip``, ``np.stack``) with cheaper ones doing the same arithmetic. ``ReferenceFabric`` below is the
step as first written (every operation every step); both run from the same random states (queues, hosts,
rates, receive stages, notifications in flight, pauses drawn at random, so the rarely taken branches are
taken) and must end in exactly the same state. A change to the model's arithmetic is made in both.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from spanwatch.sim import fabric as fab
from spanwatch.sim import scenario as scenarios
from spanwatch.sim.fabric import EPS, NOISE_ROWS, Fabric
from spanwatch.sim.layout import F

SCENARIOS = (
    "incast-lossy-shallow",  # lossy, incast drain, burst
    "incast-pfc-received",  # lossless, PFC from the receive stage
    "wave-down-reroute",  # waves going down and coming back
    "optical-per-wave",  # lossy optics (FCS losses)
    "diloco-four-sites",  # four links, mixed
    "pipeline-three-sites",
)
STEPS = 400  # from before the first episode starts to well into it, and the job's first phase
EARLY_S = 0.1


class ReferenceFabric(Fabric):
    """The step as first written: every numpy operation, every step."""

    def _quiet_steps(self, limit: int) -> int:
        return 0  # one step at a time, quiet or not

    def _queues(self, host_frac: float) -> F:
        acc, q_t, q_x, q_o = self.acc, self.q_t, self.q_x, self.q_o
        paused = self.rx_paused[self.lay.peer]
        cap_j = self.cap_step * ~paused
        inj = np.minimum(self.src, self.cap_step * self.rate * host_frac)
        a_j = inj + self.x_step
        qj = q_t + q_x
        room = np.maximum(self.xoff + cap_j - qj, 0.0)
        adm_j = np.where(self.lossy, a_j, np.minimum(a_j, room))
        ratio = (adm_j + EPS) / (a_j + EPS)
        a_t, a_x = inj * ratio, self.x_step * ratio
        acc[fab.PAUSE_HOST] += 1.0 - ratio
        acc[fab.PAUSE_RX] += paused
        self.src -= a_t
        serve_j = np.minimum(qj + adm_j, cap_j)
        from_q = np.minimum(qj, serve_j)
        srv_t = from_q * (q_t / (qj + EPS)) + (serve_j - from_q) * (a_t / (adm_j + EPS))
        srv_x = serve_j - srv_t
        q_t += a_t - srv_t
        q_x += a_x - srv_x
        a_o = self.noise[self.steps % NOISE_ROWS] * self.bg_step + self.o_step
        srv_o = np.minimum(q_o + a_o, self.cap_step - serve_j)
        q_o += a_o - srv_o
        over = np.maximum(q_t + q_x - self.lay.buffer, 0.0) * self.lossy
        drop_t = np.minimum(over * (a_t / (adm_j + EPS)), q_t)
        drop_x = np.minimum(over - drop_t, q_x)
        q_t -= drop_t
        q_x -= drop_x
        drop_o = np.maximum(q_o - self.lay.buffer, 0.0)
        q_o -= drop_o
        acc[fab.DROP_T] += drop_t
        acc[fab.DROP_X] += drop_x
        acc[fab.DROP_O] += drop_o
        acc[fab.ADMITTED] += adm_j + a_o
        acc[fab.TX_T] += srv_t
        acc[fab.TX_X] += srv_x
        acc[fab.TX_O] += srv_o
        qj = q_t + q_x
        mark = np.clip((qj - self.ecn_min) * self.ecn_slope, 0.0, 1.0)
        acc[fab.ECN_T] += srv_t * mark
        acc[fab.ECN_X] += srv_x * mark
        acc[fab.ECN_O] += srv_o * np.clip((q_o - self.ecn_min) * self.ecn_slope, 0.0, 1.0)
        self.resend(drop_t)
        self._notify(np.maximum(mark * (srv_t > 1.0), (drop_t > 0) * 1.0))
        self.tail = np.where(a_t > 1.0, qj, np.maximum(self.tail - serve_j, 0.0))
        np.maximum(self.peak, qj, out=self.peak)
        np.maximum(self.peak_o, q_o, out=self.peak_o)
        self._deliver(srv_t, srv_x, srv_o)  # type: ignore[call-arg]
        np.maximum(self.pool_peak, self._pool(), out=self.pool_peak)
        if self.job.syncing:
            self._causes(srv_t, paused | (ratio < 0.999), srv_x)
        return srv_t

    def _notify(self, sig: F) -> None:
        s, ring = self.steps, self.ring
        slot = (s + self.rtt_steps) % ring
        self.signal[slot, self.ar] = np.maximum(self.signal[slot, self.ar], sig)
        now = self.signal[s % ring]
        cut = (now > 0) & (self.cut_timer <= 0)
        self.rate = np.where(
            cut,
            np.maximum(self.rate * (1 - fab.RATE_CUT * now), fab.RATE_MIN),
            np.where(
                now > 0, self.rate, np.minimum(self.rate + fab.RATE_RECOVER * self.dt / self.lay.rtt, 1.0)
            ),
        )
        self.cut_timer = np.where(cut, self.lay.rtt, self.cut_timer - self.dt)
        now[:] = 0.0

    def _deliver(self, srv_t: F, srv_x: F, srv_o: F) -> None:  # type: ignore[override]
        lay, acc, ring = self.lay, self.acc, self.ring
        slot_now = self.steps % ring
        arrived = self.line[:, slot_now, :].copy()
        self.line[:, slot_now, :] = 0.0
        slot = (self.steps + self.delay_steps) % ring
        for k, x in enumerate((srv_t, srv_x, srv_o)):
            self.line[k, slot, self.ar] += x
        self.in_flight_t += srv_t - arrived[0]
        arr_t, arr_x, arr_o = arrived[0][lay.peer], arrived[1][lay.peer], arrived[2][lay.peer]
        if self.optics.lossy:
            loss = self.optics.frame_loss_rx
            acc[fab.LOST_T] += arr_t * loss
            acc[fab.LOST_X] += arr_x * loss
            acc[fab.LOST_O] += arr_o * loss
            arr_t, arr_x, arr_o = arr_t * (1 - loss), arr_x * (1 - loss), arr_o * (1 - loss)
            self.resend(srv_t * loss[lay.peer])
        acc[fab.RX_T] += arr_t
        acc[fab.RX_X] += arr_x
        acc[fab.RX_O] += arr_o
        rq_t, rq_x = self.rq_t, self.rq_x
        rq_t += arr_t
        rq_x += arr_x
        rq = rq_t + rq_x
        drained = np.minimum(rq, self.drain_step)
        keep = 1.0 - drained / (rq + EPS)
        rq_t *= keep
        rq_x *= keep
        rq = rq_t + rq_x
        over = np.maximum(rq - lay.buffer, 0.0)
        if over.any():
            share = rq_t / (rq + EPS)
            d_t, d_x = over * share, over * (1 - share)
            rq_t -= d_t
            rq_x -= d_x
            acc[fab.DROP_RX_T] += d_t
            acc[fab.DROP_RX_X] += d_x
            self.resend(d_t[lay.peer])
            rq = rq_t + rq_x
        np.maximum(self.rq_peak, rq, out=self.rq_peak)
        self.rx_paused = lay.lossless[lay.peer] & np.where(
            rq > self.xoff, True, (rq >= self.xon) & self.rx_paused
        )

    def resend(self, lost_t: F) -> None:
        if not lost_t.any():
            return
        slot = (self.steps + self.rtt_steps) % self.ring
        self.retx[slot, self.ar] += lost_t
        self.retx_total += lost_t

    def _resend_due(self) -> None:
        slot = self.steps % self.ring
        due = self.retx[slot]
        if due.any():
            self.src += due
            self.retx_total = np.maximum(self.retx_total - due, 0.0)
            due[:] = 0.0


def _shake(f: Fabric, seed: int) -> None:
    """Put ``f`` in a random state: full, empty and overflowing queues, notifications and pauses."""
    rng = np.random.default_rng(seed)
    n, buf = f.lay.size, f.lay.buffer

    def some(scale: F | float) -> F:
        return np.asarray(rng.uniform(0, 1.3, n) * scale * (rng.uniform(size=n) < 0.6))

    f.q_t[:], f.q_x[:], f.q_o[:] = some(buf), some(buf), some(buf)
    f.rq_t[:], f.rq_x[:] = some(buf), some(buf)
    f.src += some(f.cap * 0.01)
    f.rate[:] = np.where(rng.uniform(size=n) < 0.5, 1.0, rng.uniform(0.02, 1.0, n))
    f.cut_timer[:] = rng.uniform(-0.01, 0.01, n)
    f.signal[:] = rng.uniform(0, 1, f.signal.shape) * (rng.uniform(size=f.signal.shape) < 0.1)
    f.retx[:] = some(1.0)[None, :] * 1e5 * (rng.uniform(size=f.retx.shape) < 0.05)
    f.retx_total[:] = f.retx.sum(axis=0)
    f.rx_paused[:] = rng.uniform(size=n) < 0.3


def _state(f: Fabric) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for owner, prefix in ((f, ""), (f.optics, "optics."), (f.job, "job.")):
        for k, v in vars(owner).items():
            if isinstance(v, np.ndarray):
                out[prefix + k] = v.copy()
            elif isinstance(v, int | float | bool | str):
                out[prefix + k] = v
    out["completed"] = [(r.step, r.end_s, r.network_s, r.by_link.tolist()) for r in f.job.completed]
    return out


def _different(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    bad = []
    for k, x in a.items():
        y = b[k]
        same = (
            np.array_equal(x, y, equal_nan=True)
            if isinstance(x, np.ndarray)
            else x == y or (x != x and y != y)
        )
        if not same:
            bad.append(k)
    return bad


def _early(s: scenarios.Scenario) -> scenarios.Scenario:
    """``s`` with its episodes moved to start within the first steps (their order and overlaps kept)."""
    first = min((e.start for e in s.episodes), default=0.0)
    moved = [e.model_copy(update={"start": e.start - first + EARLY_S}) for e in s.episodes]
    return s.model_copy(update={"episodes": moved})


@pytest.mark.parametrize("name", SCENARIOS)
def test_step_equals_the_reference_from_random_states(name: str) -> None:
    path = scenarios.shipped_named(name)
    assert path is not None
    s = _early(scenarios.load(path))
    compared = 0
    for seed in (None, 0, 1):  # None: the scenario's own state (the job's class idle, then its first phase)
        fast, ref = Fabric(s), ReferenceFabric(s)
        for f in (fast, ref):
            f.advance(EARLY_S / 2)
            if seed is not None:
                _shake(f, seed)
        for k in range(STEPS):
            fast.step()
            ref.step()
            if k % 50 == 49:
                bad = _different(_state(ref), _state(fast))
                assert not bad, f"{name}, seed {seed}, step {k}: {bad}"
                compared += 1
        if seed is not None:  # the random states took the branches the quiet steps skip
            assert fast.acc[fab.ECN_T].sum() > 0
            assert (fast.acc[fab.DROP_T] + fast.acc[fab.DROP_RX_T]).sum() > 0
    assert compared == 3 * STEPS // 50


QUIET_S = 4.0  # the job's first steps: its computes are the quiet stretches, its syncs end them


@pytest.mark.parametrize("name", SCENARIOS)
def test_quiet_blocks_end_in_the_state_single_steps_reach(name: str) -> None:
    """``Fabric.run`` runs quiet stretches as blocks (``_quiet_block``): the same state as one step at a time,
    bit for bit, whatever the lengths asked for (a block never crosses a run's end)."""
    path = scenarios.shipped_named(name)
    assert path is not None
    s = _early(scenarios.load(path))
    single, blocks = Fabric(s), Fabric(s)
    rng = np.random.default_rng(7)
    in_blocks = 0
    quiet_block = blocks._quiet_block

    def counted(k: int) -> None:
        nonlocal in_blocks
        in_blocks += k
        quiet_block(k)

    blocks._quiet_block = counted  # type: ignore[method-assign]
    left = round(QUIET_S / single.dt)
    while left:
        n = min(left, int(rng.integers(1, 400)))
        for _ in range(n):
            single.step()
        blocks.run(n)
        left -= n
        bad = _different(_state(single), _state(blocks))
        assert not bad, f"{name}, step {single.steps}: {bad}"
    assert in_blocks > 0  # quiet stretches were taken as blocks
