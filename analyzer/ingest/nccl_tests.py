"""nccl-tests result tables (``all_reduce_perf`` & co.) -> ``collectives`` and ``nccl_ranks``.

The table is announced by a commented header whose last two lines name the columns::

    #                                             out-of-place                       in-place
    #  size  count  type  redop  root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    #   (B) (elements)                    (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
          8      2 float    sum    -1    36.29    0.00    0.00      0    35.60    0.00    0.00      0

Columns are read from the header rather than assumed, because they changed over versions and options
(``root`` was added; ``#wrong`` replaced ``error``; ``-C 1`` names the time ``cputime``; 2.17+ adds
``#bitdiff`` with bitwise checks, ``i_min i_max i_p99 i_cv%`` per-iteration columns and a trailing
``timestamp`` column, whose value is two fields, date and time). Each timing group starts at its ``time``
column; each data row gives two rows, out-of-place and in-place (``in_place``); a row with fewer timing groups
gives fewer. ``time`` is the mean over the iterations, in microseconds. ``#wrong`` is ``N/A`` with ``-c 0``
and printed with ``%g`` (``1.2e+06``) when large. ``#  Rank  0 Group  0 Pid 1234 on host device  0 [0x07]
...`` lines give ``nccl_ranks``. The collective comes from ``# Collective test starting: all_reduce_perf``
(newer versions) or the file name, else stays null. A launcher's line prefix (``srun -l``'s ``N: ``,
pdsh's ``host: ``) is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analyzer.ingest._common import LAUNCHER_PREFIX, Malformed, ParseResult, RowBuffer, numbered_lines

NAME = "nccl_tests"

_HEADER = re.compile(r"^#\s+size\s+count\s+type\b")
_DEVICE = re.compile(
    r"^#\s+Rank\s+(?P<rank>\d+)\s+Group\s+\d+\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+device\s+(?P<dev>\d+)"
    r"\s+\[(?P<bus>[^\]]+)\]"
)
_COLLECTIVE = re.compile(
    r"(all_reduce|all_gather|alltoall|broadcast|reduce_scatter|reduce|sendrecv|scatter|gather|hypercube)_perf"
)
_TIMING = ("time", "algbw", "busbw")
_TIME_COLUMNS = ("time", "cputime")  # "cputime" with -C 1 (report_cputime)
_LAUNCHER = re.compile(rf"^{LAUNCHER_PREFIX}")  # srun -l, pdsh, torchrun: stripped before anything else
# nccl-tests 2.17+ per-iteration columns, in microseconds, and the schema column each fills.
_ITERATION = {
    "i_min": "iteration_min_seconds",
    "i_max": "iteration_max_seconds",
    "i_p99": "iteration_p99_seconds",
}


def sniff(lines: Sequence[str]) -> float:
    """Score how likely the head of a file is nccl-tests output.

    Args:
        lines: the first lines of the file.

    Returns:
        1.0 with a result-table header, 0.5 with nccl-tests' ``# nThread`` banner, else 0.
    """
    clean = [_LAUNCHER.sub("", line, count=1) for line in lines]
    if any(_HEADER.match(line) for line in clean):
        return 1.0
    if any(line.startswith("# nThread ") for line in clean):
        return 0.5
    return 0.0


def _columns(header: str) -> list[str]:
    """Column names of the data rows, in order ("#wrong"/"error" kept as named)."""
    return header.lstrip("#").split()


def _number(text: str | None) -> float | None:
    return None if text in (None, "N/A", "-", "") else float(text)


def _seconds(microseconds: str | None) -> float | None:
    value = _number(microseconds)
    return value / 1e6 if value is not None else None


def _rows_of(values: list[str], columns: list[str], collective: str | None) -> list[dict[str, Any]]:
    """Turn one data row into out-of-place / in-place collective rows; raises ValueError if malformed."""
    if columns[-1] == "timestamp" and len(values) == len(columns) + 1:
        values = [*values[:-2], " ".join(values[-2:])]  # "2025-01-02 03:04:05" is one column
    if len(values) != len(columns):
        raise ValueError(f"{len(values)} fields where the header names {len(columns)}")
    fixed: dict[str, str] = {}
    groups: list[dict[str, str]] = []
    for name, value in zip(columns, values, strict=True):
        if name in _TIME_COLUMNS:
            groups.append({})
            name = "time"
        (groups[-1] if groups else fixed)[name] = value
    rows = []
    for index, group in enumerate(groups):
        if not all(key in group for key in _TIMING):
            raise ValueError("timing group without time, algbw and busbw")
        wrong = group.get("#wrong")
        cv_percent = _number(group.get("i_cv%"))
        rows.append(
            {
                "collective": collective,
                "size_bytes": float(fixed["size"]),
                "elements": int(fixed["count"]),
                "dtype": fixed.get("type"),
                "in_place": index == 1,
                "duration_seconds": _seconds(group["time"]),
                "algbw_gbps": _number(group["algbw"]),
                "busbw_gbps": _number(group["busbw"]),
                "wrong": int(float(wrong)) if wrong not in (None, "N/A") else None,
                "occurrences": 1,
                **{column: _seconds(group.get(name)) for name, column in _ITERATION.items()},
                "iteration_cv": cv_percent / 100 if cv_percent is not None else None,
            }
        )
    return rows


def parse(path: Path) -> ParseResult:
    """Parse nccl-tests output, streaming; several tables (several runs) in one file are fine.

    Args:
        path: the output (plain or gzip).

    Returns:
        ``collectives`` (two rows per size: out-of-place and in-place), ``nccl_ranks`` from the device list,
        and malformed data rows.

    Raises:
        UnreadableFileError: the file cannot be opened or decompressed.
    """
    collectives = RowBuffer("collectives", str(path), NAME)
    ranks = RowBuffer("nccl_ranks", str(path), NAME)
    problems: list[Malformed] = []
    columns: list[str] | None = None
    named = _COLLECTIVE.search(path.name)
    collective = named.group(1) if named else None
    lines = data_rows = 0
    for number, raw in numbered_lines(path):
        lines = number
        line = _LAUNCHER.sub("", raw, count=1)
        if line.startswith("#"):
            columns = _columns(line) if _HEADER.match(line) else columns
            collective = _collective_from(line, collective)
            _add_device(line, ranks)
            continue
        values = line.split()
        # A data row starts with the size, an integer; anything else is other output (warnings, env dumps).
        if columns is None or not values or not values[0].isdigit():
            continue
        try:
            for row in _rows_of(values, columns, collective):
                collectives.add(row)
            data_rows += 1
        except (ValueError, KeyError) as exc:
            problems.append(Malformed(str(path), number, f"result row: {exc}"))
    tables = {"collectives": collectives.frame(), "nccl_ranks": ranks.frame()}
    return ParseResult(path, [NAME], tables, problems, lines, {"result_rows": data_rows})


def _collective_from(line: str, current: str | None) -> str | None:
    if "Collective test starting" in line:
        match = _COLLECTIVE.search(line)
        return match.group(1) if match else current
    return current


def _add_device(line: str, ranks: RowBuffer) -> None:
    match = _DEVICE.match(line)
    if match:
        ranks.add(
            {
                "rank": int(match["rank"]),
                "host": match["host"],
                "pid": int(match["pid"]),
                "cuda_device": int(match["dev"]),
                "bus_id": match["bus"],
            }
        )
