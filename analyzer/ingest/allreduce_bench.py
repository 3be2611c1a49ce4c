"""bigscience's ``all_reduce_bench.py`` output -> ``collectives`` (one row per ``busbw`` line).

The script all-reduces one fixed payload a few times on every rank and prints, per rank and trial, a record
of four lines, and once per rank the payload::

    0 data size: 4.0 GB
    6:
     duration: 3.9563 sec
     algo throughput: 16176643777.3540 bps, 16.1766 Gbps
     busbw: 15.6711  Gbps

Rates are bits per second (``Gbps``; ``GBps`` would be bytes and is read as such). Its "algo throughput"
counts the payload twice (2 x size / time); nccl-tests' algbw, the schema's, is size / time, so it is halved.
Every rank prints at once, so on a multi-node run records of different ranks interleave line by line. Each
value line goes to the oldest record still missing that value (a value line with no record open is
malformed); every ``busbw`` line is one row with its bus bandwidth, and the rank, duration and algbw are
kept only for a record whose four lines were printed with no other record's line between them, where the
pairing is certain. ``counts``: ``result_rows`` (busbw lines read), ``interleaved`` (rows without rank).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.ingest._common import Malformed, ParseResult, RowBuffer, numbered_lines

NAME = "allreduce_bench"

_LABEL = re.compile(r"^(?P<rank>\d+):$")
_SIZE = re.compile(r"^\d+ data size: (?P<gb>[\d.]+) GB$")
_VALUE = re.compile(
    r"^\s*(?:(?P<duration>duration): (?P<seconds>\S+) sec"
    r"|(?P<algo>algo throughput): \S+ bps, (?P<algo_rate>\S+) (?P<algo_unit>Gbps|GBps)"
    r"|(?P<busbw>busbw): (?P<bus_rate>\S+)\s+(?P<bus_unit>Gbps|GBps))\s*$"
)
_BITS_PER_BYTE = {"Gbps": 8.0, "GBps": 1.0}


def sniff(lines: Sequence[str]) -> float:
    """Score how likely the head of a file is ``all_reduce_bench.py`` output.

    Args:
        lines: the first lines of the file.

    Returns:
        1.0 with both an ``algo throughput:`` and a ``busbw:`` line, else 0.
    """
    kinds = {match.lastgroup for line in lines if (match := _VALUE.match(line))}
    return 1.0 if {"algo_unit", "bus_unit"} <= kinds else 0.0


@dataclass
class _Record:
    """One rank's record while its lines arrive: its rank, values, and the record-line order of each line."""

    rank: int
    line: int
    values: dict[str, float] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)

    def adjacent(self) -> bool:
        """True when no other record's line came between this record's lines."""
        return self.order == list(range(self.order[0], self.order[0] + len(self.order)))


def _value(match: re.Match[str]) -> tuple[str, float]:
    """The kind of a value line and its value in the schema's unit (seconds, GB/s); ValueError if not a number."""
    if match["duration"]:
        return "duration", float(match["seconds"])
    if match["algo"]:
        return "algo", float(match["algo_rate"]) / _BITS_PER_BYTE[match["algo_unit"]] / 2
    return "busbw", float(match["bus_rate"]) / _BITS_PER_BYTE[match["bus_unit"]]


def parse(path: Path) -> ParseResult:
    """Parse ``all_reduce_bench.py`` output, streaming.

    Args:
        path: the output (plain or gzip).

    Returns:
        ``collectives`` (one row per busbw line) and every malformed or unpaired record line.

    Raises:
        UnreadableFileError: the file cannot be opened or decompressed.
    """
    rows = RowBuffer("collectives", str(path), NAME)
    problems: list[Malformed] = []
    open_records: list[_Record] = []
    size_bytes: float | None = None
    lines = order = read = interleaved = 0
    for number, line in numbered_lines(path):
        lines = number
        if size := _SIZE.match(line):
            size_bytes = float(size["gb"]) * 1e9
        elif label := _LABEL.match(line):
            open_records.append(_Record(int(label["rank"]), number, order=[order]))
            order += 1
        elif match := _VALUE.match(line):
            try:
                kind, value = _value(match)
            except ValueError as exc:
                problems.append(Malformed(str(path), number, f"{line.strip()}: {exc}"))
                continue
            record = next((r for r in open_records if kind not in r.values), None)
            if record is None:
                problems.append(
                    Malformed(str(path), number, f"{kind} line with no rank record open before it")
                )
                continue
            record.values[kind] = value
            record.order.append(order)
            order += 1
            if kind == "busbw":
                open_records.remove(record)
                certain = record.adjacent() and len(record.values) == 3
                read += 1
                interleaved += not certain
                rows.add(_row(record, size_bytes, certain))
    problems += [
        Malformed(str(path), r.line, f"rank {r.rank}: record without a busbw line") for r in open_records
    ]
    counts = {"result_rows": read, "interleaved": interleaved}
    return ParseResult(path, [NAME], {"collectives": rows.frame()}, problems, lines, counts)


def _row(record: _Record, size_bytes: float | None, certain: bool) -> dict[str, object]:
    values = record.values
    return {
        "collective": "all_reduce",
        "size_bytes": size_bytes,
        "rank": record.rank if certain else None,
        "duration_seconds": values.get("duration") if certain else None,
        "algbw_gbps": values.get("algo") if certain else None,
        "busbw_gbps": values["busbw"],
        "occurrences": 1,
    }
