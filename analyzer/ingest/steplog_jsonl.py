"""The plain step log -> ``steps``: one JSON object per line, as ``analyzer.steplog.StepLog`` writes it::

    {"step": 12, "start": "2026-11-30T10:00:01.250Z", "end": "2026-11-30T10:00:01.870Z", "rank": 0}

Times are RFC 3339 strings or epoch seconds (int or float); ``rank`` is optional (null when absent); a
``loss`` number is kept when present. A row is one measured step, or, with ``interval_steps`` N > 1, the
N steps ending at ``step`` between ``start`` and ``end`` (``interval_average``: their mean per step).

A step that timed its collectives says so in ``comm_seconds`` (or ``communication_seconds``), with the
time it waited at their entry for the other ranks in ``wait_seconds``: their sum is the step's logged
communication time, the analyzer's evidence before the step's duration (``../shared/design/
measurement.md``, section 1).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analyzer.ingest._common import Malformed, ParseResult, RowBuffer, numbered_lines, parse_wallclock

NAME = "steplog"
CLOCK_TOLERANCE_SECONDS = 1e-3


def _looks_like_step(line: str) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and "step" in record and ("start" in record or "end" in record)


def sniff(lines: Sequence[str]) -> float:
    """Score how likely the head of a file is a plain step log.

    Args:
        lines: the first lines of the file.

    Returns:
        1.0 if the first non-blank line is a JSON object with ``step`` and ``start``/``end``, else 0.
    """
    first = next((line for line in lines if line.strip()), "")
    return 1.0 if first.lstrip().startswith("{") and _looks_like_step(first) else 0.0


def _time(value: Any, key: str) -> datetime:
    # bool is an int subclass; True is not a time.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, tz=UTC)
    if isinstance(value, str):
        return parse_wallclock(value)
    raise ValueError(f"{key!r} is neither an RFC 3339 string nor epoch seconds")


def _seconds(record: dict[str, Any], *keys: str) -> float | None:
    """The first of ``keys`` present as a finite number of seconds >= 0, None when none is present."""
    for key in keys:
        if key in record:
            value = record[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise ValueError(f"{key!r} is not a number of seconds >= 0")
            return float(value)
    return None


def _row(record: Any) -> dict[str, Any]:
    """Validate one record into a steps row; raises ValueError with the reason."""
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    step, rank = record.get("step"), record.get("rank")
    if not isinstance(step, int) or isinstance(step, bool):
        raise ValueError("'step' missing or not an integer")
    if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool)):
        raise ValueError("'rank' is not an integer")
    if "start" not in record or "end" not in record:
        raise ValueError("'start' or 'end' missing")
    start, end = _time(record["start"], "start"), _time(record["end"], "end")
    if end < start:
        raise ValueError("'end' is before 'start'")
    loss = record.get("loss")
    n = record.get("interval_steps", 1)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError("'interval_steps' is not a positive integer")
    communication = _seconds(record, "comm_seconds", "communication_seconds")
    logged = None if communication is None else communication + (_seconds(record, "wait_seconds") or 0.0)
    # One step's collectives fit inside it (the tolerance covers a loop timing them on another clock).
    if logged is not None and n == 1 and logged > (end - start).total_seconds() + CLOCK_TOLERANCE_SECONDS:
        raise ValueError("'comm_seconds' + 'wait_seconds' exceed the step's own duration")
    return {
        "rank": rank,
        "step": step,
        "start_time": start,
        "end_time": end,
        "duration_seconds": (end - start).total_seconds() / n,
        "interval_average": n > 1,
        "interval_steps": n,
        "loss": float(loss) if isinstance(loss, int | float) and not isinstance(loss, bool) else None,
        "logged_communication_seconds": logged,
    }


def parse(path: Path) -> ParseResult:
    """Parse a plain step log, streaming; every line that is not a valid step record is malformed.

    Args:
        path: the JSONL file (plain or gzip).

    Returns:
        ``steps`` rows and the malformed lines.

    Raises:
        UnreadableFileError: the file cannot be opened or decompressed.
    """
    rows = RowBuffer("steps", str(path), NAME)
    problems: list[Malformed] = []
    lines = 0
    for number, line in numbered_lines(path):
        lines = number
        if not line.strip():
            continue
        try:
            rows.add(_row(json.loads(line)))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            problems.append(Malformed(str(path), number, str(exc)))
    steps = rows.frame()
    return ParseResult(path, [NAME], {"steps": steps}, problems, lines, {"step_records": steps.height})
