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
import os
import socket
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING

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

ROW_BYTES = 280  # measured: 1,000,000 buffered rows = 268 MB of RSS (findings 2026-12-01, F16)
DEFAULT_MAX_BUFFER_BYTES = 256 * 1024 * 1024

LABEL_COLUMNS = layout.LABEL_COLUMNS

Row = ArchiveRow
_HOUR_NS = 3600 * 10**9


def writer_id() -> str:
    """A name no other writer uses: host, process and start time."""
    host = socket.gethostname().split(".")[0] or "host"
    return f"{host}-{os.getpid()}-{SystemClock().time_ns() // 10**6:x}"


class Archive:
    """Buffers rows (``add`` is on the ingest hot path: one tuple append) and writes Parquet files.

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
        self._rows: list[Row] = []
        self._seq = 0
        self.rows_written = 0
        self.write_errors = 0
        self.rows_dropped: dict[str, int] = {}  # reason -> rows dropped without being written

    def add(self, row: Row) -> None:
        rows = self._rows
        rows.append(row)
        if len(rows) > self.max_rows:
            self._shed()

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
        return len(self._rows)

    def flush(self) -> list[Path | str]:
        """Write every buffered row now (one file per hour partition).

        Returns:
            the files made visible. On an I/O error the rows are kept for the next flush; rows that cannot
            be written at all are dropped and counted (see the module docstring).
        """
        rows, self._rows = self._rows, []
        if not rows:
            return []
        try:
            written = self._write_all(rows)
        except OSError as e:
            self.write_errors += 1
            self._rows = rows + self._rows
            if len(self._rows) > self.max_rows:
                self._shed()
            log.error(
                "archive flush to %s failed, %d rows kept for the next try: %s", self.root, len(rows), e
            )
            return []
        except Exception as e:  # a row the schema cannot hold: find it, drop it, write the rest
            self.write_errors += 1
            good = [row for row in rows if _writable(row)]
            if len(good) == len(rows):  # not a row's fault: retrying the same rows would fail forever
                self._drop("write_failed", len(rows))
                log.error("archive flush failed (%r); its %d rows dropped", e, len(rows))
                return []
            self._drop("unwritable", len(rows) - len(good))
            log.error("archive flush failed (%r); %d unwritable rows dropped", e, len(rows) - len(good))
            self._rows = good + self._rows
            return self.flush()
        self.rows_written += len(rows)
        return written

    def _write_all(self, rows: list[Row]) -> list[Path | str]:
        return [self._write(hour, part) for hour, part in _by_hour(rows).items()]

    def _shed(self) -> None:
        """Drop the oldest rows down to 90 % of the cap (in one slice, not one row per ``add``)."""
        excess = len(self._rows) - self.max_rows * 9 // 10
        del self._rows[:excess]
        self._drop("buffer_full", excess)

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

    async def flush_async(self) -> list[Path | str]:
        """``flush`` in the archive's own worker thread, so the event loop keeps polling while Parquet is
        encoded and a burst of scrapes (gzip) or password checks never queues ahead of it."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_executor(), self.flush)

    async def run(self, interval: float) -> None:
        """Flush every ``interval`` seconds until cancelled; the caller flushes once more at shutdown."""
        while True:
            await self.clock.sleep(interval)
            try:
                await self.flush_async()
            except Exception:
                self.write_errors += 1
                log.exception("archive flush failed")

    def _write(self, hour_ns: int, rows: Sequence[Row]) -> Path | str:
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
        and isinstance(value, float)
        and (counter is None or (isinstance(counter, int) and 0 <= counter <= MAX64))
    )


def _by_hour(rows: list[Row]) -> dict[int, list[Row]]:
    parts: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        parts[row[0] - row[0] % _HOUR_NS].append(row)
    return parts


def _columns(rows: Sequence[Row]) -> list[parquet.Column]:
    """The rows as the archive's columns (``layout.COLUMNS``, in order)."""
    # One C-level pass a field (``zip(*rows)`` costs several times more on a flush's 1e5 rows).
    fields = (list(map(itemgetter(k), rows)) for k in range(9))
    time, received, device, source, metric, label_sets, link, value, counter = fields
    # Rows repeat a few thousand label sets: each label column is its values per distinct set, gathered per row.
    index: dict[Labels, int] = {pairs: i for i, pairs in enumerate(dict.fromkeys(label_sets))}
    ids = list(map(index.__getitem__, label_sets))
    spread = [dict(pairs) for pairs in index]
    data: dict[str, Sequence[object] | parquet.Gathered] = {
        "time": time,
        "received_time": received,
        "device": device,
        "source": source,
        "metric": metric,
        "link": link,
        "value": value,
        "counter": counter,
    }
    for name in SERIES_LABELS:
        data[name] = parquet.Gathered([labels.get(name) for labels in spread], ids)
    return [(name, kind, data[name]) for name, kind in layout.COLUMNS]


def _utc(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).strftime("%Y-%m-%dT%H")
