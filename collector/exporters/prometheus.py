"""Rendering the store as Prometheus text exposition (format 0.0.4).

``render`` walks a snapshot of the store; it never talks to a device. Each series keeps its rendered name
and labels from the moment it was created, so a scrape is one string join over the values.
"""

from __future__ import annotations

import math

from collector.catalog import CATALOG, Kind
from collector.store import Histogram, Store, render_labels

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def render(store: Store) -> str:
    """The whole store as exposition text, families in name order."""
    out: list[str] = []
    for name in sorted(store.families):
        family = store.families[name]
        if not family:
            continue
        spec = CATALOG[name]
        out.append(f"# HELP {name} {spec.help}\n# TYPE {name} {spec.kind.value}")
        if spec.kind is Kind.HISTOGRAM:
            for full, series in family.items():
                assert isinstance(series.value, Histogram)
                out.extend(_histogram(name, full, series.value))
            continue
        out.extend([f"{s.prefix} {_number(s.value)}" for s in family.values()])  # type: ignore[arg-type]
    out.append("")
    return "\n".join(out)


def _histogram(name: str, full: tuple[tuple[str, str], ...], h: Histogram) -> list[str]:
    lines = []
    for bound, count in zip(h.bounds, h.cumulative(), strict=True):
        lines.append(f"{name}_bucket{render_labels((*full, ('le', _number(bound))))} {count}")
    lines.append(f"{name}_bucket{render_labels((*full, ('le', '+Inf')))} {h.count}")
    labels = render_labels(full)
    lines.append(f"{name}_sum{labels} {_number(h.sum)}")
    lines.append(f"{name}_count{labels} {h.count}")
    return lines
