"""The archive's layout and columns: the one description the writer and every reader derive from.

``<archive>/date=YYYY-MM-DD/hour=HH/<writer-id>-<seq>.parquet``: one row per reading. The writer builds its
Arrow schema from ``COLUMNS`` and the analyzer its polars schema, each through its own type table, so the
two cannot drift apart. No dataframe library is imported here.
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


def folder(utc_stamp: str) -> str:
    """The partition folder of a reading, from its ``YYYY-MM-DDTHH...`` UTC time stamp."""
    return f"date={utc_stamp[:10]}/hour={utc_stamp[11:13]}"


def hour_of(path: Path) -> str:
    """``YYYY-MM-DDTHH`` of a data file, from its partition folders."""
    return f"{path.parent.parent.name.removeprefix('date=')}T{path.parent.name.removeprefix('hour=')}"


def data_files(root: Path) -> list[Path]:
    """The archive's visible data files, sorted."""
    return sorted(p for p in root.glob(FILE_GLOB) if not p.name.startswith("."))
