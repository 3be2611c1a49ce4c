"""The clock skew (``analyzer.attribution.skew``)."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest
from synthetic_fabric import T0

from analyzer.attribution import skew as clock_skew


def test_skew_is_found_by_cross_correlation() -> None:
    # Physics on the switch clock; the same pattern 2 s later on the host clock.
    grid = [T0 + timedelta(seconds=0.1 * i) for i in range(600)]
    level = [1.0 if 20 <= 0.1 * i < 30 else 0.0 for i in range(600)]
    signal = pl.DataFrame({"time": grid, "physics": level})
    lo = [T0 + timedelta(seconds=0.5 * i) for i in range(120)]
    excess = [0.1 if 22 <= 0.5 * i < 32 else 0.0 for i in range(120)]
    steps = pl.DataFrame({"lo": lo, "hi": [t + timedelta(seconds=0.5) for t in lo], "excess": excess})
    skew, r = clock_skew.estimate_skew(steps, signal)
    assert skew == pytest.approx(2.0, abs=0.11)
    assert r is not None and r > 0.9


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
    found, r = clock_skew.estimate_skew(lines, signal)
    assert found == pytest.approx(skew, abs=0.11)
    assert r is not None and r > 0.95
