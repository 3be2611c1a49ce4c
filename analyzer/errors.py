"""Errors the analyzer raises on purpose; the CLI prints them without a traceback and exits non-zero.

    SpanwatchError                (collector.errors: the one base every command catches)
    └── AnalyzerError             something in the post-run analysis is wrong
        ├── IngestError           a training-side input cannot be read; names the file
        │   ├── UnknownFormatError    no registered parser recognises the file
        │   └── UnreadableFileError   the file is missing, not decompressible, or not the JSON it claims
        └── InputError            another analysis input is wrong: archive, thresholds, truth, claims,
                                  a Prometheus server, an option value; names what and where

Malformed *lines* are not errors: parsers count them and return them as ``Malformed`` problems, so one bad
line in a 10 GB log never stops an analysis.
"""

from __future__ import annotations

from pathlib import Path

from collector.errors import SpanwatchError


class AnalyzerError(SpanwatchError):
    """Base of every error the analyzer raises on purpose."""


class IngestError(AnalyzerError):
    """A training-side input cannot be ingested.

    Attributes:
        path: the file concerned.
        problem: what is wrong with it, in words for the user.
    """

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UnknownFormatError(IngestError):
    """No registered parser recognises the file; the message lists the formats that were tried."""


class UnreadableFileError(IngestError):
    """The file cannot be opened, decompressed or decoded as a whole."""


class InputError(AnalyzerError):
    """An analysis input other than a training log is unusable (archive, thresholds, truth, claims, option).

    Attributes:
        where: the file, URL or option concerned.
        problem: what is wrong, in words for the user.
    """

    def __init__(self, where: Path | str, problem: str) -> None:
        self.where = str(where)
        self.problem = problem
        super().__init__(f"{self.where}: {problem}")
