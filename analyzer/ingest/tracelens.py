"""TraceLens NCCL summary CSV -> ``collectives`` (one aggregated row per collective shape).

TraceLens (AMD) summarises NCCL kernels across ranks into rows keyed by collective, dtype, element count and
process group, with latency and bandwidth statistics (mean/median/min/max) and a ``count``. Each row
becomes one ``collectives`` row with ``occurrences`` = count, ``duration_seconds`` = mean latency (µs in
the CSV) and the mean algorithm/bus bandwidths (GB/s). Read with the csv module, row by row; a row with the
wrong number of fields or a non-numeric value is malformed.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analyzer.ingest._common import Malformed, ParseResult, RowBuffer, open_text

NAME = "tracelens_nccl"

_REQUIRED = ("Collective name", "comm_latency_mean", "count")


def sniff(lines: Sequence[str]) -> float:
    """Score how likely the head of a file is a TraceLens NCCL summary.

    Args:
        lines: the first lines of the file.

    Returns:
        1.0 if the first line is a CSV header naming TraceLens's collective columns, else 0.
    """
    first = lines[0] if lines else ""
    return 1.0 if all(column in first for column in _REQUIRED) else 0.0


def _optional(row: dict[str, str], column: str) -> float | None:
    value = row.get(column, "")
    return float(value) if value not in ("", "nan", "NaN") else None


def _row(row: dict[str, str]) -> dict[str, Any]:
    """A collectives row from a CSV record; raises ValueError on unusable numbers."""
    megabytes = _optional(row, "Full msg size (MB)")
    latency_us = float(row["comm_latency_mean"])
    elements = _optional(row, "In msg nelems")
    group = _optional(row, "Group size")
    return {
        "collective": row["Collective name"],
        "dtype": row.get("dtype") or None,
        "elements": int(elements) if elements is not None else None,
        "size_bytes": megabytes * 1024 * 1024 if megabytes is not None else None,
        "group_size": int(group) if group is not None else None,
        "process_group": row.get("Process Group Name") or None,
        "duration_seconds": latency_us / 1e6,
        "algbw_gbps": _optional(row, "algo bw (GB/s)_mean"),
        "busbw_gbps": _optional(row, "bus bw (GB/s)_mean"),
        "occurrences": int(float(row["count"])),
    }


def parse(path: Path) -> ParseResult:
    """Parse a TraceLens NCCL summary CSV, row by row.

    Args:
        path: the CSV (plain or gzip).

    Returns:
        ``collectives`` rows and the malformed CSV rows (with their line numbers).

    Raises:
        UnreadableFileError: the file cannot be opened or decompressed.
    """
    rows = RowBuffer("collectives", str(path), NAME)
    problems: list[Malformed] = []
    with open_text(path) as stream:
        reader = csv.DictReader(stream)
        width = len(reader.fieldnames or [])
        for record in reader:
            line = reader.line_num
            if None in record or len(record) != width or any(value is None for value in record.values()):
                problems.append(Malformed(str(path), line, f"expected {width} fields"))
                continue
            try:
                rows.add(_row(record))
            except (ValueError, KeyError) as exc:
                problems.append(Malformed(str(path), line, f"bad value: {exc}"))
        lines = reader.line_num
    frame = rows.frame()
    return ParseResult(path, [NAME], {"collectives": frame}, problems, lines, {"summary_rows": frame.height})
