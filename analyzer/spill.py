"""Copy an archive's readings into one folder per device batch, streaming, in bounded memory.

An archive file holds every device's readings of its flush interval; processing devices batch by batch
would otherwise decode every file once per batch. This reads each file once, a record batch at a time
(``pyarrow.parquet.ParquetFile.iter_batches``: memory follows the record batch, not the file or the archive),
keeps the rows of the time range, devices and metrics asked for, and appends each batch's rows to
``<spill>/batch=<i>/``. (polars' partitioned sink was tried first: it held the whole copy in memory.)
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


def spill_batches(files: list[Path], keep: pl.Expr, plan: list[list[str]], spill: Path) -> list[pl.LazyFrame]:
    """Copy the kept rows of ``files`` into one folder per batch of ``plan``.

    Args:
        files: archive files (``files_in_range``).
        keep: the row filter (``row_filter``).
        plan: device batches.
        spill: an empty folder to write into.

    Returns:
        One LazyFrame per batch, over its folder, with the ``schemas.TELEMETRY`` columns.
    """
    number = {device: index for index, batch in enumerate(plan) for device in batch}
    batch_of = pl.col("device").replace_strict(number, default=-1, return_dtype=pl.Int32())
    for index in range(len(plan)):
        (spill / f"batch={index}").mkdir(parents=True)
    written = 0
    for path in files:
        for chunk in _chunks(path):
            rows = (
                schemas.conform_lazy(schemas.TELEMETRY, chunk.lazy())
                .filter(keep)
                .with_columns(batch=batch_of)
            )
            for (index,), part in (
                rows.collect().partition_by("batch", as_dict=True, include_key=False).items()
            ):
                if isinstance(index, int) and index >= 0:
                    written += 1
                    part.write_parquet(spill / f"batch={index}" / f"{written:08d}.parquet", compression="lz4")
    return [
        schemas.conform_lazy(schemas.TELEMETRY, pl.scan_parquet(spill / f"batch={index}" / "*.parquet"))
        for index in range(len(plan))
    ]
