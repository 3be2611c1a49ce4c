"""How the report writes numbers and times, shared by the Markdown and HTML renderers and the verdicts.

Numbers are shown the way a network engineer reads them: seconds as ms/us when small, bytes in decimal
units (as link rates are), ratios like a BER in scientific notation, everything with 3 significant digits.
"""

from __future__ import annotations

import math
from datetime import datetime

_BYTES = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"))


def iso(value: object) -> str | None:
    """RFC 3339 with milliseconds and ``Z``, or None.

    Args:
        value: an aware datetime (anything else, such as a polars null, gives None).

    Returns:
        The text, or None.
    """
    if not isinstance(value, datetime):
        return None
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def span_seconds(start: object, end: object) -> float | None:
    """Seconds from ``start`` to ``end`` (aware datetimes, as polars returns them), or None."""
    if not isinstance(start, datetime) or not isinstance(end, datetime):
        return None
    return (end - start).total_seconds()


def number(value: float) -> str:
    """3 significant digits; scientific notation for very small or large magnitudes."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    if abs(value) < 1e-3 or abs(value) >= 1e7:
        return f"{value:.2e}"
    return f"{value:.3g}"


def seconds(value: float) -> str:
    """A duration: ``1.2 ms``, ``850 us``, ``3.4 s``, ``2.1 h``."""
    magnitude = abs(value)
    if magnitude == 0:
        return "0 s"
    if magnitude < 1e-3:
        return f"{value * 1e6:.3g} us"
    if magnitude < 1:
        return f"{value * 1e3:.3g} ms"
    if magnitude < 3600:
        return f"{value:.3g} s"
    return f"{value / 3600:.3g} h"


def data_bytes(value: float) -> str:
    """Bytes in decimal units: ``1.8 GB``."""
    for scale, suffix in _BYTES:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {suffix}"
    return f"{value:.3g} B"


def format_value(value: float | None, unit: str) -> str:
    """A measured or claimed value with its unit, for tables and sentences.

    Args:
        value: the number, or None.
        unit: a ``Measure.unit`` (``s``, ``bytes``, ``ratio``, ``dB``, ``packets/TB``...).

    Returns:
        The text; ``-`` for None.
    """
    if value is None:
        return "-"
    if unit == "s":
        return seconds(value)
    if unit == "bytes":
        return data_bytes(value)
    if unit == "ratio":
        return number(value)
    return f"{number(value)} {unit}"
