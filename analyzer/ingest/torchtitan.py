"""torchtitan step lines -> ``steps``.

torchtitan's metrics logger prints, every ``log_freq`` steps, a line coloured with ANSI codes::

    [rank0]:[titan] 2025-01-15 10:00:01,234 - root - INFO - \\x1b[31mstep: 10  \\x1b[32mloss:  7.8912  ...
    \\x1b[33mmemory: 21.01GiB(22.11%)  \\x1b[34mtps: 8,143  \\x1b[36mtflops: 123.4  \\x1b[35mmfu: 4.59%

(older versions print ``wps`` instead of ``tps`` and no memory, newer ones add ``grad_norm`` or print ``mfu:
N/A``; only step and loss are required). The launcher prefix is torchrun's ``--tee`` tag, ``[rank0]:`` with
torchtitan's ``--role rank`` or ``[default0]:`` without, or srun's ``0: ``; its number becomes ``rank``.
Validation lines (``validate step: 10  loss: ..``) are evaluation, not training steps: counted, not rows.
Colour codes are stripped first. A row's duration is the wall-clock gap to the previous step line of the same
rank divided by the step gap: an interval mean, null for the first line and after a restart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from analyzer.ingest._common import (
    ANSI_ESCAPE,
    LAUNCHER_PREFIX,
    Malformed,
    ParseResult,
    RowBuffer,
    launcher_rank,
    numbered_lines,
    parse_wallclock,
)

NAME = "torchtitan"

_CANDIDATE = re.compile(r"\bstep:\s*\d+\s+loss:")
_VALIDATION = re.compile(r"\bvalidate step:\s*\d+\s+loss:")
# The logger's "[titan] %(asctime)s - %(name)s - %(levelname)s - " may be absent (a custom logger), and the
# clock is then searched for anywhere before "step:".
_LINE = re.compile(
    rf"^(?:{LAUNCHER_PREFIX})?\s*(?:\[titan\]\s*)?"
    r"(?:.*?(?P<clock>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?))?.*?"
    r"\bstep:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>\S+)"
)


def sniff(lines: Sequence[str]) -> float:
    """Score how likely the head of a file is a torchtitan log.

    Args:
        lines: the first lines of the file.

    Returns:
        0.95 if a step line is present, 0.3 for torchtitan's ``[titan]`` logger prefix alone, else 0.
    """
    clean = [ANSI_ESCAPE.sub("", line) for line in lines]
    if any(_CANDIDATE.search(line) for line in clean):
        return 0.95
    if any("[titan]" in line for line in clean):
        return 0.3
    return 0.0


def parse(path: Path) -> ParseResult:
    """Parse a torchtitan log, streaming.

    Args:
        path: the log (plain or gzip).

    Returns:
        ``steps`` rows and the malformed step lines.

    Raises:
        UnreadableFileError: the file cannot be opened or decompressed.
    """
    rows = RowBuffer("steps", str(path), NAME)
    problems: list[Malformed] = []
    lines = validation = 0
    for number, raw in numbered_lines(path):
        lines = number
        if "step:" not in raw and "\x1b" not in raw:
            continue  # cheap reject first: most lines of a big log are not step lines
        line = ANSI_ESCAPE.sub("", raw)
        if not _CANDIDATE.search(line):
            continue
        if _VALIDATION.search(line):
            validation += 1
            continue
        match = _LINE.match(line)
        if match is None:
            problems.append(Malformed(str(path), number, "step line not in torchtitan's layout"))
            continue
        try:
            stamp = parse_wallclock(match["clock"]) if match["clock"] else None
            loss = float(match["loss"])
        except ValueError as exc:
            problems.append(Malformed(str(path), number, f"bad value: {exc}"))
            continue
        rows.add({"rank": launcher_rank(match), "step": int(match["step"]), "end_time": stamp, "loss": loss})
    steps = _with_intervals(rows.frame())
    counts = {"step_lines": steps.height, "validation_lines": validation}
    return ParseResult(path, [NAME], {"steps": steps}, problems, lines, counts)


def _with_intervals(steps: pl.DataFrame) -> pl.DataFrame:
    """Per rank: start = previous line's clock, duration = clock gap / step gap (an interval mean)."""
    previous_end = pl.col("end_time").shift(1).over("rank")
    step_gap = pl.col("step").diff().over("rank")
    seconds = (pl.col("end_time") - previous_end).dt.total_nanoseconds() / 1e9
    # A step that does not move forward is a restart from a checkpoint: the previous line is another process.
    return steps.with_columns(
        start_time=pl.when(step_gap > 0).then(previous_end),
        interval_steps=pl.when(step_gap > 0).then(step_gap),
        duration_seconds=pl.when(step_gap > 0).then(seconds / step_gap),
        interval_average=pl.lit(True),
    )
