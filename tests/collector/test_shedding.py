"""Shedding at the source (issue 33): the decision logic, and the source's side of it."""

from __future__ import annotations

import random

from collector.clock import FakeClock
from collector.config import GnmiConfig
from collector.shedding import ShedPolicy, ShedSettings, StreamLoad
from collector.sources.gnmi.client import subscribe_request
from collector.sources.gnmi.source import GnmiSource
from collector.store import Store

S = ShedSettings(period=1.0, restore_hold=10.0)


def _loads(
    lags: list[float], rates: list[float], factors: list[int], base: float = 1.0
) -> dict[str, StreamLoad]:
    return {
        f"t{i}": StreamLoad(lag=lag, interval=base * f, updates_per_second=r, factor=f, max_factor=8)
        for i, (lag, r, f) in enumerate(zip(lags, rates, factors, strict=True))
    }


def test_a_sustained_backlog_sheds_the_heaviest_targets_carrying_half_the_updates() -> None:
    policy = ShedPolicy(S)
    loads = _loads([3.0, 0.2, 0.2, 0.2], [400, 300, 200, 100], [1, 1, 1, 1])
    assert policy.decide(0.0, loads, util=1.0) == {}  # one period over is not yet overload
    assert policy.decide(1.0, loads, util=1.0) == {"t0": 2, "t1": 2}  # 700 of 1000 updates/s: >= half


def test_one_bad_period_between_good_ones_sheds_nothing() -> None:
    policy = ShedPolicy(S)
    calm, burst = _loads([0.05, 0.05], [10, 10], [1, 1]), _loads([5.0, 0.1], [10, 10], [1, 1])
    for t in range(20):
        assert policy.decide(float(t), burst if t % 2 else calm, util=0.3) == {}


def test_after_a_change_nothing_is_decided_until_the_backlog_could_drain() -> None:
    policy = ShedPolicy(S)
    over = _loads([4.0, 4.0], [100, 100], [1, 1])
    policy.decide(0.0, over, 1.0)
    assert policy.decide(1.0, over, 1.0) == {"t0": 2}
    # settle: 3 of the longest interval (now 2 s) = 6 s; still behind meanwhile, no second step
    for t in (2.0, 4.0, 6.0):
        assert policy.decide(t, _loads([4.0, 4.0], [50, 100], [2, 1]), 1.0) == {}
    policy.decide(7.0, _loads([4.0, 4.0], [50, 100], [2, 1]), 1.0)
    assert policy.decide(8.0, _loads([4.0, 4.0], [50, 100], [2, 1]), 1.0) == {"t1": 2}


def test_restore_needs_a_long_quiet_spell_and_room_for_the_doubled_updates() -> None:
    policy = ShedPolicy(S)
    loads = _loads([0.05, 0.05, 0.05], [100, 100, 200], [2, 2, 1])
    for t in range(10):  # quiet, but for less than restore_hold
        assert policy.decide(float(t), loads, util=0.2) == {}
    # at util 0.4, each shed target would add 0.4 * 100 / 400 = 0.1: both fit under 0.6
    assert policy.decide(10.0, loads, util=0.4) == {"t0": 1, "t1": 1}


def test_restore_stops_where_the_prediction_would_pass_the_limit() -> None:
    policy = ShedPolicy(S)
    loads = _loads([0.05, 0.05, 0.05], [100, 100, 200], [2, 2, 1])
    for t in range(10):
        policy.decide(float(t), loads, util=0.5)
    assert policy.decide(10.0, loads, util=0.5) == {}  # 0.5 + 0.125 > 0.6: stay shed
    policy = ShedPolicy(S)
    for t in range(11):
        changes = policy.decide(float(t), loads, util=0.45)
    assert changes == {"t0": 1}  # 0.45 + 0.1125 fits, a second would not


def test_a_lagging_stream_breaks_the_quiet_spell() -> None:
    policy = ShedPolicy(S)
    quiet, lagging = _loads([0.1, 0.1], [100, 100], [2, 1]), _loads([0.1, 0.4], [100, 100], [2, 1])
    for t in range(9):
        policy.decide(float(t), quiet, 0.1)
    policy.decide(9.0, lagging, 0.1)  # between restore_lag and shed_lag: no room, not overload
    for t in range(10, 20):  # the spell starts again at 10
        assert policy.decide(float(t), quiet, 0.1) == {}
    assert policy.decide(20.0, quiet, 0.1) == {"t0": 1}


def test_factors_stay_powers_of_two_within_bounds_whatever_the_measurements() -> None:
    """Property: over random measurements, every change is one step (double or halve) of a power of two,
    within [1, min(max_factor of the target, settings)], and shedding and restoring never happen at once."""
    rng = random.Random(33)
    for trial in range(200):
        policy = ShedPolicy(ShedSettings(period=1.0, restore_hold=rng.choice([0.0, 3.0]), max_factor=8))
        factors = {f"t{i}": 1 for i in range(rng.randint(1, 6))}
        caps = {name: rng.choice([1, 2, 4, 8, 16]) for name in factors}
        for t in range(60):
            loads = {
                name: StreamLoad(
                    lag=rng.choice([0.0, 0.2, 0.6, 1.5, 5.0]) * f,
                    interval=float(f),
                    updates_per_second=rng.uniform(0, 1000) / f,
                    factor=f,
                    max_factor=caps[name],
                )
                for name, f in factors.items()
            }
            changes = policy.decide(float(t), loads, util=rng.uniform(0, 1.2))
            directions = {new > factors[name] for name, new in changes.items()}
            assert len(directions) <= 1, (trial, t, changes)
            for name, new in changes.items():
                assert new in (factors[name] * 2, factors[name] // 2)
                assert 1 <= new <= min(caps[name], 8)
                assert new & (new - 1) == 0
            factors.update(changes)


def test_a_process_that_stays_over_capacity_sheds_until_it_keeps_up() -> None:
    """A simulated process of 10 equal targets offered 1.25x its capacity: the lag each period follows
    the load; the policy sheds until it keeps up, then stays there (no flapping back over capacity)."""
    capacity = 1000.0
    policy = ShedPolicy(S)
    factors = {f"t{i}": 1 for i in range(10)}
    history = []
    for t in range(300):
        offered = {n: 125.0 / f for n, f in factors.items()}
        load = sum(offered.values()) / capacity
        loads = {
            n: StreamLoad(
                lag=(3.0 if load > 1.0 else 0.6 * load) * f,  # a round of every target takes load x interval
                interval=float(f),
                updates_per_second=offered[n] / max(load, 1.0),
                factor=f,
                max_factor=8,
            )
            for n, f in factors.items()
        }
        factors.update(policy.decide(float(t), loads, util=min(load, 1.0)))
        history.append(load)
    assert history[0] == 1.25
    assert max(history[100:]) <= 0.8  # kept up (lag under half an interval) and never went back over
    assert min(history[100:]) >= 0.5  # and did not shed far more than needed


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
