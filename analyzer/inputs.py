"""What became of every input: rows per file, and a warning for each input that could not be used, and why.

An analysis must never succeed silently on an input it ignored. Each training log is parsed on its own, so
one unrecognised or unreadable file is a warning rather than the end of the analysis, and a file that yields
no rows at all (a forced ``--log-format`` that matches nothing, a table whose rows all failed) is a warning
too. Steps without a wall clock (Megatron logs without timestamps, golden-value files) cannot be placed in
time and are never correlated with telemetry: that is said, per file. The telemetry side adds its own
warnings (an archive with no readings, files skipped). ``summary.json`` carries them (``warnings``, and
``inputs.files``); the report prints them at the top, and ``describe`` says in one line what each file gave
(rows of which table, and how many steps its interval lines stand for), ``describe_all`` in one line what a
set of alike files gave (thousands of ranks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from analyzer import frames, schemas
from analyzer.errors import IngestError, InputError
from analyzer.ingest import ParseResult, parse_file


@dataclass(frozen=True)
class InputWarning:
    """One input that could not be used, wholly or partly.

    Attributes:
        input: the file, URL or option concerned.
        problem: what was wrong and what it means for the analysis.
    """

    input: str
    problem: str

    def __str__(self) -> str:
        return f"{self.input}: {self.problem}"


@dataclass
class ParsedLogs:
    """Every log parsed, merged, with what each file gave and the warnings.

    Attributes:
        result: the merged tables of every usable file (``ParseResult`` of ``analyzer.ingest``).
        files: per file: ``path``, ``formats``, ``rows`` (table -> count, non-empty tables only), ``lines``,
            ``malformed``, ``error`` (why it could not be read, or None), ``interval_lines`` (N -> how many
            step rows are the mean of N > 1 steps: Megatron's every-N lines; the analysis reads each as N
            steps).
        warnings: the problems worth a user's attention.
    """

    result: ParseResult
    files: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[InputWarning] = field(default_factory=list)


def parse_logs(
    paths: Iterable[Path],
    log_format: str | None = None,
    parse: Callable[[Path, str | None], ParseResult] = parse_file,
    rows_read: Mapping[str, pl.Expr] | None = None,
) -> ParsedLogs:
    """Parse each log on its own, keeping what it gave; an unusable file is a warning, not an error.

    Args:
        paths: the training logs.
        log_format: force one format for all, or None to detect each.
        parse: parses one file (the Ray engine passes the results its tasks computed).
        rows_read: the rows to keep, per table (a filter); a table not named is dropped. Each file's rows
            are counted (``files``) before. None keeps every row.

    Returns:
        The merged tables, per-file counts and warnings.
    """
    merged = ParseResult(Path())
    out = ParsedLogs(merged)
    first = True
    group: list[ParseResult] = []
    alike: dict[str, Any] = {}
    for path in paths:
        try:
            result = parse(path, log_format)
        except IngestError as exc:
            out.files.append(_file(path, None, exc.problem, alike))
            out.warnings.append(InputWarning(str(path), f"not used: {exc.problem}"))
            continue
        out.files.append(_file(path, result, None, alike))
        out.warnings += file_warnings(path, result)
        if first:
            merged.path, first = result.path, False
        merged.merge(replace(result, tables={}))  # the tables are added a group of files at a time
        merged.lines += result.lines
        if rows_read is not None:
            result.tables = {
                name: table.filter(rows_read[name])
                for name, table in result.tables.items()
                if name in rows_read
            }
        group.append(result)
        if len(group) == GROUP_FILES:
            _add_tables(merged, group)
            group = []
    _add_tables(merged, group)
    merged.tables = {name: merged.table(name) for name in schemas.TABLES}
    return out


# The files' tables are joined this many files at a time into one chunk per table: a chunk per file costs
# about 25 kB of column overhead per file however few its rows (4,096 small traces: 0.1 GB).
GROUP_FILES = 64


def _add_tables(merged: ParseResult, results: list[ParseResult]) -> None:
    """The tables of ``results`` added after ``merged``'s, in order, as one chunk per table."""
    for name in dict.fromkeys(name for result in results for name in result.tables):
        tables = [result.tables[name] for result in results if name in result.tables]
        rows = frames.shared_text(pl.concat(tables, rechunk=True))  # each file's buffers let go
        merged.tables[name] = pl.concat([merged.tables[name], rows]) if name in merged.tables else rows


# What one row of each table is, for ``describe`` (in ``schemas.TABLES`` order).
_ROW_KINDS = {
    "steps": "step rows",
    "collectives": "collective rows",
    "nccl_ranks": "NCCL rank rows",
    "nccl_connections": "NCCL connection rows",
    "kineto_steps": "profiler step rows",
}


def _file(path: Path, result: ParseResult | None, error: str | None, alike: dict[str, Any]) -> dict[str, Any]:
    """What one file gave. Its formats, rows and interval lines are one object per distinct value, shared
    through ``alike`` (a job's ranks give alike files: a trace's record was 1.4 kB, 0.36 kB now)."""

    def shared(value: Any) -> Any:
        return alike.setdefault(repr(value), value)

    rows = {} if result is None else {n: t.height for n, t in result.tables.items() if t.height}
    return {
        "path": str(path),
        "formats": shared([] if result is None else result.formats),
        "rows": shared(rows),
        "lines": 0 if result is None else result.lines,
        "malformed": 0 if result is None else len(result.problems),
        "error": error,
        "interval_lines": shared({} if result is None else _interval_lines(result.table("steps"))),
    }


def _interval_lines(steps: pl.DataFrame) -> dict[str, int]:
    """N (as text, for JSON) -> step rows that are the mean of N > 1 steps, the way the analysis reads them."""
    means = steps.filter(pl.col("interval_average").fill_null(False) & (pl.col("interval_steps") > 1))
    counts = means.group_by("interval_steps").len().sort("interval_steps")
    return {str(n): count for n, count in counts.iter_rows()}


def describe(file: dict[str, Any]) -> str:
    """One line on what an input gave: its formats, rows per table, interval lines, malformed lines.

    Args:
        file: an entry of ``ParsedLogs.files``.

    Returns:
        e.g. ``run.log: megatron: 20 step rows; 20 lines are each the mean of 10 steps: read as 200 steps``.
    """
    return f"{file['path']}: {_gave(file)}"


def _gave(file: dict[str, Any]) -> str:
    """``describe`` without the path."""
    if file["error"] is not None:
        return f"not used: {file['error']}"
    rows = ", ".join(f"{file['rows'][t]} {kind}" for t, kind in _ROW_KINDS.items() if t in file["rows"])
    if rows and "steps" not in file["rows"]:
        rows += " (no step rows in it)"
    parts = [f"{', '.join(file['formats']) or 'no format'}: {rows or 'no rows'}"]
    intervals = {int(n): count for n, count in file.get("interval_lines", {}).items()}
    if intervals:
        means = ", ".join(
            f"{count} {'line is' if count == 1 else 'lines are each'} the mean of {n} steps"
            for n, count in intervals.items()
        )
        parts.append(f"{means}: read as {sum(n * count for n, count in intervals.items())} steps")
    if file["malformed"]:
        parts.append(f"{file['malformed']} malformed line(s)")
    return "; ".join(parts)


def describe_all(files: list[dict[str, Any]], shown: int = 20) -> list[str]:
    """What the inputs gave, readable at thousands of ranks: files that gave alike are one line.

    Args:
        files: ``ParsedLogs.files``.
        shown: at most this many lines; the rest are counted (``summary.json`` lists every file).

    Returns:
        One line per kind of file, e.g. ``4096 files (a/rank0.json.gz ... a/rank4095.json.gz), each: kineto:
        2 step rows, 2 profiler step rows``, in the order each kind first appears.
    """
    kinds: dict[str, list[str]] = {}
    for file in files:
        kinds.setdefault(_gave(file), []).append(file["path"])
    lines = [
        f"{paths[0]}: {what}"
        if len(paths) == 1
        else f"{len(paths)} files ({paths[0]} ... {paths[-1]}), each: {what}"
        for what, paths in kinds.items()
    ]
    if len(lines) > shown:
        rest = sum(len(paths) for paths in list(kinds.values())[shown:])
        lines[shown:] = [
            f"... and {rest} more files of {len(lines) - shown} other kinds (summary.json: inputs.files)"
        ]
    return lines


def file_warnings(path: Path, result: ParseResult) -> list[InputWarning]:
    """What is wrong with one parsed file: no rows at all, or steps that cannot be placed in time.

    Args:
        path: the file.
        result: what its parsers produced.

    Returns:
        The warnings (none for a file that gave rows with times).
    """
    formats = ", ".join(result.formats) or "no format"
    rows = sum(t.height for t in result.tables.values())
    if rows == 0:
        malformed = f", {len(result.problems)} malformed" if result.problems else ""
        return [
            InputWarning(
                str(path),
                f"no rows: read as {formats}, {result.lines} lines{malformed}, nothing the analysis can use",
            )
        ]
    steps = result.table("steps")
    untimed = steps.filter(pl.col("start_time").is_null() & pl.col("end_time").is_null()).height
    if untimed:
        return [
            InputWarning(
                str(path),
                f"{untimed} of {steps.height} step rows have no wall clock ({formats}): not placeable in time, "
                "so not correlated with telemetry (their durations are still reported)",
            )
        ]
    return []


def require_something(logs: ParsedLogs, has_telemetry: bool) -> None:
    """Stop when nothing at all is usable: every log failed and there is no telemetry.

    Args:
        logs: the parsed logs.
        has_telemetry: an archive or a Prometheus server was given.

    Raises:
        InputError: naming every unusable input and why.
    """
    usable = any(f["error"] is None for f in logs.files)
    if logs.files and not usable and not has_telemetry:
        raise InputError("--logs", "no usable input; " + "; ".join(str(w) for w in logs.warnings))


def as_json(warnings: Iterable[InputWarning]) -> list[dict[str, str]]:
    """Warnings as JSON-ready dicts (``input``, ``problem``)."""
    return [asdict(w) for w in warnings]
