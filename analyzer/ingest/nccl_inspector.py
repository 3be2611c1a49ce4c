"""NCCL Inspector plugin output -> ``collectives`` (one row per collective per communicator and rank).

The Inspector (``ext-profiler/inspector`` in NCCL) writes one JSON object per collective::

    {"header": {"id": "0x7f..", "rank": 2, "n_ranks": 8, "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": ..., "hostname": "h", ...},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
                   "coll_exec_time_us": 61974, "coll_timing_source": "kernel_gpu",
                   "coll_algobw_gbs": 277.2, "coll_busbw_gbs": 485.1, "event_trace_ts": {...}}}

Field names moved between format versions, so each value is looked up under its known aliases (with and
without the ``coll_`` prefix, nested or flat), and objects may be one per line (JSONL) or pretty-printed
over several lines: the stream is decoded object by object, never loaded whole. An object without a
collective name, size or time is malformed (reported at the line it starts on).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analyzer.ingest._common import Malformed, ParseResult, RowBuffer, numbered_lines

NAME = "nccl_inspector"

_DECODER = json.JSONDecoder()
# An Inspector record is a few hundred bytes (verbose ones a few KB); a longer unfinished "object" is garbage.
_MAX_OBJECT_CHARS = 1 << 20
_ALIASES: Mapping[str, tuple[str, ...]] = {
    "collective": ("coll", "collective", "coll_name"),
    "size": ("coll_msg_size_bytes", "msg_size_bytes", "message_size_bytes", "coll_msg_size"),
    "time_us": ("coll_exec_time_us", "exec_time_us", "coll_exec_time", "execution_time_us"),
    "algbw": ("coll_algobw_gbs", "algobw_gbs", "coll_algbw_gbs", "algbw_gbs"),
    "busbw": ("coll_busbw_gbs", "busbw_gbs"),
    "rank": ("rank",),
    "nranks": ("n_ranks", "nranks", "nRanks"),
    "comm": ("id", "comm_id", "commId"),
    "host": ("hostname", "host"),
    "start_us": ("coll_start_ts", "start_ts"),
    "dump_us": ("dump_timestamp_us",),
}


def sniff(lines: Sequence[str]) -> float:
    """Score how likely the head of a file is NCCL Inspector output.

    Args:
        lines: the first lines of the file.

    Returns:
        1.0 if the head mentions ``coll_perf`` or ``inspector_output_format_version``, else 0.
    """
    head = "\n".join(lines[:200])
    return 1.0 if ('"coll_perf"' in head or '"inspector_output_format_version"' in head) else 0.0


def _find(record: Mapping[str, Any], key: str) -> Any:
    """First value under any alias of ``key``, searching the object and its nested objects breadth-first."""
    queue: list[Mapping[str, Any]] = [record]
    while queue:
        node = queue.pop(0)
        for alias in _ALIASES[key]:
            if alias in node and not isinstance(node[alias], dict | list):
                return node[alias]
        queue.extend(value for value in node.values() if isinstance(value, dict))
    return None


def _objects(path: Path) -> Iterator[tuple[int, Any | None, str]]:
    """Yield ``(start_line, object or None, error)`` for each JSON value in the stream, line-buffered."""
    buffer, start = "", 0
    for number, line in numbered_lines(path):
        if not buffer and not line.strip():
            continue
        buffer, start = (buffer + "\n" + line, start) if buffer else (line, number)
        try:
            text = buffer.strip()
            value, end = _DECODER.raw_decode(text)
        except json.JSONDecodeError as exc:
            # An incomplete object continues on the next line; a line that cannot start one is garbage.
            # Only an error at the very end means "incomplete": the object continues on the next line.
            unfinished = exc.pos >= len(text)
            if text.startswith("{") and unfinished and len(buffer) < _MAX_OBJECT_CHARS:
                continue
            yield start, None, f"not JSON: {exc.msg}"
            buffer = ""
            continue
        yield (start, value, "") if not text[end:].strip() else (start, None, "text after the JSON object")
        buffer = ""
    if buffer.strip():
        yield start, None, "truncated JSON object at end of file"


def _row(record: Any) -> dict[str, Any]:
    """A collectives row from one Inspector record; raises ValueError naming what is missing."""
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    collective, size, time_us = _find(record, "collective"), _find(record, "size"), _find(record, "time_us")
    if collective is None or size is None or time_us is None:
        raise ValueError("record without collective name, message size or execution time")
    start_us = _find(record, "start_us")
    rank = _find(record, "rank")
    return {
        "collective": str(collective),
        "size_bytes": float(size),
        "duration_seconds": float(time_us) / 1e6,
        "algbw_gbps": _float(_find(record, "algbw")),
        "busbw_gbps": _float(_find(record, "busbw")),
        "rank": int(rank) if rank is not None else None,
        "group_size": _int(_find(record, "nranks")),
        "process_group": _str(_find(record, "comm")),
        "host": _str(_find(record, "host")),
        "start_time": datetime.fromtimestamp(float(start_us) / 1e6, tz=UTC) if start_us is not None else None,
        "occurrences": 1,
    }


def _float(value: Any) -> float | None:
    return float(value) if value is not None else None


def _int(value: Any) -> int | None:
    return int(value) if value is not None else None


def _str(value: Any) -> str | None:
    return str(value) if value is not None else None


def parse(path: Path) -> ParseResult:
    """Parse NCCL Inspector output (JSONL or concatenated pretty-printed objects), streaming.

    Args:
        path: the file (plain or gzip).

    Returns:
        ``collectives`` rows and the malformed records.

    Raises:
        UnreadableFileError: the file cannot be opened or decompressed.
    """
    rows = RowBuffer("collectives", str(path), NAME)
    problems: list[Malformed] = []
    records = 0
    for line, record, error in _objects(path):
        try:
            if record is None:
                raise ValueError(error)
            rows.add(_row(record))
            records += 1
        except (ValueError, TypeError) as exc:
            problems.append(Malformed(str(path), line, str(exc)))
    frame = rows.frame()
    return ParseResult(path, [NAME], {"collectives": frame}, problems, 0, {"records": records})
