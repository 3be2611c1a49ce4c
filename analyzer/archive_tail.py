"""Follow the collector's Parquet archive as it is flushed: the readings of the files that appeared since
the last read.

A file becomes visible only complete and never changes (spec: interfaces.md, "The archive"), so a file
read once is done with. Only the hour partitions at or after ``since`` are listed, so a long archive is
never walked whole; the names already read are forgotten with their partition.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl

from analyzer import network, schemas, telemetry
from collector.contracts import archive as layout


class ArchiveTail:
    """The new readings of one archive directory.

    Args:
        root: the archive directory (it may not exist yet).
        metrics: catalogue names to keep (default: what the analysis reads).
    """

    def __init__(self, root: Path, metrics: frozenset[str] = network.NEEDED) -> None:
        self.root = root
        self.metrics = sorted(metrics)
        self._seen: dict[str, set[str]] = {}  # partition "YYYY-MM-DDTHH" -> file names read
        self.skipped = 0  # files that could not be read (``telemetry.file_problem`` logs why, once)

    def _new_files(self, since: datetime | None) -> list[Path]:
        floor = since.strftime("%Y-%m-%dT%H") if since is not None else ""
        folders = [p for p in self.root.glob("date=*/hour=*") if p.is_dir()]
        slots = {layout.hour_of(p / "x"): p for p in folders}
        for gone in [slot for slot in self._seen if slot < floor]:
            del self._seen[gone]
        new = []
        for slot, folder in sorted(slots.items()):
            if slot < floor:
                continue
            seen = self._seen.setdefault(slot, set())
            for path in sorted(folder.glob("*.parquet")):
                if path.name.startswith(".") or path.name in seen:
                    continue
                seen.add(path.name)
                if telemetry.file_problem(path) is None:
                    new.append(path)
                else:
                    self.skipped += 1
        return new

    def read(self, since: datetime | None = None) -> pl.DataFrame:
        """The readings of the files flushed since the last read, at or after ``since``.

        Args:
            since: older readings are not wanted (aware datetime), or None for all.

        Returns:
            ``schemas.TELEMETRY`` rows of the wanted metrics.
        """
        files = self._new_files(since)
        if not files:
            return pl.DataFrame(schema=schemas.TELEMETRY)
        frame = pl.scan_parquet(files, missing_columns="insert").filter(pl.col("metric").is_in(self.metrics))
        if since is not None:
            frame = frame.filter(pl.col("time") >= since)
        return schemas.conform_lazy(schemas.TELEMETRY, frame).collect()
