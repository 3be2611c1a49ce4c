"""Copy an archive's readings into one folder per device batch, in one pass and bounded memory.

An archive file holds every device's readings of its flush interval, so processing devices batch by batch
straight from the archive would decode every file once per batch. This reads each file once, in pieces of
at most ``PIECE_ROWS`` rows (polars' own reader: memory follows the piece, not the file), keeps the rows of
the time range, devices and metrics asked for, and appends each batch's rows to ``<spill>/batch=<i>/``,
narrow: a series id (the labels hashed) and the columns signals read, the metric as an enum. The labels, most
of what a reading weighs, are kept once per series, read again only for pieces that bring a new series.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import polars as pl

from analyzer import schemas, telemetry
from collector.contracts import archive as layout

PIECE_ROWS = 4_000_000


_slot = layout.hour_of


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


def _pieces(path: Path) -> Iterator[pl.LazyFrame]:
    """A file's readings as ``schemas.TELEMETRY`` LazyFrames of at most ``PIECE_ROWS`` rows each."""
    scan = pl.scan_parquet(path)
    rows = scan.select(pl.len()).collect().item()  # from the file's metadata
    for offset in range(0, rows, PIECE_ROWS):
        yield schemas.conform_lazy(schemas.TELEMETRY, scan.slice(offset, PIECE_ROWS))


NARROW: tuple[str, ...] = ("series", "metric", "time", "value", "counter")
"""The columns of a spilled reading: the labels are kept once per series, not once per reading."""

_NARROW_SCHEMA = pl.Schema(
    {
        "series": pl.UInt64(),
        "metric": schemas.METRIC,
        "time": schemas.TIME,
        "value": pl.Float64(),
        "counter": pl.UInt64(),
    }
)


def spill_batches(
    files: list[Path], keep: pl.Expr, plan: list[list[str]], spill: Path
) -> list[tuple[pl.LazyFrame, pl.LazyFrame]]:
    """Copy the kept rows of ``files`` into one folder per batch of ``plan``, narrow.

    Args:
        files: archive files (``files_in_range``), in time order.
        keep: the row filter (``row_filter``).
        plan: device batches.
        spill: an empty folder to write into.

    Returns:
        One ``(readings, labels)`` pair per batch: a LazyFrame over its folder with the ``NARROW`` columns
        (in archive order), and its series' ``schemas.SERIES`` rows.
    """
    number = {device: index for index, batch in enumerate(plan) for device in batch}
    for index in range(len(plan)):
        (spill / f"batch={index}").mkdir(parents=True)
    written = 0
    filled: set[int] = set()  # batches with at least one file (the archive may change under a live collector)
    labels: list[pl.DataFrame] = []
    batch_of = pl.DataFrame(schema={"series": pl.UInt64(), "batch": pl.Int32()})  # every series seen
    metric = pl.col("metric").cast(schemas.METRIC)
    for path in files:
        for piece in _pieces(path):
            kept = piece.filter(keep).with_columns(series=telemetry.series_id())
            narrow = kept.select(*NARROW).with_columns(metric).collect(engine="streaming")
            seen = narrow["series"].unique()
            fresh = seen.filter(~seen.is_in(batch_of["series"].implode()))
            if fresh.len():
                # The one place labels are decoded: a second read of this piece, for its new series only.
                new = kept.filter(pl.col("series").is_in(fresh.implode())).select(
                    "series", *schemas.SERIES_KEYS
                )
                found = new.unique("series", keep="any").collect(engine="streaming")
                # Rebuilt from Python values: the few rows picked out of the piece would otherwise keep the
                # piece's whole label string buffers alive (string views share them) to the end.
                labels.append(pl.DataFrame(found.rows(), schema=found.schema, orient="row"))
                place = pl.col("device").replace_strict(number, default=-1, return_dtype=pl.Int32())
                batch_of = pl.concat([batch_of, found.select("series", batch=place)])
            batch = pl.col("series").replace_strict(batch_of["series"], batch_of["batch"], default=-1)
            placed = narrow.with_columns(batch=batch).lazy()
            # One filter per batch: about half the cost of ``partition_by``, which groups before it gathers.
            parts = pl.collect_all(
                [placed.filter(pl.col("batch") == i).drop("batch") for i in range(len(plan))]
            )
            for index, part in enumerate(parts):
                if part.height:
                    filled.add(index)
                    written += 1
                    part.write_ipc(spill / f"batch={index}" / f"{written:08d}.arrow", compression="lz4")
    every = pl.concat(labels) if labels else pl.DataFrame(schema=schemas.SERIES)
    per_batch = every.join(batch_of, on="series").partition_by("batch", as_dict=True, include_key=False)
    empty = pl.DataFrame(schema=schemas.SERIES)
    return [
        (
            schemas.conform_lazy(_NARROW_SCHEMA, pl.scan_ipc(spill / f"batch={index}" / "*.arrow"))
            if index in filled
            else pl.LazyFrame(schema=_NARROW_SCHEMA),
            schemas.conform_lazy(schemas.SERIES, per_batch.get((index,), empty).lazy()),
        )
        for index in range(len(plan))
    ]
