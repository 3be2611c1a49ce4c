"""Rendering the store as Prometheus text exposition (format 0.0.4).

``render`` walks a snapshot of the store; it never talks to a device. Everything runs on the daemon's
event loop, so a synchronous walk sees one consistent state. Each series keeps its rendered labels
(``Series.labelset``; a device's series share their ``Row``'s) from the moment it was created, so a scrape
is one join over the values: the only per-series work left is formatting the number, and that has a fast path for integers
(counters, which must stay exact past 2^53) and finite floats.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import cast

from collector.contracts.catalog import CATALOG, Kind
from collector.store import FullLabels, Histogram, LabelSet, Store, render_labels

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_float_repr = float.__repr__


def format_value(value: float) -> str:
    """One sample value as the text format writes it.

    Args:
        value: an exact integer (counters) or a float.

    Returns:
        ``"12"`` for integers (never rounded through a float), the shortest round-tripping decimal for
        floats, and ``NaN`` / ``+Inf`` / ``-Inf`` for the special values.
    """
    if isinstance(value, int):  # bool included: True is exported as 1, not "True"
        return str(int(value))
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return _float_repr(value)


def escape_help(text: str) -> str:
    """Escape a HELP text: the 0.0.4 format escapes only backslash and newline there.

    Args:
        text: the raw help text.

    Returns:
        the escaped text.
    """
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _header(name: str) -> str:
    spec = CATALOG[name]
    return f"# HELP {name} {escape_help(spec.help)}\n# TYPE {name} {spec.kind.value}"


def _plain_lines(name: str, series: Iterable[tuple[LabelSet, object]]) -> list[str]:
    # The hot loop of a scrape: an int or an ordinary float is formatted inline; only NaN, infinities
    # and oddities (bool) take the function call. ``v - v == 0`` is False exactly for NaN and +-Inf.
    out = []
    for labelset, v in series:
        t = type(v)
        if t is int:
            out.append(f"{name}{labelset.text} {v}")
        elif t is float and v - v == 0:  # type: ignore[operator]
            out.append(f"{name}{labelset.text} {_float_repr(v)}")
        else:
            out.append(f"{name}{labelset.text} {format_value(cast(float, v))}")
    return out


def histogram_lines(name: str, full: FullLabels, h: Histogram) -> list[str]:
    """The ``_bucket``, ``_sum`` and ``_count`` lines of one histogram series.

    Args:
        name: the family name.
        full: the series labels (``le`` is appended for buckets).
        h: the histogram.

    Returns:
        the lines, buckets in ascending order ending with ``le="+Inf"``.
    """
    lines = []
    for bound, count in zip(h.bounds, h.cumulative(), strict=True):
        lines.append(f"{name}_bucket{render_labels((*full, ('le', format_value(bound))))} {count}")
    lines.append(f"{name}_bucket{render_labels((*full, ('le', '+Inf')))} {h.count}")
    labels = render_labels(full)
    lines.append(f"{name}_sum{labels} {format_value(h.sum)}")
    lines.append(f"{name}_count{labels} {h.count}")
    return lines


def render_chunks(store: Store) -> list[bytes]:
    """The whole store as exposition text, one UTF-8 chunk a family, families in name order.

    A family's lines are joined and encoded before the next family's are made, so a scrape holds the
    lines of one family at a time (at 135k series, all lines at once were 20 MB of small strings that
    the allocator kept after the scrape).

    Args:
        store: the store to snapshot.

    Returns:
        the chunks, each ending with a newline (none for an empty store).
    """
    chunks = []
    for name in sorted(store.metrics()):
        family = store.families.get(name, {})
        out = [_header(name)]
        if CATALOG[name].kind is Kind.HISTOGRAM:
            for full, series in family.items():
                if isinstance(series.value, Histogram):
                    out.extend(histogram_lines(name, full, series.value))
        else:
            out.extend(_plain_lines(name, ((s.labelset, s.value) for s in family.values())))
            out.extend(_plain_lines(name, store.device_series(name)))
        out.append("")
        chunks.append("\n".join(out).encode())
    return chunks


def render(store: Store) -> str:
    """The whole store as exposition text (``render_chunks`` joined).

    Args:
        store: the store to snapshot.

    Returns:
        the exposition, ending with a newline (empty string for an empty store).
    """
    return b"".join(render_chunks(store)).decode()
