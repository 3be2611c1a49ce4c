"""The clock skew (``analyzer.attribution.skew``)."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest
from synthetic_fabric import T0

from analyzer.attribution import skew as clock_skew
from analyzer.attribution.rules import MAX_SKEW_SECONDS


def test_skew_is_found_by_cross_correlation() -> None:
    # Physics on the switch clock; the same pattern 2 s later on the host clock.
    grid = [T0 + timedelta(seconds=0.1 * i) for i in range(600)]
    level = [1.0 if 20 <= 0.1 * i < 30 else 0.0 for i in range(600)]
    signal = pl.DataFrame({"time": grid, "physics": level})
    lo = [T0 + timedelta(seconds=0.5 * i) for i in range(120)]
    excess = [0.1 if 22 <= 0.5 * i < 32 else 0.0 for i in range(120)]
    steps = pl.DataFrame({"lo": lo, "hi": [t + timedelta(seconds=0.5) for t in lo], "excess": excess})
    found = clock_skew.estimate_skew(steps, signal)
    assert found.seconds == pytest.approx(2.0, abs=0.11)
    assert found.correlation is not None and found.correlation > 0.9


def test_skew_is_found_from_interval_lines() -> None:
    # Lines of 10 steps (3 s each) and two episodes of 4 s: the skew of 2 s is found finer than a line.
    episodes = ((33, 37), (70, 74))
    grid = [T0 + timedelta(seconds=0.1 * i) for i in range(1200)]
    level = [1.0 if any(a <= 0.1 * i < b for a, b in episodes) else 0.0 for i in range(1200)]
    signal = pl.DataFrame({"time": grid, "physics": level})
    skew, length = 2.0, 3
    lo = [T0 + timedelta(seconds=length * i + skew) for i in range(36)]
    # Each line's excess: the episodes' share of its window on the switch clock.
    excess = [
        sum(max(0.0, min(length * (i + 1), b) - max(length * i, a)) for a, b in episodes) / length
        for i in range(36)
    ]
    lines = pl.DataFrame({"lo": lo, "hi": [t + timedelta(seconds=length) for t in lo], "excess": excess})
    found = clock_skew.estimate_skew(lines, signal)
    assert found.seconds == pytest.approx(skew, abs=0.11)
    assert found.correlation is not None and found.correlation > 0.95
    # Two episodes cut by line edges pin it: the range is the skew's own neighbourhood.
    assert found.low is not None and found.high is not None
    assert found.low <= found.seconds <= found.high
    assert found.high - found.low <= 0.3


def test_the_skews_the_logs_cannot_tell_apart_are_reported() -> None:
    # One 2 s episode inside 20 s lines: every skew of the search keeps it inside the same line, and all fit
    # as well. No skew is believed over none, and the range is the whole search.
    grid = [T0 + timedelta(seconds=0.1 * i) for i in range(1200)]
    signal = pl.DataFrame(
        {"time": grid, "physics": [1.0 if 33 <= 0.1 * i < 35 else 0.0 for i in range(1200)]}
    )
    lo = [T0 + timedelta(seconds=20 * i + 2.0) for i in range(5)]
    excess = [0.0, 2.0, 0.0, 0.0, 0.0]
    lines = pl.DataFrame({"lo": lo, "hi": [t + timedelta(seconds=20) for t in lo], "excess": excess})
    found = clock_skew.estimate_skew(lines, signal)
    assert found.seconds == 0.0
    assert (found.low, found.high) == pytest.approx((-MAX_SKEW_SECONDS, MAX_SKEW_SECONDS))
