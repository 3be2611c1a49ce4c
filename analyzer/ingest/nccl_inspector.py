"""NCCL Inspector plugin output -> ``collectives`` (one row per collective or P2P operation, communicator, rank).

The Inspector (``ext-profiler/inspector``, later ``plugins/profiler/inspector`` in NCCL) writes JSON objects::

    {"header": {"id": "0x7f..", "rank": 2, "n_ranks": 8, "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": ..., "hostname": "h", ...},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
                   "coll_exec_time_us": 61974, "coll_timing_source": "kernel_gpu",
                   "coll_algobw_gbs": 277.2, "coll_busbw_gbs": 485.1, "event_trace_ts": {...}}}

Format versions differ, and every one is read:

* v4.0 keeps one completed collective per communicator and writes it at each dump: a *sample* (gaps in
  ``coll_sn`` are operations never written);
* later versions (v4.2 in NCCL's source) drain a ring of completed operations per dump and add
  ``p2p_perf`` records (``p2p``, ``p2p_sn``, ``p2p_exec_time_us``...) and ``dump_stats`` markers with
  ring-overflow counts (summed into the ``inspector_dropped`` count);
* v4.3 writes ``header`` and ``metadata`` once, on a ``dump_stats`` marker, and bare ``{"coll_perf": ...}``
  records after it: those inherit the last marker's context. ``proxy_trace`` records (CPU proxy-thread
  timings, not operations) are counted and skipped.

Field names moved between versions, so each value is looked up under its known aliases (with and without
the ``coll_`` prefix, nested or flat), and objects may be one per line (JSONL) or pretty-printed over several
lines: the stream is decoded object by object, never loaded whole. An object without an operation name,
size or time is malformed (reported at the line it starts on).

Times: ``duration_seconds`` is the Inspector's execution time (the longest channel of the kernel, GPU-timed
when ``timing_source`` is ``kernel_gpu``). ``start_time`` is the CPU call that enqueued the operation
(``coll_start_ts``, only in verbose output, ``NCCL_INSPECTOR_DUMP_VERBOSE=1``); ``dump_time`` is when the
record was written, which is after the operation ended. Both are the host's wall clock (microseconds).
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
    "collective": ("coll", "collective", "coll_name", "p2p"),
    "size": (
        "coll_msg_size_bytes",
        "msg_size_bytes",
        "message_size_bytes",
        "coll_msg_size",
        "p2p_msg_size_bytes",
    ),
    "time_us": (
        "coll_exec_time_us",
        "exec_time_us",
        "coll_exec_time",
        "execution_time_us",
        "p2p_exec_time_us",
    ),
    "algbw": ("coll_algobw_gbs", "algobw_gbs", "coll_algbw_gbs", "algbw_gbs", "p2p_algobw_gbs"),
    "busbw": ("coll_busbw_gbs", "busbw_gbs", "p2p_busbw_gbs"),
    "sequence": ("coll_sn", "p2p_sn"),
    "timing": ("coll_timing_source", "p2p_timing_source", "timing_source"),
    "rank": ("rank",),
    "nranks": ("n_ranks", "nranks", "nRanks"),
    "comm": ("id", "comm_id", "commId"),
    "host": ("hostname", "host"),
    "pid": ("pid",),
    "start_us": ("coll_start_ts", "p2p_start_ts", "start_ts"),
    "dump_us": ("dump_timestamp_us",),
}
# Per-dump ring-overflow counts in a ``dump_stats`` marker: operations completed but never written.
_DROPPED = ("coll_dropped_since_last_dump", "p2p_dropped_since_last_dump")


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
    rank = _find(record, "rank")
    return {
        "collective": str(collective),
        "size_bytes": float(size),
        "duration_seconds": float(time_us) / 1e6,
        "timing_source": _str(_find(record, "timing")),
        "algbw_gbps": _float(_find(record, "algbw")),
        "busbw_gbps": _float(_find(record, "busbw")),
        "rank": int(rank) if rank is not None else None,
        "group_size": _int(_find(record, "nranks")),
        "process_group": _str(_find(record, "comm")),
        "host": _str(_find(record, "host")),
        "pid": _int(_find(record, "pid")),
        "sequence": _int(_find(record, "sequence")),
        "start_time": _time(_find(record, "start_us")),
        "dump_time": _time(_find(record, "dump_us")),
        "occurrences": 1,
    }


def _time(microseconds: Any) -> datetime | None:
    # The Inspector writes 0 for an event it never saw.
    return datetime.fromtimestamp(float(microseconds) / 1e6, tz=UTC) if microseconds else None


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
    counts = {"inspector_records": 0, "inspector_dropped": 0, "inspector_proxy_records": 0}
    context: dict[str, Any] = {}  # header and metadata of the last dump_stats marker (v4.3 writes them once)
    for line, record, error in _objects(path):
        try:
            if record is None:
                raise ValueError(error)
            if isinstance(record, dict) and "dump_stats" in record:
                context = {key: record[key] for key in ("header", "metadata") if key in record}
                stats = record["dump_stats"] if isinstance(record["dump_stats"], dict) else {}
                counts["inspector_dropped"] += sum(int(stats.get(key) or 0) for key in _DROPPED)
                continue
            if isinstance(record, dict) and "proxy_trace" in record:
                counts["inspector_proxy_records"] += 1
                continue
            if isinstance(record, dict) and "header" not in record:
                record = {**context, **record}
            rows.add(_row(record))
            counts["inspector_records"] += 1
        except (ValueError, TypeError) as exc:
            problems.append(Malformed(str(path), line, str(exc)))
    frame = rows.frame()
    return ParseResult(path, [NAME], {"collectives": frame}, problems, 0, counts)
