"""Each step's physics over its collectives' windows (``analyzer.attribution.step_windows``)."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
from synthetic_fabric import T0

from analyzer.attribution import step_windows


def test_a_long_step_is_read_over_every_typical_window_in_it_ending_with_its_last() -> None:
    def at(s: float) -> object:
        return T0 + timedelta(seconds=s)

    windows = pl.DataFrame({"window": [0, 1], "lo": [at(0), at(0.3)], "hi": [at(0.3), at(1.3)]})
    found = step_windows.collective_windows(windows, typical_seconds=0.3, skew_seconds=1.0)
    rows = [
        (w, round((lo - T0).total_seconds(), 3), round((hi - T0).total_seconds(), 3), round(s, 3))
        for w, lo, hi, s in found.sort("window", "hi").iter_rows()
    ]
    # A typical step is its own window; a 1 s step gives its last 0.3 s and the 0.3 s windows inside it
    # before that, half a typical step apart; all on the switch clock (1 s behind).
    assert rows == [
        (0, -1.0, -0.7, 0.3),
        (1, -0.6, -0.3, 0.3),
        (1, -0.45, -0.15, 0.3),
        (1, -0.3, 0.0, 0.3),
        (1, -0.15, 0.15, 0.3),
        (1, 0.0, 0.3, 0.3),
    ]
