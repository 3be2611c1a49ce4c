"""DeepSpeed engine logs -> ``steps``.

The engine prints, every ``steps_per_print`` optimizer steps, a wall-clock-stamped line::

    [2023-04-18 01:46:59,142] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=6, lr=[...], mom=[...]

and the pipeline engine prints ``steps: 10 loss: 2.345 iter time (s): 0.876 samples/sec: 146.1`` (newer
versions insert extra losses, ``moe_loss: 0.01``, before "iter time" and append memory figures after it).
Multi-node runs add a launcher prefix to every line: pdsh's ``worker-1: `` (DeepSpeed's default multi-node
runner), torchrun's ``[rank0]:``, srun's ``0: ``. A step line's duration is the wall-clock gap to the previous
step line of the same rank divided by the step gap: a mean over the interval (``interval_average``), null for
the first line and after a restart. The pipeline engine's "iter time" is likewise a mean over the print
interval. Naive stamps are read as UTC (see ``parse_wallclock``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from analyzer.ingest._common import (
    LAUNCHER_PREFIX,
    Malformed,
    ParseResult,
    RowBuffer,
    numbered_lines,
    parse_wallclock,
)

NAME = "deepspeed"

# DeepSpeed's logger: "[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s".
_PREFIX = re.compile(
    rf"^{LAUNCHER_PREFIX}?"
    r"\[(?P<clock>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+)\] \[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\] "
    r"\[[^\]\s]+:\d+:[^\]\s]+\]"
)
_STEP = re.compile(r"\[Rank (?P<rank>-?\d+)\] step=(?P<step>\d+), skipped=(?P<skipped>\d+)")
# Printed with print(), so only a launcher prefix can precede it.
_PIPE_START = rf"^{LAUNCHER_PREFIX}?steps: "
_PIPE = re.compile(
    _PIPE_START
    + r"(?P<step>\d+) loss: (?P<loss>\S+)(?: [\w.-]+: \S+)*? iter time \(s\): (?P<iter>[-+0-9.eE]+)"
)
_PIPE_CANDIDATE = re.compile(_PIPE_START + r"\d+ ")


def sniff(lines: Sequence[str]) -> float:
    """Score how likely the head of a file is a DeepSpeed engine log.

    Args:
        lines: the first lines of the file.

    Returns:
        0.9 with step lines, 0.4 with only DeepSpeed's logger prefix, else 0.
    """
    if any((_PREFIX.match(line) and "step=" in line) or _PIPE.match(line) for line in lines):
        return 0.9
    if any(_PREFIX.match(line) for line in lines):
        return 0.4
    return 0.0


def parse(path: Path) -> ParseResult:
    """Parse a DeepSpeed engine log, streaming.

    Args:
        path: the log (plain or gzip).

    Returns:
        ``steps`` rows and the malformed step lines.

    Raises:
        UnreadableFileError: the file cannot be opened or decompressed.
    """
    clocked = RowBuffer("steps", str(path), NAME)
    piped = RowBuffer("steps", str(path), NAME)
    problems: list[Malformed] = []
    lines = 0
    for number, line in numbered_lines(path):
        lines = number
        if "step" not in line:
            continue  # cheap reject first: both kinds of step line contain "step"
        prefix = _PREFIX.match(line)
        if prefix and "step=" in line:
            _add_step_line(path, number, line, prefix["clock"], clocked, problems)
        elif _PIPE_CANDIDATE.match(line):
            _add_pipe_line(path, number, line, piped, problems)
    steps = pl.concat([_with_intervals(clocked.frame()), piped.frame()])
    return ParseResult(path, [NAME], {"steps": steps}, problems, lines, {"step_lines": steps.height})


def _add_step_line(
    path: Path, number: int, line: str, clock: str, rows: RowBuffer, problems: list[Malformed]
) -> None:
    match = _STEP.search(line)
    if match is None:
        # Other engine messages mention "step=" too (e.g. "global_step=" in timer lines): not ours.
        if "] step=" in line:
            problems.append(Malformed(str(path), number, "step line without '[Rank N] step=N, skipped=N'"))
        return
    try:
        stamp = parse_wallclock(clock)
    except ValueError:
        problems.append(Malformed(str(path), number, f"bad timestamp {clock!r}"))
        return
    rows.add({"rank": int(match["rank"]), "step": int(match["step"]), "end_time": stamp})


def _add_pipe_line(path: Path, number: int, line: str, rows: RowBuffer, problems: list[Malformed]) -> None:
    match = _PIPE.match(line)
    if match is None:
        problems.append(Malformed(str(path), number, "pipeline 'steps:' line without 'iter time (s)'"))
        return
    try:
        loss = float(match["loss"])
    except ValueError:
        loss = None
    rows.add(
        {
            "step": int(match["step"]),
            "duration_seconds": float(match["iter"]),
            "loss": loss,
            "interval_average": True,
        }
    )


def _with_intervals(steps: pl.DataFrame) -> pl.DataFrame:
    """Per rank: start = previous line's clock, duration = clock gap / step gap (an interval mean)."""
    previous_end = pl.col("end_time").shift(1).over("rank", order_by="end_time")
    step_gap = pl.col("step").diff().over("rank", order_by="end_time")
    seconds = (pl.col("end_time") - previous_end).dt.total_nanoseconds() / 1e9
    # A step that does not move forward is a restart from a checkpoint: the previous line is another process.
    return steps.with_columns(
        start_time=pl.when(step_gap > 0).then(previous_end),
        interval_steps=pl.when(step_gap > 0).then(step_gap),
        duration_seconds=pl.when(step_gap > 0).then(seconds / step_gap),
        interval_average=pl.lit(True),
    )
