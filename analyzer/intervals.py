"""Time covered by a set of intervals, overlaps counted once.

Two congestion events on one interface at the same time (drops and ECN marks of one episode, or two queues)
are one period of congestion: summing their durations counts it twice, and "congestion seconds per hour"
could then exceed 3600. Intervals are merged per key before their lengths are added.
"""

from __future__ import annotations

import polars as pl


def covered_seconds(
    intervals: pl.DataFrame, key: str, start: str = "start_time", end: str = "end_time"
) -> pl.DataFrame:
    """Per key, the seconds covered by the union of its intervals.

    Sorted by start within each key, an interval opens a new merged block when it starts after every
    earlier interval has ended (the running maximum of the ends); each block lasts from its first start to
    its largest end.

    Args:
        intervals: rows with ``key``, ``start`` and ``end`` (datetimes); rows with a null key are ignored.
        key: the grouping column.
        start: the start column.
        end: the end column.

    Returns:
        Columns ``key`` and ``seconds`` (one row per key present).
    """
    rows = intervals.filter(pl.col(key).is_not_null()).select(key, start, end).sort(key, start)
    reach = pl.col(end).cum_max().over(key)
    opens = (pl.col(start) > reach.shift(1).over(key)).fill_null(True)
    blocks = rows.with_columns(block=opens.cast(pl.Int64()).cum_sum().over(key))
    merged = blocks.group_by(key, "block").agg(first=pl.col(start).min(), last=pl.col(end).max())
    seconds = (pl.col("last") - pl.col("first")).dt.total_nanoseconds() / 1e9
    return merged.group_by(key).agg(seconds=seconds.sum())
