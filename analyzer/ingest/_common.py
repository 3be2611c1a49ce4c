"""What every log parser shares: transparent .gz reading, streamed lines, problems, results, row buffers.

Text logs are always read line by line (a 10 GB log never sits in memory whole); rows a parser extracts
are buffered in small Python lists and turned into DataFrame chunks every ``RowBuffer.CHUNK`` rows.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import polars as pl

from analyzer import schemas
from analyzer.errors import UnreadableFileError

_GZIP_MAGIC = b"\x1f\x8b"
# ANSI SGR/CSI sequences (torchtitan colours its step lines; terminals captured by `script` add others).
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# What launchers put before each line of a worker's output, as a regex fragment to compose (never used alone:
# a bare "word: " also starts ordinary messages). torchrun --tee: "[default0]:", "[rank3]:" (role + local
# rank); OpenMPI --tag-output: "[1,3]<stdout>:"; srun -l: "3: "; pdsh / DeepSpeed's multi-node runner:
# "worker-1: ". The number in the torchrun and srun forms is captured as ``launcher_rank``.
LAUNCHER_PREFIX = (
    r"(?:\[[A-Za-z_]*(?P<launcher_rank>\d+)\]:\s*|\[\d+,\d+\]<std(?:out|err)>:\s*"
    r"|(?P<srun_rank>\d+): +|[\w.-]+: +)"
)


# OpenMPI's --tag-output tag, "[jobid,rank]<stdout>:", is unambiguous, so it is found anywhere in a row:
# indentation, a log shipper's or `kubectl logs --timestamps`' stamp, or mpirun's --timestamp-output may come
# before it. The first tag and all before it are dropped (the rank is not needed: nccl-tests prints from rank
# 0). mpirun tags every write it forwards, not every line, so a row the worker wrote in pieces carries the tag
# again at each piece (nccl-tests: size..root, the out-of-place group, the in-place group); those later tags
# are cut out with nothing put in their place, which gives back exactly the text the worker wrote.
_MPI_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")
# torchrun's "[rank3]:" / "[default0]:" tag after indentation or an RFC 3339 stamp: what precedes is dropped,
# the tag kept (parsers read the rank from it).
_BEFORE_TORCHRUN = re.compile(
    r"^\s*(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+)?(?=\[[A-Za-z_]*\d+\]:)"
)


def untag(line: str) -> str:
    """A log row without what a launcher or log shipper put before the worker's own text.

    Drops OpenMPI's ``[1,0]<stdout>:`` tag wherever it is in the row (the first with everything before it,
    any later one alone: mpirun repeats the tag at each piece of a row written in pieces), and the
    indentation or RFC 3339 stamp before a torchrun tag (the tag itself stays, for ``launcher_rank``).
    Cheap substring tests first: most rows of most logs carry neither.

    Args:
        line: one row, without its newline.

    Returns:
        The row as the worker printed it (torchrun's tag kept).
    """
    if "]<std" in line and (first := _MPI_TAG.search(line)) is not None:
        line = _MPI_TAG.sub("", line[first.end() :])
    if "]:" in line and not line.startswith("["):
        line = _BEFORE_TORCHRUN.sub("", line, count=1)
    return line


def launcher_rank(match: re.Match[str]) -> int | None:
    """The rank a ``LAUNCHER_PREFIX`` in ``match`` carried (torchrun, srun -l), or None.

    Args:
        match: a match of a regex that contains ``LAUNCHER_PREFIX`` once.

    Returns:
        The number, or None when the line had no such prefix (or a host-name prefix).
    """
    number = match["launcher_rank"] or match["srun_rank"]
    return int(number) if number is not None else None


@dataclass(frozen=True)
class Malformed:
    """One line that looked like it belonged to the format but could not be parsed.

    Attributes:
        file: the file it is in.
        line: 1-based line number in the (decompressed) file.
        reason: what was wrong, in words.
    """

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class ParseResult:
    """What parsing one file produced.

    Attributes:
        path: the file parsed.
        formats: registry names of the parsers that contributed (usually one).
        tables: one DataFrame per declared table (see ``analyzer.schemas.TABLES``); tables the formats do
            not produce are empty, never missing.
        problems: every malformed line, with file and line number.
        lines: lines read (for JSON documents: lines in the document).
        counts: format-specific counts worth reporting (e.g. ``{"iteration_lines": 20}``).
    """

    path: Path
    formats: list[str] = field(default_factory=list)
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    problems: list[Malformed] = field(default_factory=list)
    lines: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def table(self, name: str) -> pl.DataFrame:
        """The DataFrame of one table, empty with its schema when no parser filled it.

        Args:
            name: a key of ``analyzer.schemas.TABLES``.

        Returns:
            The table.

        Raises:
            KeyError: ``name`` is not a declared table.
        """
        return self.tables.get(name, schemas.empty(name))

    def merge(self, other: ParseResult) -> None:
        """Add another parser's result for the same file into this one (tables concatenated).

        Args:
            other: the other result.
        """
        self.formats.extend(other.formats)
        for name, frame in other.tables.items():
            self.tables[name] = pl.concat([self.table(name), frame]) if name in self.tables else frame
        self.problems.extend(other.problems)
        self.lines = max(self.lines, other.lines)
        for key, value in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + value


class RowBuffer:
    """Collect rows of one table as dicts, converting them to DataFrame chunks so memory stays bounded."""

    CHUNK = 50_000

    def __init__(self, table: str, source_file: str, format_name: str) -> None:
        self._table = table
        self._origin = {"source_file": source_file, "format": format_name}
        self._rows: list[dict[str, Any]] = []
        self._chunks: list[pl.DataFrame] = []

    def add(self, row: Mapping[str, Any]) -> None:
        """Append one row; flushes a chunk when the buffer is full.

        Args:
            row: column name -> value (columns not given become null).
        """
        self._rows.append({**self._origin, **row})
        if len(self._rows) >= self.CHUNK:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            self._chunks.append(schemas.from_rows(self._table, self._rows))
            self._rows = []

    def frame(self) -> pl.DataFrame:
        """All rows so far.

        Returns:
            One DataFrame with the table's declared schema.
        """
        self._flush()
        if not self._chunks:
            return schemas.empty(self._table)
        return pl.concat(self._chunks)


def _open_raw(path: Path) -> io.BufferedReader:
    try:
        return path.open("rb")
    except OSError as exc:
        raise UnreadableFileError(path, f"cannot open: {exc.strerror or exc}") from exc


@contextmanager
def open_binary(path: Path) -> Iterator[IO[bytes] | gzip.GzipFile]:
    """Open a file as bytes, decompressing gzip transparently (recognised by its magic bytes, not the name:
    rotated logs are often gzipped without a .gz suffix, and vice versa).

    Args:
        path: the file.

    Yields:
        A binary stream.

    Raises:
        UnreadableFileError: the file cannot be opened, or its compressed data is corrupt.
    """
    raw = _open_raw(path)
    # GzipFile does not close a file object it was given, so the raw file is closed explicitly below.
    binary: IO[bytes] | gzip.GzipFile = (
        gzip.GzipFile(fileobj=raw, mode="rb") if raw.peek(2)[:2] == _GZIP_MAGIC else raw
    )
    try:
        yield binary
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise UnreadableFileError(path, f"cannot decompress: {exc}") from exc
    finally:
        binary.close()
        raw.close()


@contextmanager
def open_text(path: Path) -> Iterator[IO[str]]:
    """Open a log as text (``open_binary``: gzip decompressed transparently); undecodable bytes become
    U+FFFD.

    Args:
        path: the file.

    Yields:
        A text stream to iterate line by line.

    Raises:
        UnreadableFileError: the file cannot be opened, or its compressed data is corrupt.
    """
    with open_binary(path) as binary:
        text = io.TextIOWrapper(binary, encoding="utf-8", errors="replace", newline=None)
        try:
            yield text
        finally:
            text.detach()


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Stream a log's lines with 1-based numbers, trailing newline and launcher tags removed (``untag``).

    Args:
        path: the file (plain or gzip).

    Yields:
        ``(line_number, line)`` pairs.

    Raises:
        UnreadableFileError: the file cannot be opened or decompressed.
    """
    with open_text(path) as stream:
        for number, line in enumerate(stream, start=1):
            yield number, untag(line.rstrip("\r\n"))


def head_lines(path: Path, max_lines: int, max_bytes: int) -> list[str]:
    """The first lines of a file (``untag``-ged), for format detection; stops at whichever limit comes first.

    Args:
        path: the file (plain or gzip).
        max_lines: at most this many lines.
        max_bytes: at most about this many characters in total (one huge line is cut at the limit).

    Returns:
        The lines, without trailing newlines.

    Raises:
        UnreadableFileError: the file cannot be opened or decompressed.
    """
    lines: list[str] = []
    budget = max_bytes
    with open_text(path) as stream:
        while len(lines) < max_lines and budget > 0:
            line = stream.readline(budget)
            if not line:
                break
            budget -= len(line)
            lines.append(untag(line.rstrip("\r\n")))
    return lines


def parse_wallclock(text: str) -> datetime:
    """Parse a log's wall-clock stamp; naive stamps (no zone) are taken as UTC.

    Accepts ``2023-04-18 01:46:52,554`` (Python logging), ``2023-04-18 01:46:52.554``, and RFC 3339 / ISO 8601
    with ``T``, ``Z`` or an offset. Logs rarely say their zone; reading naive stamps as UTC keeps every table
    on one clock, and a job whose hosts log local time can be shifted downstream.

    Args:
        text: the stamp.

    Returns:
        A timezone-aware UTC datetime.

    Raises:
        ValueError: the text is not such a stamp.
    """
    cleaned = text.strip().replace(",", ".", 1)
    if cleaned.endswith(("Z", "z")):
        cleaned = cleaned[:-1] + "+00:00"
    stamp = datetime.fromisoformat(cleaned)
    if stamp.tzinfo is None:
        return stamp.replace(tzinfo=UTC)
    return stamp.astimezone(UTC)
