"""The Parquet archive: every reading at full resolution, hive-partitioned (spec: interfaces.md).

``<archive>/[shard=I/]date=YYYY-MM-DD/hour=HH/<writer-id>-<seq>.parquet``, zstd; ``shard=I`` when the
collector runs as replica ``I`` of ``--shard I/N``, so sharded collectors write side by side. The archive is
a local folder or an S3-compatible bucket (``s3://bucket/prefix``, ``collector.storage``). Rows are buffered
in memory and written every flush interval and at shutdown. A local file is written under a hidden temporary
name, fsynced, then renamed; an object is uploaded in one PUT, visible only once complete. Either way a
reader never sees half a file and a crash (even ``kill -9``) loses at most the rows of one interval. Files
are never changed once visible.

Nothing a flush meets stops the archive (issue 16): an I/O error (disk full, read-only, an upload that failed
after its retries) keeps the rows for the next flush; any other error drops the rows that cannot be written (counted, by reason) and writes the
rest. Either way the flush is counted in ``write_errors``. Rows kept for a disk that does not come back are
bounded by ``max_buffer_bytes``: beyond it the oldest are dropped and counted, never silently.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import operator
import os
import socket
from array import array
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collector.clock import Clock, SystemClock
from collector.contracts import archive as layout
from collector.contracts.catalog import SERIES_LABELS
from collector.counters import MAX64
from collector.exporters import parquet
from collector.lograte import RateLimitedLog
from collector.model import ArchiveRow, Labels
from collector.storage import Bucket, StoreSettings

if TYPE_CHECKING:
    from collector.config import ArchiveConfig
    from collector.shard import Shard

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

# A buffered row in the columns (8-byte numbers, references to the strings and label tuples the store holds
# anyway): 1,000,000 rows of 200 SNMP targets = 73.5 MB of RSS, measured 2026-12-06 (as tuples: 268 MB, F16).
ROW_BYTES = 80
DEFAULT_MAX_BUFFER_BYTES = 256 * 1024 * 1024
# Rows gathered as tuples before they move into the columns: large enough that a move is a few C-level
# passes, small enough that the tuples waiting cost little (~0.25 MB).
CHUNK_ROWS = 1024

LABEL_COLUMNS = layout.LABEL_COLUMNS

Row = ArchiveRow
_HOUR_NS = 3600 * 10**9
_TIME, _RECEIVED, _VALUE, _COUNTER = itemgetter(0), itemgetter(1), itemgetter(7), itemgetter(8)
_REFS = tuple(map(itemgetter, (2, 3, 4, 5, 6)))  # device, source, metric, labels, link


def writer_id() -> str:
    """A name no other writer uses: host, process and start time."""
    host = socket.gethostname().split(".")[0] or "host"
    return f"{host}-{os.getpid()}-{SystemClock().time_ns() // 10**6:x}"


class Archive:
    """Buffers rows (``add`` is on the ingest hot path: one tuple append) in columns (``Buffer``) and writes
    Parquet files.

    Args:
        root: the archive directory (with ``bucket``: only named in messages).
        clock: time (tests pass their own).
        writer: the file name prefix (default: host, process and start time).
        max_buffer_bytes: the most the waiting rows may cost, at ``ROW_BYTES`` a row.
        shard: this collector's replica index (``--shard I/N``): files go under ``shard=I/``.
        bucket: write to this bucket instead of ``root`` (its ``put_retries`` and ``put_failures`` count).
    """

    def __init__(
        self,
        root: Path | str,
        clock: Clock | None = None,
        writer: str | None = None,
        max_buffer_bytes: int = DEFAULT_MAX_BUFFER_BYTES,
        shard: int | None = None,
        bucket: Bucket | None = None,
    ) -> None:
        self.root = root
        self.bucket = bucket
        self.shard = shard
        self.clock = clock or SystemClock()
        self.writer = writer or writer_id()
        self.max_rows = max(1, max_buffer_bytes // ROW_BYTES)
        # The columns are shed to stay within the cap with a chunk of tuples still to come.
        chunk = min(CHUNK_ROWS, max(1, self.max_rows // 10))
        self._cap = self.max_rows - chunk
        self._buffer = Buffer(chunk)
        self._seq = 0
        self.rows_written = 0
        self.write_errors = 0
        self.rows_dropped: dict[str, int] = {}  # reason -> rows dropped without being written

    def add(self, row: Row) -> None:
        buffer = self._buffer
        recent = buffer.recent
        recent.append(row)
        if len(recent) >= buffer.chunk:
            self._fold(buffer)

    def _fold(self, buffer: Buffer) -> None:
        """Move ``buffer``'s tuples into its columns, count what they could not hold, and shed the oldest
        rows past the cap (to 90 % of it: one slice, not one row a chunk)."""
        buffer.fold()
        self._drop("unwritable", buffer.unwritable)
        buffer.unwritable = 0
        excess = len(buffer.time) - self._cap
        if excess > 0:
            excess = len(buffer.time) - self._cap * 9 // 10
            buffer.drop_oldest(excess)
            self._drop("buffer_full", excess)

    @classmethod
    def from_config(cls, config: ArchiveConfig, clock: Clock, shard: Shard | None = None) -> Archive:
        """The archive a collector's config names: its ``path``, or its ``url`` bucket (settings and
        secrets from the config, the rest from the ``AWS_*`` environment).

        Args:
            config: ``collector.archive``.
            clock: time.
            shard: this replica's ``--shard``, or None.
        """
        index = None if shard is None else shard.index
        if config.url is None:
            return cls(config.path, clock, max_buffer_bytes=config.max_buffer_bytes, shard=index)
        key, secret = config.access_key_id, config.secret_access_key
        settings = StoreSettings(
            endpoint=config.endpoint,
            region=config.region,
            access_key_id=key.read() if key is not None else None,
            secret_access_key=secret.read() if secret is not None else None,
        )
        bucket = Bucket(config.url, settings)
        return cls(config.url, clock, max_buffer_bytes=config.max_buffer_bytes, shard=index, bucket=bucket)

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def rows(self) -> list[Row]:
        """The rows waiting, as tuples, oldest first."""
        return self._buffer.rows()

    def flush(self) -> list[Path | str]:
        """Write every buffered row now (one file per hour partition).

        Returns:
            the files made visible. On an I/O error the rows are kept for the next flush; rows that cannot
            be written at all are dropped and counted (see the module docstring).
        """
        written, kept = self._write_all(self._take())
        self._keep(kept)
        return written

    async def flush_async(self) -> list[Path | str]:
        """``flush`` with the writing in the archive's own worker thread, so the event loop keeps polling
        while Parquet is encoded and a burst of scrapes (gzip) or password checks never queues ahead of it.
        The buffer is taken and given back on the loop: the thread only reads rows no one adds to."""
        buffer = self._take()
        job = _executor().submit(self._write_all, buffer)
        try:
            written, kept = await asyncio.wrap_future(job)
        except asyncio.CancelledError:
            # Stopping mid-flush: the taken rows must not go with the task. A write not yet begun gives
            # them back; one under way is waited for (the final flush comes next).
            written, kept = ([], buffer) if job.cancel() else job.result()
            self._keep(kept)
            raise
        self._keep(kept)
        return written

    def _take(self) -> Buffer:
        self._fold(self._buffer)  # here, not in the writing thread: only the loop counts and sheds
        buffer, self._buffer = self._buffer, Buffer(self._buffer.chunk)
        return buffer

    def _keep(self, older: Buffer | None) -> None:
        """Put the rows of a flush that failed on I/O back before the rows buffered since."""
        if older is None:
            return
        self._buffer.prepend(older)
        self._fold(self._buffer)

    def _write_all(self, buffer: Buffer) -> tuple[list[Path | str], Buffer | None]:
        """Write ``buffer``: the files made visible, and the buffer again when an I/O error means its rows
        are to be kept."""
        buffer.fold()
        if not len(buffer):
            return [], None
        try:
            written = [self._write(hour, part) for hour, part in _by_hour(buffer).items()]
        except OSError as e:
            self.write_errors += 1
            log.error(
                "archive flush to %s failed, %d rows kept for the next try: %s", self.root, len(buffer), e
            )
            return [], buffer
        except Exception as e:  # a row the schema cannot hold: find it, drop it, write the rest
            self.write_errors += 1
            rows = buffer.rows()
            good = [row for row in rows if _writable(row)]
            if len(good) == len(rows):  # not a row's fault: retrying the same rows would fail forever
                self._drop("write_failed", len(rows))
                log.error("archive flush failed (%r); its %d rows dropped", e, len(rows))
                return [], None
            self._drop("unwritable", len(rows) - len(good))
            log.error("archive flush failed (%r); %d unwritable rows dropped", e, len(rows) - len(good))
            retry = Buffer(buffer.chunk)
            retry.recent = good
            return self._write_all(retry)
        self.rows_written += len(buffer)
        return written, None

    def _drop(self, reason: str, n: int) -> None:
        if n <= 0:
            return
        self.rows_dropped[reason] = self.rows_dropped.get(reason, 0) + n
        _limited.log(
            logging.ERROR,
            ("dropped", reason),
            "archive: dropped %d rows (%s); %d dropped so far",
            n,
            reason,
            sum(self.rows_dropped.values()),
        )

    async def run(self, interval: float) -> None:
        """Flush every ``interval`` seconds until cancelled; the caller flushes once more at shutdown."""
        while True:
            await self.clock.sleep(interval)
            try:
                await self.flush_async()
            except Exception:
                self.write_errors += 1
                log.exception("archive flush failed")

    def _write(self, hour_ns: int, rows: Buffer) -> Path | str:
        relative = layout.folder(_utc(hour_ns))
        if self.shard is not None:
            relative = f"{layout.shard_folder(self.shard)}/{relative}"
        self._seq += 1
        name = f"{self.writer}-{self._seq:06d}.parquet"
        data = parquet.encode(_columns(rows))
        if self.bucket is not None:
            key = f"{relative}/{name}"
            self.bucket.put(key, data)
            return f"{self.bucket.url.rstrip('/')}/{key}"
        folder = Path(self.root) / relative
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / name
        tmp = folder / f".{final.name}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        return final


_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="archive")
    return _pool


def _writable(row: Row) -> bool:
    """Whether the schema can hold ``row`` (times fit int64 nanoseconds, the counter fits uint64, every
    string is text; a row of another shape cannot be held either)."""
    try:
        time_ns, received_ns, device, source, metric, labels, link, value, counter = row
        texts = [device, source, metric, *(v for _, v in labels)] + ([] if link is None else [link])
    except (TypeError, ValueError):
        return False
    return (
        isinstance(time_ns, int)
        and isinstance(received_ns, int)
        and -(2**63) <= time_ns < 2**63
        and -(2**63) <= received_ns < 2**63
        and all(map(parquet.is_text, texts))
        and _is_double(value)
        and (counter is None or (isinstance(counter, int) and 0 <= counter <= MAX64))
    )


def _is_double(value: object) -> bool:
    """Whether the value column (float64) holds ``value``: a float, or an integer within a double's range."""
    if isinstance(value, float):
        return True
    try:
        return isinstance(value, int) and math.isfinite(float(value))
    except OverflowError:
        return False


def _by_hour(buffer: Buffer) -> dict[int, Buffer]:
    """The rows of each hour partition: the whole buffer, but at the turn of an hour."""
    first, last = min(buffer.time), max(buffer.time)
    if first - first % _HOUR_NS == last - last % _HOUR_NS:
        return {first - first % _HOUR_NS: buffer}
    hours: dict[int, list[int]] = defaultdict(list)
    for i, t in enumerate(buffer.time):
        hours[t - t % _HOUR_NS].append(i)
    return {hour: buffer.gather(rows) for hour, rows in hours.items()}


def _columns(buffer: Buffer) -> list[parquet.Column]:
    """The buffered rows as the archive's columns (``layout.COLUMNS``, in order)."""
    buffer.fold()
    # Rows repeat a few thousand label sets: each label column is its values per distinct set, gathered per row.
    index: dict[Labels, int] = {pairs: i for i, pairs in enumerate(dict.fromkeys(buffer.labels))}
    ids = list(map(index.__getitem__, buffer.labels))
    spread = [dict(pairs) for pairs in index]
    data: dict[str, Any] = {
        "time": buffer.time,
        "received_time": buffer.received,
        "device": buffer.device,
        "source": buffer.source,
        "metric": buffer.metric,
        "link": buffer.link,
        "value": buffer.value,
        "counter": parquet.Masked(buffer.counter, bytes(buffer.present)),
    }
    for name in SERIES_LABELS:
        data[name] = parquet.Gathered([labels.get(name) for labels in spread], ids)
    return [(name, kind, data[name]) for name, kind in layout.COLUMNS]


class Buffer:
    """Rows waiting for a flush, a column each: 73.5 bytes a row measured (``ROW_BYTES``), where a row tuple
    and the numbers it holds cost 268 (the archive holds a flush interval of readings: ~12k rows at 200
    SNMP targets).

    Rows arrive as tuples (``add`` stays one append on the ingest path) and move into the columns
    ``chunk`` at a time, a C-level pass a field: the pass a flush paid before, paid earlier. A row a
    column cannot hold (a time that is not a 64-bit integer, a value that is not a number, a counter out
    of 64 bits) is dropped there and counted (``unwritable``); strings are checked when a file is written.
    """

    def __init__(self, chunk: int = CHUNK_ROWS) -> None:
        self.chunk = chunk
        self.recent: list[Row] = []
        self.time, self.received = array("q"), array("q")
        self.device: list[str] = []
        self.source: list[str] = []
        self.metric: list[str] = []
        self.labels: list[Labels] = []
        self.link: list[str | None] = []
        self.value = array("d")
        self.counter = array("Q")
        self.present = bytearray()  # 1 where the row has a counter
        self.unwritable = 0

    def __len__(self) -> int:
        return len(self.time) + len(self.recent)

    def _columns(self) -> tuple[Any, ...]:
        return (
            self.time, self.received, self.value, self.counter, self.present,
            self.device, self.source, self.metric, self.labels, self.link,
        )  # fmt: skip

    def fold(self) -> None:
        """Move the rows that came as tuples into the columns."""
        rows, self.recent = self.recent, []
        if not rows:
            return
        size = len(self.time)
        try:
            self._extend(rows)
        except Exception:  # a row a column cannot hold (of any shape: ``add`` must never raise): find it
            self._truncate(size)
            good = [row for row in rows if _writable(row)]
            self.unwritable += len(rows) - len(good)
            self._extend(good)

    def _extend(self, rows: list[Row]) -> None:
        self.time.extend(map(_TIME, rows))
        self.received.extend(map(_RECEIVED, rows))
        self.value.extend(map(_VALUE, rows))
        counters = list(map(_COUNTER, rows))
        self.counter.extend([c or 0 for c in counters])
        self.present.extend(map(operator.is_not, counters, repeat(None)))
        refs: tuple[list[Any], ...] = (self.device, self.source, self.metric, self.labels, self.link)
        for column, field in zip(refs, _REFS, strict=True):
            column.extend(map(field, rows))

    def _truncate(self, size: int) -> None:
        for column in self._columns():
            del column[size:]

    def drop_oldest(self, n: int) -> None:
        for column in self._columns():
            del column[:n]

    def prepend(self, older: Buffer) -> None:
        """Put ``older``'s rows (a failed flush's) before this buffer's."""
        older.fold()
        for mine, theirs in zip(self._columns(), older._columns(), strict=True):
            mine[:0] = theirs

    def gather(self, rows: list[int]) -> Buffer:
        """A buffer of the rows at positions ``rows``."""
        self.fold()
        out = Buffer(self.chunk)
        for mine, theirs in zip(out._columns(), self._columns(), strict=True):
            mine.extend(map(theirs.__getitem__, rows))
        return out

    def rows(self) -> list[Row]:
        """The rows as tuples, oldest first (a failed write's search for the row at fault; tests)."""
        self.fold()
        counters = [c if p else None for c, p in zip(self.counter, self.present, strict=True)]
        return list(
            zip(
                self.time,
                self.received,
                self.device,
                self.source,
                self.metric,
                self.labels,
                self.link,
                self.value,
                counters,
                strict=True,
            )
        )


def _utc(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).strftime("%Y-%m-%dT%H")
