"""The archive's layout and columns: the one description the writer and every reader derive from.

``<archive>/[shard=I/]date=YYYY-MM-DD/hour=HH/<writer-id>-<seq>.parquet``: one row per reading (``shard=I``
when sharded collectors write side by side). The writer
(``collector.exporters.parquet``) builds its Parquet schema from ``COLUMNS`` and the analyzer its polars
schema, each through its own type table, so the two cannot drift apart. No dataframe library is imported here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from collector.contracts.catalog import SERIES_LABELS

ColumnType = Literal["timestamp", "string", "float64", "uint64"]
"""``timestamp``: nanoseconds since the epoch, UTC."""

LABEL_COLUMNS: tuple[str, ...] = (*SERIES_LABELS, "link")
"""The series labels as columns, and the link a member interface belongs to."""

SERIES_KEYS: tuple[str, ...] = ("device", "metric", *LABEL_COLUMNS)
"""The columns that identify one time series."""

COLUMNS: tuple[tuple[str, ColumnType], ...] = (
    ("time", "timestamp"),  # device time where the protocol carries it, else the collector's
    ("received_time", "timestamp"),  # the collector's clock when the reading arrived
    ("device", "string"),
    ("source", "string"),  # snmp | gnmi
    ("metric", "string"),  # a catalogue name
    *((name, "string") for name in LABEL_COLUMNS),
    ("value", "float64"),  # in catalogue units
    ("counter", "uint64"),  # counters only: the exact total behind ``value``
)

FILE_GLOB = "date=*/hour=*/*.parquet"
"""The data files under an archive root (hidden ``.name.tmp`` files are being written)."""

FILE_GLOBS: tuple[str, ...] = (FILE_GLOB, f"shard=*/{FILE_GLOB}")
"""The data files of an unsharded and of a sharded archive (both may be read together)."""

PARTITION_GLOBS: tuple[str, ...] = ("date=*/hour=*", "shard=*/date=*/hour=*")
"""The hour partition folders, unsharded and sharded."""


def shard_folder(index: int) -> str:
    """The folder of replica ``index``'s files (``--shard I/N``)."""
    return f"shard={index}"


def is_data_key(key: str) -> bool:
    """Whether an object key (relative to the archive root) is a visible data file of the layout."""
    parts = key.split("/")
    if parts and parts[0].startswith("shard="):
        parts = parts[1:]
    return (
        len(parts) == 3
        and parts[0].startswith("date=")
        and parts[1].startswith("hour=")
        and parts[2].endswith(".parquet")
        and not parts[2].startswith(".")
    )


def folder(utc_stamp: str) -> str:
    """The partition folder of a reading, from its ``YYYY-MM-DDTHH...`` UTC time stamp."""
    return f"date={utc_stamp[:10]}/hour={utc_stamp[11:13]}"


def hour_of(path: Path) -> str:
    """``YYYY-MM-DDTHH`` of a data file, from its partition folders."""
    return f"{path.parent.parent.name.removeprefix('date=')}T{path.parent.name.removeprefix('hour=')}"


def data_files(root: Path) -> list[Path]:
    """The archive's visible data files, in hour order (then by path)."""
    found = (p for pattern in FILE_GLOBS for p in root.glob(pattern) if not p.name.startswith("."))
    return sorted(found, key=lambda p: (hour_of(p), str(p)))  # time order across shards
