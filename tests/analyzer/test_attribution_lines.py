"""The lines and their evidence (``analyzer.attribution.lines``)."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
from synthetic_fabric import T0

from analyzer.attribution import lines as logged_lines


def test_interval_lines_are_weighted_by_their_steps() -> None:
    # Three Megatron-style lines of 10 iterations each: 1.0 s per step, then 1.05 s, then 1.0 s.
    frame = pl.DataFrame(
        {
            "rank": [None] * 3,
            "step": [10, 20, 30],
            "start_time": [None] * 3,
            "end_time": [T0 + timedelta(seconds=s) for s in (10.0, 20.5, 30.5)],
            "duration_seconds": [1.0, 1.05, 1.0],
            "interval_average": [True] * 3,
            "interval_steps": [10] * 3,
            "source_file": ["m.log"] * 3,
        },
        schema_overrides={"rank": pl.Int64, "start_time": pl.Datetime("us", "UTC")},
    )
    lines = logged_lines.intervals(frame).collect()
    assert lines["n"].to_list() == [10, 10, 10]
    steps = logged_lines.expand(lines.lazy()).collect()
    assert steps.height == 30
    assert steps["step"].to_list() == list(range(1, 31))
    middle = steps.filter(pl.col("line") == 20)
    assert middle["lo"][0] == T0 + timedelta(seconds=10)
    assert middle["hi"][-1] == T0 + timedelta(seconds=20.5)
