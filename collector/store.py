"""The store: the latest value of every series, the counter state behind it, and the collector's health.

Sources hand ``Sample``s to ``Store.ingest``; the exporter renders a snapshot of ``Store.families`` at
scrape time and never talks to a device; every ingested reading is also handed to the archive sink.
Everything runs on the daemon's event loop, so no locking is needed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from collector import counters
from collector.clock import Clock, SystemClock
from collector.contracts.catalog import CATALOG, POLL_DURATION_BUCKETS
from collector.model import Labels, Sample

FullLabels = tuple[tuple[str, str], ...]
"""Every label of an exported series, in exposition order (device first)."""


class ArchiveSink(Protocol):
    """Where every ingested reading goes at full resolution (``exporters.archive.Archive``)."""

    def add(
        self,
        time_ns: int,
        received_ns: int,
        device: str,
        source: str,
        metric: str,
        lbls: Labels,
        link: str | None,
        value: float,
        counter: int | None,
    ) -> None: ...


def escape(value: str) -> str:
    """Escape a label value for the Prometheus text format."""
    if "\\" in value or '"' in value or "\n" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def render_labels(pairs: FullLabels) -> str:
    """``{a="1",b="2"}``, or the empty string when there are no labels."""
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in pairs) + "}"


class Histogram:
    """A cumulative histogram with fixed buckets (enough for ``spanwatch_poll_duration_seconds``)."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = POLL_DURATION_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
                break
        self.count += 1
        self.sum += value

    def cumulative(self) -> list[int]:
        out, running = [], 0
        for c in self.counts:
            running += c
            out.append(running)
        return out


@dataclass(slots=True)
class Series:
    """One exported series: its rendered name and labels, latest value, and when it last moved."""

    prefix: str
    value: int | float | Histogram
    updated: float
    ttl: float
    owner: str | None = None  # the device it belongs to, so a removed target's series go with it
    source: str | None = None  # the protocol feeding it, when a device series


@dataclass(frozen=True, slots=True)
class TargetLabels:
    """What the store adds to every series of a target."""

    static: FullLabels = ()
    ttl: float = math.inf
    # ("interface", name) or ("component", name) -> the link that member belongs to
    links: Mapping[tuple[str, str], str] = field(default_factory=dict)


class Store:
    """Latest values per series, counter state and collector health, keyed by catalogue name."""

    def __init__(self, clock: Clock | None = None, archive: ArchiveSink | None = None) -> None:
        self.clock = clock or SystemClock()
        self.archive = archive
        self.families: dict[str, dict[FullLabels, Series]] = {}
        self._targets: dict[str, TargetLabels] = {}
        # Counter state per source: SNMP and gNMI reading the same counter must not look like resets.
        self._tracks: dict[str, dict[tuple[str, str, Labels], counters.CounterTrack]] = {}
        # (device, metric, sample labels) -> (full labels, link): composing labels once per series.
        self._keys: dict[tuple[str, str, Labels], tuple[FullLabels, str | None]] = {}

    # -- targets -------------------------------------------------------------------------------
    def set_target(self, device: str, info: TargetLabels) -> None:
        """Register (or re-register after a reload) what every series of ``device`` carries."""
        if self._targets.get(device) != info:
            self.drop_device(device)
        self._targets[device] = info

    def drop_device(self, device: str) -> None:
        """Forget every series, counter track and label cache entry of ``device``."""
        self._targets.pop(device, None)
        for family in self.families.values():
            for key in [k for k, s in family.items() if s.owner == device]:
                del family[key]
        for source, tracks in self._tracks.items():
            self._tracks[source] = {k: v for k, v in tracks.items() if k[0] != device}
        self._keys = {k: v for k, v in self._keys.items() if k[0] != device}

    # -- device data ----------------------------------------------------------------------------
    def ingest(self, device: str, source: str, samples: Iterable[Sample], received_ns: int) -> int:
        """Fold readings of ``device`` into the store and the archive.

        When two sources (SNMP and gNMI) feed the same series, the one that feeds it first keeps it while
        it stays fresh; the other's readings are archived (with their ``source``) but not exported.

        Returns:
            how many samples were ingested.
        """
        now = self.clock.monotonic()
        target = self._targets.get(device) or TargetLabels()
        archive = self.archive
        tracks = self._tracks.setdefault(source, {})
        n = 0
        for s in samples:
            n += 1
            ident = (device, s.metric, s.labels)
            cached = self._keys.get(ident)
            if cached is None:
                cached = self._compose(device, target, s)
                self._keys[ident] = cached
            full, link = cached
            value: int | float
            if s.raw is None:
                value = s.value
                exact = None
            else:
                track = tracks.get(ident)
                if track is None:
                    tracks[ident] = track = counters.start(s.raw, s.epoch)
                elif counters.advance(track, s.raw, s.width, s.epoch):
                    self.inc("dci_counter_discontinuities_total", (("device", device), ("metric", s.metric)))
                if s.scale == 1.0:
                    value = exact = track.total
                else:  # a counter in other units (µs, ms): exported scaled, no exact integer in catalogue units
                    value, exact = track.total * s.scale, None
            self._export(s.metric, full, value, now, target.ttl, device, source)
            if archive is not None:
                time_ns = s.time_ns if s.time_ns is not None else received_ns
                archive.add(
                    time_ns, received_ns, device, source, s.metric, s.labels, link, float(value), exact
                )
        return n

    def forget(self, device: str, metric: str, lbls: Labels) -> None:
        """Remove one series now (a gNMI delete notification)."""
        ident = (device, metric, lbls)
        cached = self._keys.pop(ident, None)
        for tracks in self._tracks.values():
            tracks.pop(ident, None)
        if cached is not None:
            self.families.get(metric, {}).pop(cached[0], None)

    def _compose(self, device: str, target: TargetLabels, s: Sample) -> tuple[FullLabels, str | None]:
        if s.metric not in CATALOG:
            raise KeyError(f"{s.metric} is not in the metric catalogue")
        link = None
        if target.links:
            link = next((target.links[kv] for kv in s.labels if kv in target.links), None)
        full = (("device", device), *target.static, *s.labels)
        if link is not None:
            full = (*full, ("link", link))
        return full, link

    def expire(self) -> int:
        """Drop device series that stopped reporting for longer than their target's TTL.

        Returns:
            how many series were dropped.
        """
        now = self.clock.monotonic()
        dropped = 0
        for family in self.families.values():
            stale = [k for k, s in family.items() if now - s.updated > s.ttl]
            for key in stale:
                del family[key]
            dropped += len(stale)
        return dropped

    # -- collector health --------------------------------------------------------------------------
    def set(self, metric: str, full: FullLabels, value: float) -> None:
        """Set a health or link gauge."""
        self._put(metric, full, value, self.clock.monotonic(), math.inf, _owner(full))

    def inc(self, metric: str, full: FullLabels, amount: int = 1) -> None:
        """Add to a health counter, creating it at zero."""
        series = self.families.get(metric, {}).get(full)
        if series is None:
            self._put(metric, full, amount, self.clock.monotonic(), math.inf, _owner(full))
        else:
            series.value += amount  # type: ignore[operator]

    def observe(self, metric: str, full: FullLabels, value: float) -> None:
        """Record one observation in a histogram."""
        family = self.families.setdefault(metric, {})
        series = family.get(full)
        if series is None:
            series = Series(metric + render_labels(full), Histogram(), math.inf, math.inf, _owner(full))
            family[full] = series
        assert isinstance(series.value, Histogram)
        series.value.observe(value)

    def value(self, metric: str, full: FullLabels) -> int | float | Histogram | None:
        """The current value of one series, or None."""
        series = self.families.get(metric, {}).get(full)
        return None if series is None else series.value

    def _export(
        self, metric: str, full: FullLabels, value: float, now: float, ttl: float, device: str, source: str
    ) -> None:
        family = self.families.get(metric)
        series = family.get(full) if family is not None else None
        # The first source to feed a series keeps it while it stays fresh (SNMP and gNMI may both read it).
        if series is None or series.source == source or now - series.updated > series.ttl:
            self._put(metric, full, value, now, ttl, device, source)

    def _put(
        self,
        metric: str,
        full: FullLabels,
        value: float,
        now: float,
        ttl: float,
        owner: str | None,
        source: str | None = None,
    ) -> None:
        family = self.families.get(metric)
        if family is None:
            if CATALOG.get(metric) is None:
                raise KeyError(f"{metric} is not in the metric catalogue")
            family = self.families[metric] = {}
        series = family.get(full)
        if series is None:
            family[full] = Series(metric + render_labels(full), value, now, ttl, owner, source)
        else:
            series.value = value
            series.updated = now
            series.source = source


def _owner(full: FullLabels) -> str | None:
    return full[0][1] if full and full[0][0] == "device" else None
