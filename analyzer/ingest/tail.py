"""Follow a training log as it grows: the complete lines appended since the last read, parsed by the
format's own registered parser (``analyzer.ingest.FORMATS``), so the live path reads exactly what the
post-run analysis reads.

Only line-oriented formats can be followed (``TAILABLE``). Each read parses the new lines behind the last
``CONTEXT_LINES`` lines already read: Megatron and torchtitan derive a line's interval from the previous
iteration line, so a chunk parsed alone would misread its first line. Rows of the context lines were
returned before; a row is new when its (step, rank) is not among the rows the context gave. A line still
being written (no newline yet) waits for the next read. A file that shrinks was truncated or rotated: it is
read again from its start. Malformed lines keep their number in the real file.
"""

from __future__ import annotations

import logging
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from analyzer import schemas
from analyzer.errors import IngestError
from analyzer.ingest import FORMATS, Malformed, detect

log = logging.getLogger(__name__)

TAILABLE = ("steplog", "megatron", "torchtitan", "deepspeed")
CONTEXT_LINES = 256  # enough for one iteration line per rank of a torchtitan job between two steps
READ_BYTES = 8 << 20  # at most this much per read, so a huge backlog is caught up over several reads
# A line longer than this is no log line (a binary blob, a file without newlines): it is dropped up to its
# newline and reported, so an unterminated one cannot grow follow's memory read after read.
MAX_LINE_BYTES = 1 << 20


@dataclass
class Chunk:
    """What one read of a log gave.

    Attributes:
        steps: new ``schemas.STEPS`` rows (``source_file`` is the followed file).
        problems: malformed lines, numbered in the followed file.
        lines: complete lines read.
    """

    steps: pl.DataFrame
    problems: list[Malformed] = field(default_factory=list)
    lines: int = 0


class LogTail:
    """One followed log.

    Args:
        path: the file (it may not exist yet).
        log_format: a ``TAILABLE`` registry name, or None to detect it once the file has lines.
        scratch: a folder for the chunk files the parsers read.
    """

    def __init__(self, path: Path, log_format: str | None, scratch: Path) -> None:
        if log_format is not None and log_format not in TAILABLE:
            raise IngestError(path, f"cannot follow {log_format!r} logs; followable: {', '.join(TAILABLE)}")
        self.path = path
        self.format = log_format
        self._chunk = Path(tempfile.mkstemp(prefix="tail-", suffix=".log", dir=scratch)[1])
        self._offset = 0
        self._partial = b""
        self._skipping = False  # dropping an overlong line up to its newline
        self._lines = 0  # complete lines consumed
        self._context: deque[bytes] = deque(maxlen=CONTEXT_LINES)

    def read(self) -> Chunk:
        """The rows of the complete lines appended since the last read.

        Returns:
            The new rows and problems (empty while the file is missing or its format is not known yet).

        Raises:
            IngestError: the file is not a followable format.
        """
        if self.format is None:
            self.format = self._detect()
        if self.format is None:
            return Chunk(schemas.empty("steps"))
        data = self._appended()
        if not data:
            return Chunk(schemas.empty("steps"))
        head, newline, self._partial = (self._partial + data).rpartition(b"\n")
        overlong = self._overlong(head if newline else b"")
        if not newline:
            return Chunk(schemas.empty("steps"), overlong)
        new = head.split(b"\n")
        if self._skipping:  # the rest of a dropped line
            new[0], self._skipping = b"", False
        chunk = self._parse(self.format, list(self._context), new)
        chunk.problems[:0] = overlong
        self._context.extend(new)
        self._lines += len(new)
        return chunk

    def _overlong(self, complete: bytes) -> list[Malformed]:
        """Drop an unterminated line past ``MAX_LINE_BYTES``: reported once, skipped up to its newline."""
        if len(self._partial) <= MAX_LINE_BYTES:
            return []
        number = self._lines + complete.count(b"\n") + (1 if complete else 0) + 1
        self._partial, skipping, self._skipping = b"", self._skipping, True
        if skipping:
            return []
        return [Malformed(str(self.path), number, f"a line longer than {MAX_LINE_BYTES} bytes: skipped")]

    def _appended(self) -> bytes:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return b""
        if size < self._offset:  # truncated or replaced: start again
            log.warning("%s: shrank to %d bytes, reading it again from the start", self.path, size)
            self._offset, self._partial, self._lines, self._skipping = 0, b"", 0, False
            self._context.clear()
        if size == self._offset:
            return b""
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read(READ_BYTES)
        self._offset += len(data)
        return data

    def _detect(self) -> str | None:
        """The format, from the file's head; None (and tried again later) while nothing matches."""
        try:
            names = detect(self.path)
        except IngestError:
            return None
        followable = [n for n in names if n in TAILABLE]
        if not followable:
            followable_names = ", ".join(TAILABLE)
            raise IngestError(
                self.path, f"a {names[0]} file cannot be followed; followable: {followable_names}"
            )
        log.info("%s: following as %s", self.path, followable[0])
        return followable[0]

    def _parse(self, log_format: str, context: list[bytes], new: list[bytes]) -> Chunk:
        parse = FORMATS[log_format].parse
        result = parse(self._write([*context, *new]))
        steps = result.table("steps").with_columns(source_file=pl.lit(str(self.path)))
        if context:
            seen = parse(self._write(context)).table("steps").select("step", "rank")
            steps = steps.join(seen, on=["step", "rank"], how="anti", nulls_equal=True)
        first = self._lines - len(context)  # file line number of the chunk's line 1, minus one
        problems = [
            Malformed(str(self.path), first + p.line, p.reason)
            for p in result.problems
            if p.line > len(context)
        ]
        return Chunk(steps, problems, len(new))

    def _write(self, lines: list[bytes]) -> Path:
        self._chunk.write_bytes(b"".join(line + b"\n" for line in lines))
        return self._chunk

    def close(self) -> None:
        """Remove the chunk file."""
        self._chunk.unlink(missing_ok=True)
