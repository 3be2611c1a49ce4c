"""Megatron-LM CI golden values (``golden_values_*.json``) -> ``steps``.

Megatron-LM's functional tests store per-step metrics of a reference run::

    {"lm loss": {"start_step": 1, "end_step": 50, "step_interval": 1, "values": {"1": 10.93, ...}},
     "iteration-time": {"start_step": 2, ..., "values": {"2": 0.52, ...}}, ...}

``iteration-time`` (seconds) becomes ``duration_seconds`` per step, ``lm loss`` the loss; each value is one
step's own time (the CI logs every step), so ``interval_average`` is false. There is no wall clock and no
rank. The file is small and one JSON document, so it is loaded whole; a value that is not a number (CI
writes "nan" for steps it did not record) is skipped and reported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from analyzer import schemas
from analyzer.errors import UnreadableFileError
from analyzer.ingest._common import Malformed, ParseResult, open_text

NAME = "megatron_golden"

_METRIC = re.compile(r'"(?:iteration-time|lm loss)"\s*:\s*\{')
_SERIES_KEYS = re.compile(r'"(?:start_step|step_interval|end_step)"\s*:')


def sniff(lines: Sequence[str]) -> float:
    """Score how likely the head of a file is a Megatron golden-values JSON.

    Args:
        lines: the first lines of the file.

    Returns:
        1.0 if the head has a metric series (``"lm loss": {"start_step": ...``), else 0.
    """
    head = "\n".join(lines[:40])[:65536]
    return 1.0 if _METRIC.search(head) and _SERIES_KEYS.search(head) else 0.0


def _series(document: Mapping[str, Any], metric: str) -> dict[int, Any]:
    block = document.get(metric)
    if not isinstance(block, dict) or not isinstance(block.get("values"), dict):
        return {}
    return {int(step): value for step, value in block["values"].items() if str(step).lstrip("-").isdigit()}


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:  # NaN != NaN
        return float(value)
    return None


def parse(path: Path) -> ParseResult:
    """Parse a golden-values JSON (loaded whole: a small single document).

    Args:
        path: the file (plain or gzip).

    Returns:
        ``steps`` rows (one per step with an iteration time) and unusable values as problems (line 0,
        the step named in the reason).

    Raises:
        UnreadableFileError: not valid JSON, or no ``iteration-time`` series.
    """
    with open_text(path) as stream:
        try:
            document = json.load(stream)
        except json.JSONDecodeError as exc:
            raise UnreadableFileError(path, f"line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(document, dict) or "iteration-time" not in document:
        raise UnreadableFileError(path, "no 'iteration-time' series in the golden values")
    times, losses = _series(document, "iteration-time"), _series(document, "lm loss")
    rows, problems = [], []
    for step, value in sorted(times.items()):
        seconds = _number(value)
        if seconds is None:
            problems.append(
                Malformed(str(path), 0, f"iteration-time of step {step} is not a number: {value!r}")
            )
            continue
        rows.append(
            {
                "source_file": str(path),
                "format": NAME,
                "step": step,
                "duration_seconds": seconds,
                "interval_average": False,
                "interval_steps": 1,
                "loss": _number(losses.get(step)),
            }
        )
    steps = schemas.from_rows("steps", rows)
    return ParseResult(path, [NAME], {"steps": steps}, problems, 0, {"iteration_times": steps.height})
