"""Folding a backlog of readings into what the store needs (issue 18, "never silently behind").

When a target falls more than one sample interval behind, its queued readings are folded before they
reach the store: per series, a counter keeps only its newest reading (exact: a counter is a running
total, so the newest reading carries every increment before it, and a reset is still seen through the
epoch or the decrease), and a gauge keeps the interval's minimum, maximum and newest reading, in arrival
order, so a watermark or a dip survives and the exposition ends on the newest value.
"""

from __future__ import annotations

from collections.abc import Iterable

from collector.model import Labels, Sample


def coalesce(samples: Iterable[Sample]) -> tuple[list[Sample], int]:
    """Fold readings that arrived oldest first.

    Args:
        samples: the backlog's readings, in arrival order.

    Returns:
        the readings to ingest (in arrival order) and how many were folded away.
    """
    # series -> [min index, max index, newest index]; counters use only the newest
    kept: dict[tuple[str, Labels], list[int]] = {}
    items = list(samples)
    for i, s in enumerate(items):
        key = (s.metric, s.labels)
        slot = kept.get(key)
        if slot is None:
            kept[key] = [i, i, i]
            continue
        if s.raw is None:
            if s.value < items[slot[0]].value:
                slot[0] = i
            if s.value > items[slot[1]].value:
                slot[1] = i
        slot[2] = i
    keep: set[int] = set()
    for low, high, newest in kept.values():
        keep.add(newest)
        if items[newest].raw is None:
            keep.add(low)
            keep.add(high)
    out = [items[i] for i in sorted(keep)]
    return out, len(items) - len(out)
