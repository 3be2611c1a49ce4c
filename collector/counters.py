"""Counter semantics: turn device readings into monotonic totals (spec: metrics.md, "Counters").

A Counter32 that goes down wrapped (2^32 is added); a Counter64 that goes down, or any counter whose
discontinuity epoch changed (reboot seen through sysUpTime, ifCounterDiscontinuityTime, gNMI last-clear),
was reset: the exported series restarts at the device's value and the reset is reported. Arithmetic stays
in Python integers, so totals stay exact past 2^53.

When the store knows how far the counter can move in the elapsed time (``bound``: interface speed x
interval), it uses it to settle what a decrease alone cannot (issue 16, "false spikes"):

- a Counter32 decrease is a wrap only when the unwrapped increase fits the bound; otherwise the counter was
  cleared (a reset);
- a changed epoch whose reading cannot be a count since a reset (above the bound) while it continues the
  previous reading plausibly is a false marker (the 497-day sysUpTime wrap): the counter just goes on;
- a reset whose new reading is above the bound (a sum of Counter32 parts where one part wrapped, a marker
  that lies) cannot be "counted since the reset": the total holds for that interval instead of restarting
  at the reading, which Prometheus would count whole.

Whatever happens, the increase Prometheus computes (the delta, or the new value after a decrease) never
exceeds the bound: the choices are made so that an ambiguous case undercounts one interval rather than
spikes.

Agents without ifHighSpeed (exactly the Counter32-only ones) give no speed (issue 34). The bound then
comes from the series itself: ``HEADROOM`` times the largest rate it has shown (``peak``) over the interval.
Until a rate has been seen, a Counter32 decrease without a marker is ambiguous (a wrap or a clear): it is
read as whichever counts less (a clear counted the reading since; a wrap the unwrapped increase), which is
never more than the truth. A sum of Counter32 parts (``combine``) stays 32 bits wide: a decrease is as
many wraps of its parts as make it an increase, which the bound then judges like a single counter's wrap.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

WRAP32 = 1 << 32
MAX64 = (1 << 64) - 1
HEADROOM = 2.0  # without a known speed: a counter may grow at twice the largest rate it has shown
PEAK_SLACK_SECONDS = 1.0  # polls jitter: the interval measured here is not the device's exactly


@dataclass(slots=True)
class CounterTrack:
    """What one series remembers between readings (``seen``: when, in the store's monotonic seconds)."""

    last_raw: int
    total: int
    epoch: Hashable
    seen: float = 0.0
    peak: float = 0.0  # the largest rate (device units per second) the series has shown


def start(raw: int, epoch: Hashable, seen: float = 0.0) -> CounterTrack:
    """The track of a series seen for the first time: the total starts at the device's value."""
    return CounterTrack(raw, raw, epoch, seen)


def advance(
    track: CounterTrack,
    raw: int,
    width: int,
    epoch: Hashable,
    bound: float | None = None,
    elapsed: float | None = None,
) -> bool:
    """Fold one reading into ``track``.

    Args:
        track: the series' state.
        raw: the device's reading.
        width: 32 for a Counter32 or a sum of Counter32 parts (a decrease may be wraps), 64 otherwise.
        epoch: the discontinuity epoch the device reports.
        bound: the most the counter can have grown since the last reading (device units), or None when
            unknown: then it comes from the largest rate the series has shown over ``elapsed``.
        elapsed: seconds since the last reading, or None when unknown.

    Returns:
        True when the reading reveals a discontinuity (the series restarted or held), else False.
    """
    up = raw - track.last_raw
    # a Counter32 wraps once; a sum of n of them by as many wraps as make the difference an increase
    wrapped = up + -(up // WRAP32) * WRAP32 if width == 32 and up < 0 else None
    marker = epoch != track.epoch
    track.last_raw = raw
    track.epoch = epoch
    if bound is None and elapsed is not None and track.peak > 0:
        bound = HEADROOM * track.peak * (max(elapsed, 0.0) + PEAK_SLACK_SECONDS)
    held = track.total
    restarted = _fold(track, raw, up, wrapped, marker, bound)
    if not restarted and elapsed is not None and elapsed > 0:
        track.peak = max(track.peak, (track.total - held) / elapsed)
    return restarted


def _fold(
    track: CounterTrack, raw: int, up: int, wrapped: int | None, marker: bool, bound: float | None
) -> bool:
    if bound is None:
        if marker or (up < 0 and wrapped is None):
            track.total = raw
            return True
        if up >= 0:
            track.total += up
            return False
        assert wrapped is not None
        # A wrap or a clear, and no rate yet to tell them apart: the one that counts less, which is never
        # more than the truth (a clear counted ``raw`` since; a wrap ``wrapped``).
        if wrapped <= raw:
            track.total += wrapped
            return False
        track.total = raw
        return True
    continues = 0 <= up <= bound or (wrapped is not None and wrapped <= bound)
    if marker and raw > bound and continues:
        marker = False  # no count since a reset can be this high: the marker lied, the counter went on
    if not marker and up >= 0:
        track.total += up
        return False
    if not marker and wrapped is not None and wrapped <= bound:
        track.total += wrapped
        return False
    if raw <= bound:
        track.total = raw  # a reset: the reading is what was counted since
    # else: hold the total; restarting at a reading above the bound would be a spike
    return True
