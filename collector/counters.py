"""Counter semantics: turn device readings into monotonic totals (spec: metrics.md, "Counters").

A Counter32 that goes down wrapped (2^32 is added); a Counter64 that goes down, or any counter whose
discontinuity epoch changed (reboot seen through sysUpTime, ifCounterDiscontinuityTime, gNMI last-clear),
was reset: the exported series restarts at the device's value and the reset is reported. Arithmetic stays
in Python integers, so totals stay exact past 2^53.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

WRAP32 = 1 << 32


@dataclass(slots=True)
class CounterTrack:
    """What one series remembers between readings."""

    last_raw: int
    total: int
    epoch: Hashable


def start(raw: int, epoch: Hashable) -> CounterTrack:
    """The track of a series seen for the first time: the total starts at the device's value."""
    return CounterTrack(raw, raw, epoch)


def advance(track: CounterTrack, raw: int, width: int, epoch: Hashable) -> bool:
    """Fold one reading into ``track``.

    Returns:
        True when the reading reveals a reset (the series restarted), else False.
    """
    reset = epoch != track.epoch or (raw < track.last_raw and width != 32)
    if reset:
        track.total = raw
    elif raw >= track.last_raw:
        track.total += raw - track.last_raw
    else:  # a Counter32 went down without a reset marker: it wrapped
        track.total += raw + WRAP32 - track.last_raw
    track.last_raw = raw
    track.epoch = epoch
    return reset
