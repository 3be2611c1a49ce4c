"""Megatron-LM and Megatron-DeepSpeed iteration lines -> ``steps``.

Both print, every ``--log-interval`` iterations, a line like::

     iteration       20/    1000 | consumed samples:     80 | elapsed time per iteration (ms): 1354.9 | ..
    [2024-05-02 10:11:12] iteration 100/ 500000 | consumed samples: 3200 | elapsed time per iteration (ms): ..

(the bracketed wall clock is newer Megatron-LM, with microseconds since 2025; older logs and Megatron-DeepSpeed
have none). The fields between the bars vary by version and fork ("consumed samples/tokens", "learning rate",
"global batch size", "lm loss", "grad norm", "number of skipped/nan iterations", ROCm's "elapsed time per
iteration (ms): 1234.5/1200.0" with a running mean after the slash, a fork's "iteration 10/infinity"); only the
iteration number and "elapsed time per iteration" are required, and launcher prefixes ("[rank7]:", "7: ") are
skipped. "elapsed time per iteration" is the mean over the iterations since the previous line, not one step,
so each row is marked ``interval_average`` with ``interval_steps`` = the iteration gap (for the first line,
and the first after a restart from a checkpoint: the first forward gap, assuming a constant log interval).
Where the line has a wall clock, ``end_time`` is it and ``start_time`` is the previous line's (null across a
restart). Megatron prints these lines from one rank only (the last pipeline stage), so ``rank`` is null.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from analyzer.ingest._common import Malformed, ParseResult, RowBuffer, numbered_lines, parse_wallclock

NAME = "megatron"

# Loose: anything that announces an iteration line; strict parsing below decides if it is well formed.
# A fork prints "iteration 10/infinity" when it has no planned total.
_CANDIDATE = re.compile(r"\biteration\s+\d+\s*/\s*(?:\d+|infinity)\s*\|")
_ITERATION = re.compile(
    r"^(?P<prefix>.*?)\biteration\s+(?P<step>\d+)\s*/\s*(?P<total>\d+|infinity)\s*\|(?P<fields>.*)$"
)
# The clock may follow a launcher prefix ("[default7]:", "7: "), so it is searched in what precedes.
_CLOCK = re.compile(r"\[(?P<clock>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\]")
_ELAPSED = re.compile(r"elapsed time per iteration \((?P<unit>ms|s)\):\s*(?P<value>[-+0-9.eE]+|nan|inf)")
# "lm loss: 7.0E+00 |" (the colon is missing in some forks); Python prints a NaN/inf mean as "NAN"/"INF".
_LOSS = re.compile(r"\blm loss:?\s+(?P<value>[-+]?(?:[0-9.]+(?:[eE][-+]?\d+)?|nan|inf))\b", re.IGNORECASE)
# The "arguments" banner and world-size line come early, before any iteration line: enough to claim a log.
_BANNER = re.compile(r"^-+ arguments -+$|^using world size: \d+")


def sniff(lines: Sequence[str]) -> float:
    """Score how likely the head of a file is a Megatron log.

    Args:
        lines: the first lines of the file.

    Returns:
        1.0 if an iteration line with elapsed time is present, 0.6 for Megatron's argument banner, else 0.
    """
    if any(_CANDIDATE.search(line) and "elapsed time per iteration" in line for line in lines):
        return 1.0
    if any(_BANNER.match(line) for line in lines):
        return 0.6
    return 0.0


def _duration_seconds(fields: str) -> float | None:
    match = _ELAPSED.search(fields)
    if match is None:
        return None
    value = float(match["value"])
    return value / 1000.0 if match["unit"] == "ms" else value


def _loss(fields: str) -> float | None:
    match = _LOSS.search(fields)
    return float(match["value"]) if match else None


def parse(path: Path) -> ParseResult:
    """Parse a Megatron-LM / Megatron-DeepSpeed log, streaming.

    Args:
        path: the log (plain or gzip).

    Returns:
        ``steps`` rows (one per logged iteration line) and the malformed iteration lines.

    Raises:
        UnreadableFileError: the file cannot be opened or decompressed.
    """
    rows = RowBuffer("steps", str(path), NAME)
    problems: list[Malformed] = []
    lines = 0
    for number, line in numbered_lines(path):
        lines = number
        # Substring test first: most lines of a big log are not iteration lines, and it is 10x cheaper.
        if "iteration" not in line or not _CANDIDATE.search(line):
            continue
        match = _ITERATION.match(line)
        duration = _duration_seconds(match["fields"]) if match else None
        if match is None or duration is None:
            problems.append(
                Malformed(str(path), number, "iteration line without 'elapsed time per iteration'")
            )
            continue
        stamp = _CLOCK.search(match["prefix"])
        try:
            clock = parse_wallclock(stamp["clock"]) if stamp else None
        except ValueError:
            problems.append(
                Malformed(str(path), number, f"bad timestamp {stamp['clock'] if stamp else ''!r}")
            )
            continue
        rows.add(
            {
                "step": int(match["step"]),
                "end_time": clock,
                "duration_seconds": duration,
                "loss": _loss(match["fields"]),
            }
        )
    steps = _with_intervals(rows.frame())
    return ParseResult(path, [NAME], {"steps": steps}, problems, lines, {"iteration_lines": steps.height})


def _with_intervals(steps: pl.DataFrame) -> pl.DataFrame:
    """Mark rows as interval averages, with the iteration gap and the previous line's clock as start."""
    gap = pl.col("step").diff()
    # A step that does not move forward means the job restarted from a checkpoint and appended to the log:
    # the previous line belongs to the old process, so neither its clock nor the gap to it means anything.
    forward = gap > 0
    typical = gap.filter(forward).first()
    return steps.with_columns(
        interval_average=pl.lit(True),
        interval_steps=pl.when(forward).then(gap).otherwise(typical).fill_null(pl.col("step")),
        start_time=pl.when(forward).then(pl.col("end_time").shift(1)),
    )
