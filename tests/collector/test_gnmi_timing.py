"""Redial backoff and the device clock offset estimate."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from collector.sources.gnmi.timing import Backoff, ClockOffset


@given(
    initial=st.floats(0.01, 10),
    cap=st.floats(0.01, 600),
    factor=st.floats(1.1, 4),
    seed=st.integers(),
    n=st.integers(1, 100),
)
def test_backoff_is_capped_jittered_and_grows(
    initial: float, cap: float, factor: float, seed: int, n: int
) -> None:
    b = Backoff(initial, cap, factor, random.Random(seed))
    for i in range(n):
        ceiling = min(cap, initial * factor**i)
        d = b.next()
        assert ceiling / 2 <= d <= ceiling
    b.reset()
    assert b.next() <= min(cap, initial)


def test_backoff_jitter_spreads_a_fleet() -> None:
    delays = {round(Backoff(1.0, 60.0, rng=random.Random(seed)).next(), 6) for seed in range(50)}
    assert len(delays) > 40


def test_clock_offset_takes_the_least_delayed_observation_in_the_window() -> None:
    c = ClockOffset(window_s=10)
    s = 10**9
    offset = 2 * s  # the device is 2 s ahead
    delays = [0.3, 0.05, 1.2, 0.4]
    for i, d in enumerate(delays):
        recv = 100 * s + i * s
        est = c.observe(recv + offset - int(d * s), recv)
    assert abs(est - (2 - 0.05)) < 1e-9
    # Once the good sample ages out of the window, the estimate follows the newer ones.
    est = c.observe(130 * s + offset - int(0.2 * s), 130 * s)
    assert abs(est - 1.8) < 1e-9
    assert c.estimate == est


def test_clock_offset_sees_a_device_behind() -> None:
    c = ClockOffset()
    assert c.estimate is None
    assert c.observe(5 * 10**9, 8 * 10**9) == -3.0
