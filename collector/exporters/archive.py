"""The Parquet archive: every reading at full resolution, hive-partitioned (spec: interfaces.md).

``<archive>/date=YYYY-MM-DD/hour=HH/<writer-id>-<seq>.parquet``, zstd. Rows are buffered in memory and
written every flush interval and at shutdown. A file is written under a hidden temporary name, fsynced,
then renamed, so a reader never sees half a file and a crash (even ``kill -9``) loses at most the rows
of one interval. Files are never changed once visible.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import socket
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from collector.clock import Clock, SystemClock
from collector.contracts import archive as layout
from collector.contracts.catalog import SERIES_LABELS
from collector.model import Labels

if TYPE_CHECKING:
    import polars as pl

log = logging.getLogger(__name__)

LABEL_COLUMNS = layout.LABEL_COLUMNS

Row = tuple[int, int, str, str, str, Labels, "str | None", float, "int | None"]
_HOUR_NS = 3600 * 10**9


def writer_id() -> str:
    """A name no other writer uses: host, process and start time."""
    host = socket.gethostname().split(".")[0] or "host"
    return f"{host}-{os.getpid()}-{SystemClock().time_ns() // 10**6:x}"


class Archive:
    """Buffers rows (``add`` is on the ingest hot path: one tuple append) and writes Parquet files."""

    def __init__(self, root: Path, clock: Clock | None = None, writer: str | None = None) -> None:
        self.root = root
        self.clock = clock or SystemClock()
        self.writer = writer or writer_id()
        self._rows: list[Row] = []
        self._seq = 0
        self.rows_written = 0
        self.write_errors = 0

    def add(
        self,
        time_ns: int,
        received_ns: int,
        device: str,
        source: str,
        metric: str,
        lbls: Labels,
        link: str | None,
        value: float,
        counter: int | None,
    ) -> None:
        self._rows.append((time_ns, received_ns, device, source, metric, lbls, link, value, counter))

    @property
    def pending(self) -> int:
        return len(self._rows)

    def flush(self) -> list[Path]:
        """Write every buffered row now (one file per hour partition).

        Returns:
            the files made visible. On an I/O error the rows are kept for the next flush.
        """
        rows, self._rows = self._rows, []
        if not rows:
            return []
        try:
            written = [self._write(hour, part) for hour, part in _by_hour(rows).items()]
        except OSError as e:
            self.write_errors += 1
            self._rows = rows + self._rows
            log.error(
                "archive flush to %s failed, %d rows kept for the next try: %s", self.root, len(rows), e
            )
            return []
        self.rows_written += len(rows)
        return written

    async def flush_async(self) -> list[Path]:
        """``flush`` in a worker thread, so the event loop keeps polling while Parquet is encoded."""
        return await asyncio.to_thread(self.flush)

    async def run(self, interval: float) -> None:
        """Flush every ``interval`` seconds until cancelled; the caller flushes once more at shutdown."""
        while True:
            await self.clock.sleep(interval)
            await self.flush_async()

    def _write(self, hour_ns: int, rows: Sequence[Row]) -> Path:
        stamp = _utc(hour_ns)
        folder = self.root / layout.folder(stamp)
        folder.mkdir(parents=True, exist_ok=True)
        self._seq += 1
        final = folder / f"{self.writer}-{self._seq:06d}.parquet"
        tmp = folder / f".{final.name}.tmp"
        _table(rows).write_parquet(tmp, compression="zstd")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)
        return final


def _by_hour(rows: list[Row]) -> dict[int, list[Row]]:
    parts: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        parts[row[0] - row[0] % _HOUR_NS].append(row)
    return parts


def _table(rows: Sequence[Row]) -> pl.DataFrame:
    # polars is imported at the first flush, not with the daemon: ``spanwatch collect`` starts without the
    # dataframe stack, and a collector without an archive never loads it.
    import polars as pl

    types = {
        "timestamp": pl.Datetime("ns", "UTC"),
        "string": pl.String(),
        "float64": pl.Float64(),
        "uint64": pl.UInt64(),
    }
    time, received, device, source, metric, lbls, link, value, counter = zip(*rows, strict=True)
    columns: dict[str, list[str | None]] = {name: [None] * len(rows) for name in SERIES_LABELS}
    for i, pairs in enumerate(lbls):
        for name, v in pairs:
            columns[name][i] = v
    data: dict[str, Sequence[object]] = {
        "time": time,
        "received_time": received,
        "device": device,
        "source": source,
        "metric": metric,
        **columns,
        "link": link,
        "value": value,
        "counter": counter,
    }
    series = []
    for name, kind in layout.COLUMNS:
        if kind == "timestamp":  # nanoseconds since the epoch, as integers, then typed
            series.append(pl.Series(name, data[name], pl.Int64).cast(types[kind]))
        else:
            series.append(pl.Series(name, data[name], types[kind]))
    return pl.DataFrame(series)


def _utc(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).strftime("%Y-%m-%dT%H")
