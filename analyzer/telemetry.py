"""Network telemetry in: the Parquet archive (or a Prometheus server) -> readings -> reset-aware signals.

``scan_archive`` returns a LazyFrame over the hive-partitioned archive with the time range and the device
list pushed down (``date``/``hour`` partitions are pruned, row groups filtered by ``time``), so a week-long
archive is never read whole to analyse one hour. ``signals`` turns each series into one row per reading:
counters become per-second rates over the interval since the previous reading, gauges keep their value.

Counter resets are handled again here, whatever the collector did: the ``counter`` column holds the exact
integer total, and a decrease means the device restarted the count, so the interval's increase is the new
value itself (what was counted since the reset), never a negative number.
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import reduce
from pathlib import Path

import polars as pl
import polars.selectors as cs

from analyzer import schemas
from analyzer.errors import InputError
from collector.contracts import archive as layout
from collector.contracts.catalog import CATALOG

log = logging.getLogger(__name__)

COUNTERS: frozenset[str] = frozenset(name for name, spec in CATALOG.items() if spec.is_counter)

# Gauges whose reading is a peak or an extreme over the interval since the previous sample (OpenConfig stat
# containers, watermarks): they describe the interval, not the instant.
INTERVAL_GAUGES: frozenset[str] = frozenset(
    {"dci_queue_watermark_bytes", "dci_buffer_pool_watermark_bytes"}
    | {name for name in CATALOG if name.endswith(("_max", "_min", "_avg"))}
)

# Gauges of a state (up or down) that a device may send only when it changes (gNMI ON_CHANGE, suppressed
# redundant samples): a reading holds from its time until the next one, not from half-way to the previous.
STATE_GAUGES: frozenset[str] = frozenset({"dci_interface_oper_up"})

_SERIES = list(schemas.SERIES_KEYS)


REQUIRED_COLUMNS = ("time", "device", "metric", "value")
"""Columns a file must have to be read as archive data (others are inserted as nulls when missing)."""

_checked: dict[tuple[str, int, int], str | None] = {}  # (path, mtime, size) -> why it is unusable


def _all_files(root: Path) -> list[Path]:
    if not root.is_dir():
        raise InputError(root, "archive directory not found")
    files = layout.data_files(root)
    if not files:
        raise InputError(root, "no Parquet files under date=YYYY-MM-DD/hour=HH/ (is this an archive?)")
    return files


def file_problem(path: Path) -> str | None:
    """Why an archive file cannot be read (its footer is corrupt, or it lacks columns), or None.

    Only the footer is read; the answer is remembered per (path, mtime, size), and logged once.
    """
    try:
        st = path.stat()
    except OSError as e:
        return f"cannot read: {e.strerror}"
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key in _checked:
        return _checked[key]
    problem: str | None
    try:
        names = pl.read_parquet_schema(path).keys()
        missing = [c for c in REQUIRED_COLUMNS if c not in names]
        problem = f"no column {', '.join(missing)}" if missing else None
    except Exception as e:  # polars raises ComputeError and OSError variants for a corrupt footer
        problem = f"not a readable Parquet file ({type(e).__name__})"
    if problem is not None:
        log.warning("archive: skipping %s: %s", path, problem)
    _checked[key] = problem
    return problem


def archive_files(root: Path) -> list[Path]:
    """The readable Parquet files of an archive (hidden temporary files are not data yet; a corrupt file
    is skipped with a warning, see ``skipped_files``).

    Args:
        root: the archive directory.

    Returns:
        The files, sorted.

    Raises:
        InputError: the directory does not exist or holds no readable Parquet file.
    """
    files = _all_files(root)
    good = [p for p in files if file_problem(p) is None]
    if not good:
        raise InputError(root, f"none of its {len(files)} Parquet files is readable")
    return good


def skipped_files(root: Path) -> list[tuple[Path, str]]:
    """The archive's files that are skipped, with why."""
    out = []
    for p in _all_files(root):
        problem = file_problem(p)
        if problem is not None:
            out.append((p, problem))
    return out


def scan_archive(
    root: Path,
    start: datetime | None = None,
    end: datetime | None = None,
    devices: list[str] | None = None,
    metrics: frozenset[str] | None = None,
) -> pl.LazyFrame:
    """A lazy scan of the archive, restricted to a time range, devices and metrics.

    Args:
        root: the archive directory.
        start: first time included (aware datetime), or None for the beginning.
        end: first time excluded, or None for the end.
        devices: device names to keep, or None for all.
        metrics: catalogue names to keep, or None for all.

    Returns:
        A LazyFrame with the ``schemas.TELEMETRY`` columns.

    Raises:
        InputError: the archive has no data files.
    """
    # Partition pruning on the file list: only the hours of [start, end) are opened. Not polars' hive
    # partitioning, which needs every file at the same depth (a sharded archive adds ``shard=``).
    low = start.strftime("%Y-%m-%dT%H") if start is not None else ""
    high = end.strftime("%Y-%m-%dT%H") if end is not None else "~"
    files = [p for p in archive_files(root) if low <= layout.hour_of(p) <= high]
    if not files:
        return schemas.conform_lazy(schemas.TELEMETRY, pl.LazyFrame(schema=schemas.TELEMETRY))
    frame = pl.scan_parquet(files, hive_partitioning=False, missing_columns="insert")
    if start is not None:
        frame = frame.filter(pl.col("time") >= start)
    if end is not None:
        frame = frame.filter(pl.col("time") < end)
    if devices:
        frame = frame.filter(pl.col("device").is_in(devices))
    if metrics is not None:
        frame = frame.filter(pl.col("metric").is_in(sorted(metrics)))
    return schemas.conform_lazy(schemas.TELEMETRY, frame)


def _interval_increase() -> pl.Expr:
    """What a counter interval added: exact integers when the ``counter`` column is there, reset-aware."""
    exact, previous = pl.col("counter"), pl.col("counter").shift(1)
    exact_increase = pl.when(exact >= previous).then(exact - previous).otherwise(exact).cast(pl.Float64)
    value, before = pl.col("value"), pl.col("value").shift(1)
    float_increase = pl.when(value >= before).then(value - before).otherwise(value)
    return pl.coalesce(exact_increase, float_increase)


def series_id() -> pl.Expr:
    """One 64-bit integer per series, so a per-series shift is a cheap comparison, not a 10-column group-by.

    Each label column is hashed with its own seed (so equal values in different columns differ) and the
    hashes are combined with xor: about twice as fast as hashing a struct of the columns.
    """
    hashes = [pl.col(name).hash(seed=index) for index, name in enumerate(_SERIES)]
    return reduce(lambda left, right: left.xor(right), hashes)


def with_series(telemetry: pl.LazyFrame) -> pl.LazyFrame:
    """Add the ``series`` column (``series_id``) unless it is already there.

    Args:
        telemetry: ``schemas.TELEMETRY`` rows.

    Returns:
        The rows with ``series``.
    """
    if "series" in telemetry.collect_schema().names():
        return telemetry
    return telemetry.with_columns(series=series_id())


def series_labels(telemetry: pl.LazyFrame) -> pl.LazyFrame:
    """One row per series with its labels.

    Args:
        telemetry: ``schemas.TELEMETRY`` rows, with or without ``series``.

    Returns:
        ``schemas.SERIES`` rows.
    """
    keyed = with_series(telemetry).select("series", *_SERIES)
    return schemas.conform_lazy(schemas.SERIES, keyed.unique("series", keep="any"))


def group_series(frame: pl.DataFrame) -> pl.DataFrame:
    """Put each series' readings together, in time order, cheaply when they arrive in time order.

    The archive's files are written in time order and read in path order, so readings usually arrive
    time-ordered: gathering each series' rows as lists and exploding them back keeps that order within each
    series, at about half the cost of a stable sort by series (and a third of a two-key sort). One
    vectorised pass checks the time order; otherwise the full sort by (series, time) runs. Only contiguity
    matters downstream (every per-series step compares a row with its neighbour), not the order of series.

    Args:
        frame: readings with ``series`` and ``time``.

    Returns:
        The readings, each series' rows contiguous and in time order.
    """
    grouped = frame.group_by("series").agg(pl.all()).explode(cs.exclude("series"))
    first = pl.col("series") != pl.col("series").shift(1)
    in_order = grouped.select((first | (pl.col("time") >= pl.col("time").shift(1))).fill_null(True).all())
    return grouped if in_order.item() else frame.sort("series", "time")


def signals(telemetry: pl.LazyFrame) -> pl.LazyFrame:
    """Turn readings into signals: counters become reset-aware per-second rates, gauges stay as they are.

    Rows are sorted per series by time; the first reading of a counter series has no rate (null value).
    Readings with the same time as the previous one of their series are dropped (a duplicate delivery).

    Args:
        telemetry: ``schemas.TELEMETRY`` rows, with or without ``series``.

    Returns:
        ``schemas.SIGNALS`` rows, grouped by series and in time order within each (``group_series``);
        ``series_labels`` gives each series' labels.
    """
    metric = pl.col("metric").cast(schemas.METRIC)
    narrow = with_series(telemetry).select("series", metric, "time", "value", "counter")
    keyed = group_series(narrow.collect()).lazy()
    same = pl.col("series") == pl.col("series").shift(1)
    deduped = keyed.filter(~(same & (pl.col("time") == pl.col("time").shift(1))).fill_null(False))
    is_counter = pl.col("metric").is_in(sorted(COUNTERS))
    prev_time = pl.when(same).then(pl.col("time").shift(1))
    next_same = pl.col("series") == pl.col("series").shift(-1)
    seconds = (pl.col("time") - prev_time).dt.total_nanoseconds() / 1e9
    increase = pl.when(same & is_counter).then(_interval_increase())
    with_intervals = deduped.with_columns(
        prev_time=prev_time,
        next_time=pl.when(next_same).then(pl.col("time").shift(-1)),
        seconds=seconds,
        increase=increase,
    )
    rate = pl.when(is_counter).then(pl.col("increase") / pl.col("seconds")).otherwise(pl.col("value"))
    return schemas.conform_lazy(schemas.SIGNALS, with_intervals.with_columns(value=rate))
