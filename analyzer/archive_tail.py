"""Follow the collector's Parquet archive as it is flushed: the readings of the files that appeared since
the last read.

A file becomes visible only complete and never changes (spec: interfaces.md, "The archive"), so a file
read once is done with. Only the hour partitions at or after ``since`` are listed, so a long archive is
never walked whole; the names already read are forgotten with their partition. The one exception is the
first read, which also takes each link state's last reading from the earlier hours: a state sent on change
(a wave down) may have been sent once, long before the follower started.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import weakref
from datetime import datetime
from pathlib import Path

import polars as pl

from analyzer import archive_source, network, physics, schemas, telemetry
from analyzer.errors import InputError
from collector import storage
from collector.contracts import archive as layout

log = logging.getLogger(__name__)


class ArchiveTail:
    """The new readings of one archive directory.

    Args:
        root: the archive directory (it may not exist yet), or an ``s3://bucket/prefix`` URL: its new
            objects are downloaded into a temporary folder before each read and removed once read.
        metrics: catalogue names to keep (default: what the analysis reads).
    """

    def __init__(self, root: Path | str, metrics: frozenset[str] = network.NEEDED) -> None:
        self._mirror: archive_source.Mirror | None = None
        if storage.is_url(root):
            folder = tempfile.mkdtemp(prefix="spanwatch-follow-")
            weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)  # removed with the tail
            self._mirror = archive_source.Mirror(str(root), Path(folder))
            root = Path(folder)
        self.root = Path(root)
        self.metrics = sorted(metrics)
        self._seen: dict[str, set[str]] = {}  # partition "YYYY-MM-DDTHH" -> file names read
        self._first = True  # the first read also looks for the link states sent before ``since``
        self.skipped = 0  # files that could not be read (``telemetry.file_problem`` logs why, once)
        self.fetch_errors = 0  # reads whose bucket listing or download failed

    def _new_files(self, since: datetime | None) -> list[Path]:
        floor = since.strftime("%Y-%m-%dT%H") if since is not None else ""
        slots: dict[str, list[Path]] = {}  # sharded collectors write one folder each per hour
        for pattern in layout.PARTITION_GLOBS:
            for p in self.root.glob(pattern):
                if p.is_dir():
                    slots.setdefault(layout.hour_of(p / "x"), []).append(p)
        for gone in [slot for slot in self._seen if slot < floor]:
            del self._seen[gone]
        new = []
        for slot, folders in sorted(slots.items()):
            if slot < floor:
                continue
            seen = self._seen.setdefault(slot, set())
            for path in sorted(p for folder in folders for p in folder.glob("*.parquet")):
                if path.name.startswith(".") or path.name in seen:
                    continue
                seen.add(path.name)
                if telemetry.file_problem(path) is None:
                    new.append(path)
                else:
                    self.skipped += 1
        return new

    def _earlier_states(self, since: datetime) -> pl.DataFrame | None:
        """Each link state series' last reading in the hour partitions before ``since``'s (a follower started
        while a wave is down: its "down" was sent once, maybe hours ago). Read once, at the first read."""
        if physics.UP not in self.metrics:
            return None
        floor = since.strftime("%Y-%m-%dT%H")
        older = [
            path
            for pattern in layout.PARTITION_GLOBS
            for folder in self.root.glob(pattern)
            if folder.is_dir() and layout.hour_of(folder / "x") < floor
            for path in folder.glob("*.parquet")
            if not path.name.startswith(".") and telemetry.file_problem(path) is None
        ]
        if not older:
            return None
        frame = pl.scan_parquet(older, missing_columns="insert").filter(pl.col("metric") == physics.UP)
        return physics.last_states(schemas.conform_lazy(schemas.TELEMETRY, frame).collect())

    def read(self, since: datetime | None = None) -> pl.DataFrame:
        """The readings of the files flushed since the last read, at or after ``since``, and the link states
        read before it (at the first read, each one's last in the earlier hours too: ``_earlier_states``).

        Args:
            since: older readings are not wanted (aware datetime), or None for all.

        Returns:
            ``schemas.TELEMETRY`` rows of the wanted metrics.
        """
        if self._mirror is not None:
            try:
                self._mirror.sync(since)
            except InputError as e:  # the bucket is away for now: counted, and tried again next read
                self.fetch_errors += 1
                log.warning("%s", e)
        earlier = self._earlier_states(since) if self._first and since is not None else None
        self._first = False
        files = self._new_files(since)
        if not files:
            return earlier if earlier is not None else pl.DataFrame(schema=schemas.TELEMETRY)
        frame = pl.scan_parquet(files, missing_columns="insert").filter(pl.col("metric").is_in(self.metrics))
        if since is not None:
            # A link state sent on change (gNMI ON_CHANGE oper-status) is not sent again until it changes:
            # one read before ``since`` is still the state (``live.Window`` carries the last one).
            frame = frame.filter((pl.col("time") >= since) | (pl.col("metric") == physics.UP))
        readings = schemas.conform_lazy(schemas.TELEMETRY, frame).collect()
        if earlier is not None:
            readings = pl.concat([earlier, readings], how="vertical_relaxed")
        if self._mirror is not None:  # read once: the local copy is not needed again
            for path in files:
                path.unlink(missing_ok=True)
        return readings
