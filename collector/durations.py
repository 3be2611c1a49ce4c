"""Durations as users write them in config files and on command lines: a number with a unit."""

from __future__ import annotations

import re
from typing import Any

_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")


def parse_duration(value: Any) -> float:
    """``"500ms"``, ``"10s"``, ``"1m"`` -> seconds. Bare numbers are refused: units are required."""
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _UNITS[m.group(2)]
    raise ValueError(f"not a duration: {value!r} (use a number with a unit: 500ms, 10s, 1m)")
