"""How much of the run the telemetry saw, per link and per device; and the minimums a verdict needs.

A second of the run counts as covered when a reading of the link's (or device's) series lies within
``MAX_GAP_SECONDS`` after it: three default polling intervals (10 s), so a missed poll does not open a hole
but a collector that stopped does. The run is the steps' span (first start to last end); without steps it
is the telemetry's own span, which then covers itself.

The minimums (``verdicts`` applies them; the report's methodology prints them):

* a claim's verdict rests on at least ``MIN_SAMPLES`` readings or steps, ``MIN_QUANTILE_SAMPLES`` for a
  99th-percentile measure (below that the p99 is the largest value, not a percentile);
* a PASS needs the vendor's devices to have telemetry over at least ``MIN_COVERAGE`` of the run: what was
  not observed cannot be vouched for. A FAIL with enough samples stands: the violation was observed.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

MAX_GAP_SECONDS = 30.0
MIN_COVERAGE = 0.9
MIN_SAMPLES = 10
MIN_QUANTILE_SAMPLES = 100


def minimum_samples(measure: str) -> int:
    """The fewest samples a verdict on ``measure`` needs (see the module docstring)."""
    return MIN_QUANTILE_SAMPLES if "_p99" in measure else MIN_SAMPLES


def covered_seconds(
    stamps: pl.DataFrame, key: str, start: datetime | None, end: datetime | None
) -> dict[str, float]:
    """Per key, the seconds of [start, end] within ``MAX_GAP_SECONDS`` after a reading.

    Args:
        stamps: ``key`` and ``second`` (whole seconds holding a reading, ``Readings.stamps``).
        key: ``link`` or ``device``.
        start: the run's start, or None for each key's first reading.
        end: the run's end, or None for each key's last reading.

    Returns:
        Key -> covered seconds.
    """
    rows = stamps.filter(pl.col(key).is_not_null()).select(key, "second").unique()
    if start is not None:
        rows = rows.filter(pl.col("second") >= pl.lit(start).dt.truncate("1s"))
    if end is not None:
        rows = rows.filter(pl.col("second") <= pl.lit(end))
    if rows.height == 0:
        return {}
    last = pl.lit(end) if end is not None else pl.col("second").max().over(key)
    # Each reading covers until the next one, at most MAX_GAP_SECONDS, and the last one until the end.
    following = pl.col("second").shift(-1).over(key).fill_null(last)
    gap = (following - pl.col("second")).dt.total_nanoseconds() / 1e9
    frame = rows.sort(key, "second").with_columns(gap=gap.clip(0.0, MAX_GAP_SECONDS))
    totals = frame.group_by(key).agg(pl.col("gap").sum())
    return {str(k): float(v) for k, v in totals.iter_rows()}
