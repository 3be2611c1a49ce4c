"""The one way a quantile of telemetry readings is computed, wherever it is shown (measures, claims, report).

Readings first lose repeats: a reading whose series already has one at the same device time is the same
measurement delivered twice (a gNMI sample re-sent, SNMP and gNMI reading one counter), and counting it
twice weights that instant double. The distinct readings then go into log-spaced histograms (mergeable
across device batches, small whatever the archive's size): a reading v > 0 falls in bucket
round(log(v) / log(1 + BUCKET_STEP)), read back within +/- BUCKET_STEP / 2 of v; v <= 0 falls in ZERO_BUCKET.
The q-quantile is the value of the first bucket whose cumulative count reaches q of the total. The claim
table and the distribution table both go through ``histogram`` and ``quantile``, so one series has one p99.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

BUCKET_STEP = 0.01
ZERO_BUCKET = -(2**31)


def distinct_readings(frame: pl.LazyFrame, series: Sequence[str]) -> pl.LazyFrame:
    """The readings without repeats of a (series, time) pair (the first delivery is kept).

    Args:
        frame: readings with the ``series`` columns, ``time`` and ``value``.
        series: the columns that name a series (``schemas.SERIES_KEYS``, or ``["series"]``).

    Returns:
        The readings, one per series and time.
    """
    return frame.unique([*series, "time"], keep="first", maintain_order=False)


def bucket_of(value: pl.Expr) -> pl.Expr:
    """The histogram bucket of a reading (see the module docstring)."""
    log_bucket = (value.log() / math.log1p(BUCKET_STEP)).round().cast(pl.Int32())
    return pl.when(value > 0).then(log_bucket).otherwise(pl.lit(ZERO_BUCKET, pl.Int32()))


def bucket_value(bucket: pl.Expr) -> pl.Expr:
    """The value a histogram bucket stands for."""
    return (
        pl.when(bucket == ZERO_BUCKET)
        .then(0.0)
        .otherwise((bucket.cast(pl.Float64()) * math.log1p(BUCKET_STEP)).exp())
    )


def histogram(readings: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    """Readings counted per key and bucket.

    Args:
        readings: distinct readings (``distinct_readings``) with ``value`` and the ``keys`` columns.
        keys: the grouping columns kept.

    Returns:
        ``keys``, ``bucket``, ``count``.
    """
    return readings.group_by(*keys, bucket=bucket_of(pl.col("value"))).agg(count=pl.len().cast(pl.Int64()))


def quantile(frame: pl.DataFrame, key: str, q: float) -> pl.DataFrame:
    """The q-quantile per key from histogram rows (``bucket``, ``count``).

    Args:
        frame: histogram rows (several rows of one key and bucket are added).
        key: the grouping column.
        q: the quantile, 0..1.

    Returns:
        Columns ``key`` and ``value``.
    """
    per_bucket = frame.group_by(key, "bucket").agg(pl.col("count").sum()).sort(key, "bucket")
    cumulative = per_bucket.with_columns(
        reached=pl.col("count").cum_sum().over(key) >= q * pl.col("count").sum().over(key)
    )
    chosen = cumulative.filter("reached").group_by(key).agg(pl.col("bucket").first())
    return chosen.select(key, value=bucket_value(pl.col("bucket")))


def quantiles(frame: pl.DataFrame, qs: Sequence[float]) -> list[float]:
    """Several quantiles of one histogram (all rows one distribution), in the order of ``qs``.

    Args:
        frame: histogram rows (``bucket``, ``count``).
        qs: the quantiles, 0..1.

    Returns:
        The values; empty when the histogram is.
    """
    if frame.height == 0:
        return []
    per_bucket = frame.group_by("bucket").agg(pl.col("count").sum()).sort("bucket")
    cumulative = per_bucket["count"].cum_sum()
    total = float(cumulative[-1])
    # The same rule as ``quantile``: the first bucket whose cumulative count reaches q of the total.
    index = cumulative.cast(pl.Float64()).search_sorted(pl.Series([q * total for q in qs]), side="left")
    buckets = per_bucket.select(bucket_value(pl.col("bucket")).alias("value"))["value"]
    return [float(buckets[min(int(i), len(buckets) - 1)]) for i in index]
