"""Training-side inputs -> declared tables: one parser per log format, one registry, auto-detection.

``FORMATS`` is the only list of parsers. Each entry sniffs the first lines of a file (a score in [0, 1]) and
parses a path into a ``ParseResult`` of tables declared in ``analyzer.schemas`` plus every malformed line.
Detection reads at most ``HEAD_LINES`` lines / ``HEAD_CHARS`` characters (a Megatron log may print a long
shell and argument preamble before its first iteration line) and picks the best-scoring format, then adds
any other recognised format that fills a table none of the chosen ones fills: a Megatron log or nccl-tests
output run with NCCL_DEBUG=INFO also yields the NCCL topology, but a Megatron-DeepSpeed log is not also
parsed as a DeepSpeed log (that would count its steps twice). Gzip is recognised by content, whatever the
file name.

Usage::

    result = parse_file(Path("train.log.gz"))          # or parse_file(path, "megatron")
    steps = result.table("steps"); problems = result.problems
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from analyzer import schemas
from analyzer.errors import UnknownFormatError
from analyzer.ingest import (
    allreduce_bench,
    deepspeed,
    kineto,
    megatron,
    megatron_golden,
    nccl_debug,
    nccl_inspector,
    nccl_tests,
    steplog_jsonl,
    torchtitan,
    tracelens,
)
from analyzer.ingest._common import Malformed, ParseResult, head_lines

__all__ = ["FORMATS", "LogFormat", "Malformed", "ParseResult", "detect", "parse_file", "parse_files"]

HEAD_LINES = 20_000
HEAD_CHARS = 4 << 20


@dataclass(frozen=True)
class LogFormat:
    """One registered log format.

    Attributes:
        name: the registry key, also accepted by ``--log-format``.
        description: one line for help texts.
        tables: the tables its parser fills.
        sniff: scores the first lines of a file, 0 = not this format.
        parse: parses a file.
    """

    name: str
    description: str
    tables: frozenset[str]
    sniff: Callable[[Sequence[str]], float]
    parse: Callable[[Path], ParseResult]


class _ParserModule(Protocol):
    """What a format module offers (mypy checks each module in the registry against it)."""

    def sniff(self, lines: Sequence[str]) -> float: ...

    def parse(self, path: Path) -> ParseResult: ...


def _format(name: str, description: str, tables: set[str], module: _ParserModule) -> LogFormat:
    return LogFormat(name, description, frozenset(tables), module.sniff, module.parse)


FORMATS: dict[str, LogFormat] = {
    fmt.name: fmt
    for fmt in (
        _format(
            steplog_jsonl.NAME, "plain step log (JSON lines, spanwatch's StepLog)", {"steps"}, steplog_jsonl
        ),
        _format(
            kineto.NAME,
            "PyTorch profiler (Kineto) trace, .json/.json.gz",
            {"steps", "collectives", "kineto_steps"},
            kineto,
        ),
        _format(megatron_golden.NAME, "Megatron-LM CI golden values JSON", {"steps"}, megatron_golden),
        _format(nccl_inspector.NAME, "NCCL Inspector plugin JSON lines", {"collectives"}, nccl_inspector),
        _format(tracelens.NAME, "TraceLens NCCL summary CSV", {"collectives"}, tracelens),
        _format(megatron.NAME, "Megatron-LM / Megatron-DeepSpeed iteration log", {"steps"}, megatron),
        _format(torchtitan.NAME, "torchtitan step log", {"steps"}, torchtitan),
        _format(deepspeed.NAME, "DeepSpeed engine log", {"steps"}, deepspeed),
        _format(nccl_tests.NAME, "nccl-tests result tables", {"collectives", "nccl_ranks"}, nccl_tests),
        _format(
            allreduce_bench.NAME,
            "bigscience all_reduce_bench.py output (busbw per rank)",
            {"collectives"},
            allreduce_bench,
        ),
        _format(nccl_debug.NAME, "NCCL_DEBUG=INFO log", {"nccl_ranks", "nccl_connections"}, nccl_debug),
    )
}


def detect(path: Path) -> list[str]:
    """The formats to parse a file with: the best-scoring one, plus others that fill tables it does not.

    Args:
        path: the file (plain or gzip).

    Returns:
        Registry names, best first.

    Raises:
        UnknownFormatError: no format recognises the file; the message names the file and the formats tried.
        UnreadableFileError: the file cannot be opened or decompressed.
    """
    head = head_lines(path, HEAD_LINES, HEAD_CHARS)
    scored = sorted(
        ((fmt.sniff(head), index, fmt) for index, fmt in enumerate(FORMATS.values())),
        key=lambda item: (-item[0], item[1]),
    )
    chosen: list[LogFormat] = []
    for score, _, fmt in scored:
        covered = frozenset().union(*(other.tables for other in chosen))
        if score > 0 and not fmt.tables <= covered:
            chosen.append(fmt)
    if not chosen:
        raise UnknownFormatError(path, f"not a recognised training log; tried: {', '.join(FORMATS)}")
    return [fmt.name for fmt in chosen]


def parse_file(path: Path, log_format: str | None = None) -> ParseResult:
    """Parse one file with the named format, or with the auto-detected ones.

    Args:
        path: the file (plain or gzip).
        log_format: a registry name, or None to detect.

    Returns:
        The merged result of every format used.

    Raises:
        UnknownFormatError: the format name is not registered, or nothing recognises the file.
        UnreadableFileError: the file cannot be read as its format requires.
    """
    if log_format is not None and log_format not in FORMATS:
        raise UnknownFormatError(path, f"unknown log format {log_format!r}; known: {', '.join(FORMATS)}")
    names = [log_format] if log_format is not None else detect(path)
    result = ParseResult(path)
    for name in names:
        result.merge(FORMATS[name].parse(path))
    return result


def parse_files(paths: Iterable[Path], log_format: str | None = None) -> ParseResult:
    """Parse several files and concatenate their tables (each row keeps its ``source_file``).

    Args:
        paths: the files.
        log_format: a registry name for all of them, or None to detect each.

    Returns:
        One result; ``path`` is the first file's, ``formats`` every format used, problems of all files.

    Raises:
        UnknownFormatError: see ``parse_file``.
        UnreadableFileError: see ``parse_file``.
    """
    combined: ParseResult | None = None
    for path in paths:
        result = parse_file(path, log_format)
        if combined is None:
            combined = result
        else:
            combined.merge(result)
            combined.lines += result.lines
    if combined is None:
        return ParseResult(Path())
    combined.tables = {name: combined.table(name) for name in schemas.TABLES}
    return combined
