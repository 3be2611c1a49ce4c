"""Copy an archive's readings into one folder per device batch, streaming, in bounded memory.

An archive file holds every device's readings of its flush interval; processing devices batch by batch
would otherwise decode every file once per batch. This reads each file once, a record batch at a time
(``pyarrow.parquet.ParquetFile.iter_batches``: memory follows the record batch, not the file or the archive),
keeps the rows of the time range, devices and metrics asked for, and appends each batch's rows to
``<spill>/batch=<i>/``, narrow: a series id and the columns signals read, the labels kept once per series. (polars' partitioned sink was tried first: it held the whole copy in memory.)
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from analyzer import schemas, telemetry

RECORD_BATCH_ROWS = 1_000_000


def _slot(path: Path) -> str:
    """``YYYY-MM-DDTHH`` of a file from its hive folders (``date=...``/``hour=...``)."""
    return f"{path.parent.parent.name.removeprefix('date=')}T{path.parent.name.removeprefix('hour=')}"


def files_in_range(root: Path, start: datetime | None, end: datetime | None) -> list[Path]:
    """The archive's files whose hour can hold readings of ``[start, end)``.

    Args:
        root: the archive directory.
        start: first time included, or None.
        end: first time excluded, or None.

    Returns:
        The files, in path (time) order.

    Raises:
        InputError: the archive has no data files.
    """
    low = start.strftime("%Y-%m-%dT%H") if start is not None else ""
    high = end.strftime("%Y-%m-%dT%H") if end is not None else "~"
    return [p for p in telemetry.archive_files(root) if low <= _slot(p) <= high]


def row_filter(
    start: datetime | None, end: datetime | None, devices: list[str] | None, metrics: frozenset[str]
) -> pl.Expr:
    """The rows an analysis keeps (the same conditions ``telemetry.scan_archive`` applies)."""
    keep = pl.col("metric").is_in(sorted(metrics))
    if start is not None:
        keep &= pl.col("time") >= start
    if end is not None:
        keep &= pl.col("time") < end
    if devices:
        keep &= pl.col("device").is_in(devices)
    return keep


def _chunks(path: Path) -> Iterator[pl.DataFrame]:
    parquet = pq.ParquetFile(path)
    present = [name for name in schemas.TELEMETRY if name in parquet.schema_arrow.names]
    for record_batch in parquet.iter_batches(batch_size=RECORD_BATCH_ROWS, columns=present):
        frame = pl.from_arrow(record_batch)
        if isinstance(frame, pl.DataFrame):
            yield frame


NARROW: tuple[str, ...] = ("series", "metric", "time", "value", "counter")
"""The columns of a spilled reading: the labels are kept once per series, not once per reading."""

_NARROW_SCHEMA = pl.Schema(
    {
        "series": pl.UInt64(),
        "metric": pl.String(),
        "time": schemas.TIME,
        "value": pl.Float64(),
        "counter": pl.UInt64(),
    }
)


def spill_batches(
    files: list[Path], keep: pl.Expr, plan: list[list[str]], spill: Path
) -> list[tuple[pl.LazyFrame, pl.LazyFrame]]:
    """Copy the kept rows of ``files`` into one folder per batch of ``plan``, narrow.

    Each reading is written as its series id (``telemetry.series_id``) and the ``NARROW`` columns; each
    series' labels are collected once, in memory (a few thousand rows). Writing and re-reading five columns
    instead of fourteen (ten of them label strings) is most of what the copy costs.

    Args:
        files: archive files (``files_in_range``).
        keep: the row filter (``row_filter``).
        plan: device batches.
        spill: an empty folder to write into.

    Returns:
        One ``(readings, labels)`` pair per batch: a LazyFrame over its folder with the ``NARROW`` columns,
        and its series' ``schemas.SERIES`` rows.
    """
    number = {device: index for index, batch in enumerate(plan) for device in batch}
    batch_of = pl.col("device").replace_strict(number, default=-1, return_dtype=pl.Int32())
    for index in range(len(plan)):
        (spill / f"batch={index}").mkdir(parents=True)
    written = 0
    labels: list[pl.DataFrame] = []
    known = pl.Series("series", [], pl.UInt64())
    for path in files:
        for chunk in _chunks(path):
            rows = (
                schemas.conform_lazy(schemas.TELEMETRY, chunk.lazy())
                .filter(keep)
                .with_columns(series=telemetry.series_id(), batch=batch_of)
                .collect()
            )
            fresh = (
                rows.filter(~pl.col("series").is_in(known))
                .select("batch", "series", *schemas.SERIES_KEYS)
                .unique("series", keep="any")
            )
            if fresh.height:
                # Rebuilt from Python values: a slice of ``rows`` would keep the whole chunk's string
                # buffers alive (string views share them), about 30 MB per chunk held to the end.
                labels.append(pl.DataFrame(fresh.rows(), schema=fresh.schema, orient="row"))
                known = pl.concat([known, fresh["series"]])
            narrow = rows.select("batch", *NARROW)
            del rows
            for (index,), part in narrow.partition_by("batch", as_dict=True, include_key=False).items():
                if isinstance(index, int) and index >= 0:
                    written += 1
                    part.write_parquet(spill / f"batch={index}" / f"{written:08d}.parquet", compression="lz4")
    every = (
        pl.concat(labels).unique("series", keep="any")
        if labels
        else pl.DataFrame(schema={"batch": pl.Int32(), **schemas.SERIES})
    )
    per_batch = every.partition_by("batch", as_dict=True, include_key=False)
    empty = pl.DataFrame(schema=schemas.SERIES)
    return [
        (
            schemas.conform_lazy(_NARROW_SCHEMA, pl.scan_parquet(spill / f"batch={index}" / "*.parquet")),
            schemas.conform_lazy(schemas.SERIES, per_batch.get((index,), empty).lazy()),
        )
        for index in range(len(plan))
    ]
