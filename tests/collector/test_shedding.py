"""Shedding at the source (issue 33): the decision logic, and the source's side of it."""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

import pytest

from collector import shedding
from collector.clock import FakeClock
from collector.config import GnmiConfig
from collector.shedding import Shedder, ShedPolicy, ShedSettings, StreamLoad
from collector.sources.gnmi.client import subscribe_request
from collector.sources.gnmi.source import GnmiSource
from collector.store import Store

S = ShedSettings(period=1.0, restore_hold=10.0, start_grace=0.0)  # short: the reasons are in ShedSettings


def _loads(
    lags: list[float], rates: list[float], factors: list[int], floors: list[float] | None = None
) -> dict[str, StreamLoad]:
    """Loads at a 1 s configured interval; ``lags`` (and ``floors``, default: the same) in intervals."""
    floors = lags if floors is None else floors
    return {
        f"t{i}": StreamLoad(
            lag=lag * f, floor=floor * f, interval=float(f), updates_per_second=r, factor=f, max_factor=8
        )
        for i, (lag, floor, r, f) in enumerate(zip(lags, floors, rates, factors, strict=True))
    }


def test_a_stream_that_never_catches_up_sheds_the_heaviest_targets_carrying_half_the_updates() -> None:
    policy = ShedPolicy(S)
    loads = _loads([1.5, 0.2, 0.2, 0.2], [400, 300, 200, 100], [1, 1, 1, 1])
    assert policy.decide(0.0, loads, busy=1.0) == {}  # one period over is not yet overload
    assert policy.decide(1.0, loads, busy=1.0) == {"t0": 2, "t1": 2}  # 700 of 1000 updates/s: >= half
    assert policy.shed_because == "a stream stayed 1.5 intervals behind"


def test_far_past_capacity_every_target_is_doubled_at_once() -> None:
    policy = ShedPolicy(S)
    loads = _loads([3.0, 0.2, 0.2, 0.2], [400, 300, 200, 100], [1, 1, 1, 8])  # t3 is at the bound
    policy.decide(0.0, loads, busy=1.0)
    assert policy.decide(1.0, loads, busy=1.0) == {"t0": 2, "t1": 2, "t2": 2}


def test_nothing_is_judged_during_the_start_up_grace() -> None:
    policy = ShedPolicy(ShedSettings(period=1.0, start_grace=10.0))
    over = _loads([1.0, 1.0], [100, 100], [1, 1])
    assert all(policy.decide(100.0 + t, over, busy=1.0) == {} for t in range(11))
    assert policy.decide(111.0, over, busy=1.0) == {"t0": 2}


def test_a_bursty_stream_among_streams_on_time_is_not_shed() -> None:
    """One device's peaks of several intervals, caught up within each period, beside streams on time: the
    lateness is that device's, not the process's, even in a busy loop."""
    policy = ShedPolicy(S)
    bursty = _loads([4.0, 0.2, 0.2], [100, 100, 100], [1, 1, 1], floors=[0.1, 0.0, 0.0])
    for t in range(30):
        assert policy.decide(float(t), bursty, busy=0.9) == {}


def test_lateness_most_streams_share_in_a_busy_loop_sheds_though_each_catches_up() -> None:
    """At the edge of capacity every stream catches up within the period (no floor of backlog) and the loop
    is not saturated, yet most streams' batches come half an interval late: values age past 1.5
    intervals. A loop busier than the restore rule would load is not one with room for it."""
    edge = _loads([1.2, 1.0, 0.2], [300, 200, 100], [1, 1, 1], floors=[0.0, 0.0, 0.0])
    policy = ShedPolicy(S)
    assert policy.decide(0.0, edge, busy=0.7) == {}
    assert policy.decide(1.0, edge, busy=0.7) == {"t0": 2}  # the heaviest, half of the updates
    assert policy.shed_because == "batches up to 1.2 intervals late in most streams"
    roomy = ShedPolicy(S)  # the same lateness in a loop with room (busy under 0.6): made upstream
    assert all(roomy.decide(float(t), edge, busy=0.5) == {} for t in range(40))
    under = ShedPolicy(S)  # a process under its capacity takes part of an interval on a round
    synchronised = _loads([0.7, 0.6, 0.6], [300, 200, 100], [1, 1, 1], floors=[0.0, 0.0, 0.0])
    assert all(under.decide(float(t), synchronised, busy=0.65) == {} for t in range(40))


def test_a_loop_idle_while_its_own_threads_wait_for_a_cpu_has_no_room() -> None:
    """grpc's threads hand the loop its messages: while they wait for a CPU the loop idles for its own
    process, and the lateness most streams share is this host's, so it counts as the loop's time."""
    edge = _loads([1.2, 1.0, 0.2], [300, 200, 100], [1, 1, 1], floors=[0.0, 0.0, 0.0])
    starved = ShedPolicy(S)
    assert starved.decide(0.0, edge, busy=0.5, starved=0.15) == {}
    assert starved.decide(1.0, edge, busy=0.5, starved=0.15) == {"t0": 2}
    waiting = ShedPolicy(S)  # threads that waited a little: still room, and the reason says both
    for t in range(40):
        assert waiting.decide(float(t), edge, busy=0.5, starved=0.05) == {}
    assert "(busy 0.50 + 0.05 of threads waiting for a CPU < 0.6)" in waiting.kept_because
    draining = ShedPolicy(S)  # a backlog that drains is room, however the loop's time went
    for t in range(5):
        backlog = _loads([1.2, 1.2], [100, 100], [1, 1], floors=[1.0 - 0.2 * t] * 2)
        assert draining.decide(float(t), backlog, busy=0.5, starved=0.5) == {}, t


def test_one_bad_period_between_good_ones_sheds_nothing() -> None:
    policy = ShedPolicy(S)
    calm, burst = _loads([0.05, 0.05], [10, 10], [1, 1]), _loads([5.0, 0.1], [10, 10], [1, 1])
    for t in range(20):
        assert policy.decide(float(t), burst if t % 2 else calm, busy=0.3) == {}


def test_after_a_change_nothing_is_decided_until_the_backlog_could_drain() -> None:
    policy = ShedPolicy(S)
    over = _loads([1.0, 1.0], [100, 100], [1, 1])
    policy.decide(0.0, over, 1.0)
    assert policy.decide(1.0, over, 1.0) == {"t0": 2}
    # settle: 2 of the longest interval (now 2 s) = 4 s; still behind meanwhile, no second step
    still = _loads([0.6, 1.0], [50, 100], [2, 1])
    for t in (2.0, 3.0, 4.0):
        assert policy.decide(t, still, 1.0) == {}
    policy.decide(5.0, still, 1.0)
    assert policy.decide(6.0, still, 1.0) == {"t1": 2}


def test_while_shed_late_values_go_on_shedding() -> None:
    policy = ShedPolicy(S)
    over = _loads([1.0, 1.0], [100, 100], [1, 1])
    policy.decide(0.0, over, busy=1.0)
    assert policy.decide(1.0, over, busy=1.0) == {"t0": 2}
    # catches up each period now, a loop with room, but batches more than half an interval late
    caught_up = _loads([0.6, 0.6], [50, 100], [2, 1], floors=[0.0, 0.0])
    fresh = _loads([0.3, 0.3], [50, 100], [2, 1], floors=[0.0, 0.0])
    assert all(policy.decide(float(t), fresh, busy=0.8) == {} for t in range(2, 12))  # values fresh: stay
    changes = {}
    for t in range(12, 22):
        changes = changes or policy.decide(float(t), caught_up, busy=0.5)
    assert changes == {"t1": 2}
    policy2 = ShedPolicy(S)  # nothing shed yet, a loop with room: values late upstream, not shed
    unshed = _loads([0.6, 0.6], [100, 100], [1, 1], floors=[0.0, 0.0])
    assert all(policy2.decide(float(t), unshed, busy=0.5) == {} for t in range(40))


def test_restore_needs_a_long_quiet_spell_and_room_for_the_doubled_updates() -> None:
    policy = ShedPolicy(S)
    loads = _loads([0.1, 0.1, 0.1], [100, 100, 200], [2, 2, 1])
    for t in range(10):  # quiet, but for less than restore_hold
        assert policy.decide(float(t), loads, busy=0.3) == {}
    # mean busy share 0.3; each shed target adds 0.3 * 100 / 400 = 0.075: both fit under 0.6
    assert policy.decide(10.0, loads, busy=0.3) == {"t0": 1, "t1": 1}


def test_restore_stops_where_the_prediction_would_pass_the_limit() -> None:
    loads = _loads([0.1, 0.1, 0.1], [100, 100, 200], [2, 2, 1])
    policy = ShedPolicy(S)
    for t in range(11):
        changes = policy.decide(float(t), loads, busy=0.5)
    assert changes == {}  # 0.5 + 0.125 > 0.6: stay shed
    policy = ShedPolicy(S)
    for t in range(11):
        changes = policy.decide(float(t), loads, busy=0.45)
    assert changes == {"t0": 1}  # 0.45 + 0.1125 fits, a second would not


def test_a_start_up_backlog_that_drains_in_a_saturated_loop_is_not_shed() -> None:
    """Start-up (dials, first dumps, every series new) leaves a backlog of several intervals that a process
    with room drains: its loop is saturated meanwhile, yet nothing may be shed. The same backlog held
    (not drained) is overload."""
    policy = ShedPolicy(S)
    backlog = [12.0 - 1.5 * t for t in range(8)] + [0.2] * 30  # seconds (1 s intervals): drained at 0.75/s
    for t, floor in enumerate(backlog):
        loads = _loads([floor + 0.5] * 4, [100] * 4, [1] * 4, floors=[floor] * 4)
        assert policy.decide(float(t), loads, busy=0.98 if floor > 1 else 0.5) == {}, t
    held = ShedPolicy(S)
    changes = {}
    for t in range(8):
        loads = _loads([12.5] * 4, [100] * 4, [1] * 4, floors=[12.0 - 0.05 * t] * 4)  # draining too slowly
        changes = changes or held.decide(float(t), loads, busy=0.98)
    assert changes == {f"t{i}": 2 for i in range(4)}  # far behind: every target at once


def test_late_values_in_a_loop_with_time_to_spare_are_not_the_process_s_to_shed() -> None:
    """A stream whose every batch is late while the loop waited for I/O half of the time: the backlog was
    made upstream (a starved sender, the network), and a longer interval is not this process's cure."""
    policy = ShedPolicy(S)
    late = _loads([3.0, 1.0], [100, 100], [1, 1])
    assert all(policy.decide(float(t), late, busy=0.5) == {} for t in range(60))


def test_intervals_come_back_once_the_load_is_gone() -> None:
    """Shed in a saturated loop, then the load falls (the machine got quieter): every target returns to
    its configured interval after one quiet spell (a remembered capacity does not hold it shed)."""
    s = ShedSettings(period=1.0, restore_hold=10.0, start_grace=0.0, settle_intervals=2.0)
    policy = ShedPolicy(s)
    factors = {f"t{i}": 1 for i in range(4)}
    rates = {"t0": 100.0, "t1": 200.0, "t2": 300.0, "t3": 400.0}
    for t in range(4):  # far past capacity: 3 intervals behind, a saturated loop
        loads = {n: StreamLoad(3.0 * f, 3.0 * f, float(f), rates[n] / f, f, 8) for n, f in factors.items()}
        factors.update(policy.decide(float(t), loads, busy=1.0))
    assert set(factors.values()) == {2}
    restored_at = []
    for t in range(4, 200):  # quiet now: values fresh, a loop a quarter busy at the full rates
        offered = sum(rates[n] / f for n, f in factors.items())
        loads = {n: StreamLoad(0.1 * f, 0.0, float(f), rates[n] / f, f, 8) for n, f in factors.items()}
        changes = policy.decide(float(t), loads, busy=0.25 * offered / sum(rates.values()))
        if changes:
            assert all(new < factors[n] for n, new in changes.items())
            restored_at.append(t)
        factors.update(changes)
    assert set(factors.values()) == {1}
    assert restored_at and restored_at[0] - 4 <= s.restore_hold + 2


def test_a_lagging_stream_breaks_the_quiet_spell() -> None:
    policy = ShedPolicy(S)
    quiet = _loads([0.1, 0.1], [100, 100], [2, 1])
    lagging = _loads([0.1, 0.7], [100, 100], [2, 1], floors=[0.0, 0.1])  # a peak past restore_lag
    for t in range(9):
        policy.decide(float(t), quiet, 0.1)
    policy.decide(9.0, lagging, 0.1)  # no room, not overload
    for t in range(10, 20):  # the spell starts again at 10
        assert policy.decide(float(t), quiet, 0.1) == {}
    assert policy.decide(20.0, quiet, 0.1) == {"t0": 1}


def test_factors_stay_powers_of_two_within_bounds_whatever_the_measurements() -> None:
    """Property: over random measurements, every change is one step (double or halve) of a power of two,
    within [1, min(max_factor of the target, settings)], and shedding and restoring never happen at once."""
    rng = random.Random(33)
    for trial in range(200):
        policy = ShedPolicy(
            ShedSettings(period=1.0, restore_hold=rng.choice([0.0, 3.0]), max_factor=8, start_grace=0.0)
        )
        factors = {f"t{i}": 1 for i in range(rng.randint(1, 6))}
        caps = {name: rng.choice([1, 2, 4, 8, 16]) for name in factors}
        for t in range(60):
            loads = {}
            for name, f in factors.items():
                lag = rng.choice([0.0, 0.2, 0.6, 1.5, 5.0]) * f
                loads[name] = StreamLoad(
                    lag=lag,
                    floor=lag * rng.choice([0.0, 0.5, 1.0]),
                    interval=float(f),
                    updates_per_second=rng.uniform(0, 1000) / f,
                    factor=f,
                    max_factor=caps[name],
                )
            changes = policy.decide(float(t), loads, busy=rng.uniform(0, 1.2))
            directions = {new > factors[name] for name, new in changes.items()}
            assert len(directions) <= 1, (trial, t, changes)
            for name, new in changes.items():
                assert new in (factors[name] * 2, factors[name] // 2)
                assert 1 <= new <= min(caps[name], 8)
                assert new & (new - 1) == 0
            factors.update(changes)


def test_a_process_offered_more_than_it_can_take_sheds_until_it_keeps_up_and_stays() -> None:
    """A simulated process of 10 equal targets offered 1.25x its capacity (one core): past capacity no
    batch catches up; under it a round takes ``load`` of an interval, its last batch that late. The
    policy must shed until values are fresh, then stay (no flapping back over), not shed far more."""
    policy = ShedPolicy(S)
    factors = {f"t{i}": 1 for i in range(10)}
    history = []
    for t in range(300):
        offered = {n: 125.0 / f for n, f in factors.items()}
        load = sum(offered.values()) / 1000.0
        loads = {
            n: StreamLoad(
                lag=(3.0 if load > 1.0 else load) * f,
                floor=(3.0 if load > 1.0 else 0.0) * f,
                interval=float(f),
                updates_per_second=offered[n] / max(load, 1.0),
                factor=f,
                max_factor=8,
            )
            for n, f in factors.items()
        }
        factors.update(policy.decide(float(t), loads, busy=min(load, 1.0)))
        history.append(load)
    assert history[0] == 1.25
    assert max(history[120:]) <= 0.5  # a round then takes at most half an interval: values stay fresh
    assert min(history[120:]) >= 0.25  # not one step more than that
    assert len(set(history[120:])) == 1  # and it stays


def test_late_values_that_nothing_sheds_are_counted_with_the_reason() -> None:
    """The staleness bound is not held while batches are half an interval late and nothing is shed for it;
    the policy counts such periods and names which rule kept them (the shedder logs it)."""
    room = ShedPolicy(S)
    late = _loads([1.8, 1.7], [100, 100], [1, 1], floors=[0.0, 0.0])
    for t in range(3):
        assert room.decide(float(t), late, busy=0.5) == {}
    assert room.late_kept == 3 and "had room (busy 0.50 < 0.6)" in room.kept_because
    assert "up to 1.8 intervals late" in room.kept_because
    room.decide(3.0, _loads([0.8, 0.2], [100, 100], [1, 1]), busy=0.5)
    assert room.late_kept == 0  # under a whole interval: values may pass the bound, not for certain

    one = ShedPolicy(S)
    for t in range(3):
        assert one.decide(float(t), _loads([1.8, 0.2], [100, 100], [1, 1], floors=[0.0, 0.0]), busy=0.9) == {}
    assert "fewer than half of the process's streams" in one.kept_because

    draining = ShedPolicy(S)
    for t in range(3):
        backlog = _loads([4.0 - t, 4.0 - t], [100, 100], [1, 1])  # every batch late, the backlog shrinking
        assert draining.decide(float(t), backlog, busy=1.0) == {}
    assert "the backlog is draining" in draining.kept_because

    at_bound = ShedPolicy(S)
    capped = _loads([3.0, 3.0], [100, 100], [8, 8])
    for t in range(3):
        assert at_bound.decide(float(t), capped, busy=1.0) == {}
    assert at_bound.late_kept == 3 and "longest interval (8x)" in at_bound.kept_because

    shedding = ShedPolicy(S)  # late because past capacity: it sheds, so nothing is kept late
    over = _loads([1.0, 1.0], [100, 100], [1, 1])
    shedding.decide(0.0, over, busy=1.0)
    assert shedding.decide(1.0, over, busy=1.0) == {"t0": 2}
    assert shedding.late_kept == 0


class _Stream:
    def __init__(self, device: str, load: StreamLoad) -> None:
        self.device, self.load = device, load

    def shed_load(self) -> StreamLoad:
        return self.load

    def shed_to(self, factor: int, reason: str) -> None:
        raise AssertionError("nothing is shed here")


def test_the_shedder_says_once_a_window_that_values_are_late_and_why(caplog: Any) -> None:
    shedder = Shedder(S)
    shedder.streams["t0"] = _Stream("t0", StreamLoad(1.9, 0.0, 1.0, 100.0, 1, 8))
    with caplog.at_level(logging.WARNING, logger="collector.shedding"):
        for t in range(6):
            shedder.step(float(t), busy=0.5, util=0.4)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "gnmi: batches up to 1.9 intervals late, nothing shed: the event loop had room (busy 0.50 < 0.6): "
        "lateness made upstream, by the devices or the network, is not shed, CPU 0.40 of a core"
    ]

    caplog.clear()
    waited = Shedder(S)  # its grpc threads waited for a CPU too: the line says how long
    waited.streams["t0"] = _Stream("t0", StreamLoad(1.9, 0.0, 1.0, 100.0, 1, 8))
    with caplog.at_level(logging.WARNING, logger="collector.shedding"):
        for t in range(6):
            waited.step(float(t), busy=0.4, util=0.4, starved=0.1)
    assert [r.getMessage() for r in caplog.records] == [
        "gnmi: batches up to 1.9 intervals late, nothing shed: the event loop had room (busy 0.40 + 0.10 "
        "of threads waiting for a CPU < 0.6): lateness made upstream, by the devices or the network, is not "
        "shed, CPU 0.40 of a core, threads waited 0.10 for a CPU"
    ]


class _Waits:
    """Stands in for ``CpuWaits``: the other threads waited 0.25 s a second."""

    def share(self) -> float:
        return 0.25


async def test_the_shedder_s_loop_passes_its_threads_waits_for_a_cpu_to_each_decision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[float] = []

    class Recording(Shedder):
        def step(
            self, now: float, busy: float, util: float | None = None, starved: float = 0.0
        ) -> dict[str, int]:
            seen.append(starved)
            return {}

    monkeypatch.setattr(shedding, "CpuWaits", _Waits)
    shedder = Recording(ShedSettings(period=0.05))
    stream = _Stream("t0", StreamLoad(0.0, 0.0, 1.0, 100.0, 1, 8))
    shedder.register(stream)
    await asyncio.sleep(0.3)
    shedder.unregister(stream)
    assert seen and set(seen) == {0.25}


class _Shed(_Stream):
    def shed_to(self, factor: int, reason: str) -> None:
        self.load = StreamLoad(self.load.lag, 0.0, 1.0 * factor, 100.0 / factor, factor, 8)


def test_a_workers_relay_wait_counts_as_lateness_once_a_decision() -> None:
    """A value waits for the relay's next frame before it can be scraped: 0.45 of an interval late in the
    store and 0.1 more in the relay is past half an interval, the staleness bound's margin."""
    shedder = Shedder(S)
    stream = _Shed("t0", StreamLoad(0.9, 0.0, 2.0, 50.0, 2, 8))  # shed once: judged on late values
    shedder.streams["t0"] = stream
    shedder.relayed(0.2)
    shedder.relayed(0.05)
    assert shedder.step(0.0, busy=0.5) == {}  # a first period late
    assert shedder.step(1.0, busy=0.5) == {}  # no frame since: the store's lateness alone
    for t in (2.0, 3.0):
        shedder.relayed(0.2)
        changes = shedder.step(t, busy=0.5)
    assert changes == {"t0": 4} and stream.load.factor == 4


def _cfg() -> GnmiConfig:
    return GnmiConfig(
        address="127.0.0.1:1", insecure=True, subscriptions=("interfaces",), sample_interval="250ms"
    )  # type: ignore[arg-type]


def test_the_source_caps_its_factor_by_the_longest_interval_and_shows_the_interval_in_effect() -> None:
    clock = FakeClock()
    store = Store(clock)
    source = GnmiSource("d", _cfg(), clock=clock, max_sample_interval=1.9)
    source._store = store
    assert source.max_factor == 4  # 250 ms x 4 = 1 s; x 8 would pass 1.9 s
    source.shed_to(8, "test")
    assert source.factor == 4 and source.sample_interval == 1.0
    assert store.value("spanwatch_gnmi_sample_interval_seconds", (("device", "d"),)) == 1.0
    assert source.stall_timeout == 10.0  # the floor; 3 intervals of a shed 8 s stream would be 24 s
    source.shed_to(1, "test")
    assert source.sample_interval == 0.25 and source.generation == 2
    request = subscribe_request(source.sets[0].subscriptions, sample_interval_s=source.sample_interval)
    assert request.subscribe.subscription[0].sample_interval == 250_000_000
