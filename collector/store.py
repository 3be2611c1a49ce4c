"""The store: the latest value of every series, the counter state behind it, and the collector's health.

Sources hand ``Sample``s to ``Store.ingest``; the exporter renders a snapshot of ``Store.families`` at
scrape time and never talks to a device; every ingested reading is also handed to the archive sink.
Everything runs on the daemon's event loop, so no locking is needed.

Ingest is also where untrusted values stop (issue 16): a reading the catalogue cannot hold (a counter
that is negative, above 2^64-1, NaN, infinite or not an integer; a gauge that is not a number) is
dropped and counted in ``spanwatch_invalid_values_total`` with one rate-limited log line, so no value a
device sends can stop a stream, a poll or the archive. A target may hold at most ``max_series`` series;
new series beyond it are dropped and counted in ``spanwatch_series_dropped_total`` (a gNMI decoder given
the cap drops them before decoding them, ``series_dropped``, so a flood of names costs no memory).
Per-series state (label cache, counter tracks) goes with its series when it expires, so churn does not
leak memory.

Memory (issue 33, "a compact store"): a device's series of one label set (an interface's ten counters)
share one ``LabelSet``, its full labels and its rendered text, so a series holds no strings or tuples
of its own; the exposition joins the family name, that text and the value at scrape time.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from collector import counters
from collector.clock import Clock, SystemClock
from collector.contracts.catalog import CATALOG, HISTOGRAM_BUCKETS, POLL_DURATION_BUCKETS, MetricSpec
from collector.lograte import RateLimitedLog
from collector.model import ArchiveRow, Labels, Sample

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

SPEED_METRIC = "dci_interface_speed_bytes_per_second"
MIN_FRAME_BYTES = 64  # the smallest Ethernet frame: packets per second never exceed speed / 64
BOUND_SLACK_SECONDS = 0.1  # poll-to-poll jitter allowed on top of the elapsed time
# catalogue unit of a counter -> interface bytes per unit: its largest rate is speed / this
_BYTES_PER_UNIT = {
    "bytes": 1,
    "packets": MIN_FRAME_BYTES,
    "frames": MIN_FRAME_BYTES,
    "blocks": MIN_FRAME_BYTES,
}
Ident = tuple[str, str, Labels]
"""(device, metric, sample labels): one device series."""

FullLabels = tuple[tuple[str, str], ...]
"""Every label of an exported series, in exposition order (device first)."""


class ArchiveSink(Protocol):
    """Where every ingested reading goes at full resolution (``exporters.archive.Archive``)."""

    def add(self, row: ArchiveRow) -> None: ...


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
    """A cumulative histogram with fixed buckets (the catalogue's ``HISTOGRAM_BUCKETS``)."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = POLL_DURATION_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Count one observation."""
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


NO_KEY: tuple[str, Labels] = ("", ())
"""The ``LabelSet.key`` of a series that is not a device's reading."""


class LabelSet:
    """What series share: one device's series of one set of sample labels, across metrics (an
    interface's counters); any other series (health, links, probes) has one of its own.

    Attributes:
        full: the exported labels (device, target labels, sample labels, link).
        text: ``full`` rendered (``{a="1"}``), or "" in a store that is not rendered.
        owner: the device the series belong to, so a removed target's series go with it.
        ttl: seconds without a reading after which the series expire (inf: never).
        key: device series: ``(device, sample labels)``, its key in the store (``NO_KEY`` for any other).
        link: the link its member belongs to, or None.
        series: device series: how many series use it (it goes with the last); 0 for any other.
    """

    __slots__ = ("full", "key", "link", "owner", "series", "text", "ttl")

    def __init__(
        self,
        full: FullLabels,
        text: str,
        owner: str | None,
        ttl: float = math.inf,
        key: tuple[str, Labels] = NO_KEY,
        link: str | None = None,
    ) -> None:
        self.full = full
        self.text = text
        self.owner = owner
        self.ttl = ttl
        self.key = key
        self.link = link
        self.series = 0


class Tracks(Mapping[Ident, counters.CounterTrack]):
    """One source's counter state by series (``(device, metric, labels)``), held per label set: the
    counters of one interface share a small dict keyed by metric, so a series needs no key of its own."""

    __slots__ = ("_by_set", "_count")

    def __init__(self) -> None:
        self._by_set: dict[tuple[str, Labels], dict[str, counters.CounterTrack]] = {}
        self._count = 0

    def __getitem__(self, ident: Ident) -> counters.CounterTrack:
        device, metric, lbls = ident
        return self._by_set[(device, lbls)][metric]

    def __iter__(self) -> Iterator[Ident]:
        for (device, lbls), tracks in self._by_set.items():
            for metric in tracks:
                yield (device, metric, lbls)

    def __len__(self) -> int:
        return self._count

    def of(self, key: tuple[str, Labels]) -> dict[str, counters.CounterTrack]:
        """The tracks of one label set (``LabelSet.key``), by metric; add to them with ``add``."""
        return self._by_set.get(key) or {}

    def add(self, key: tuple[str, Labels], metric: str, track: counters.CounterTrack) -> None:
        tracks = self._by_set.get(key)
        if tracks is None:
            tracks = self._by_set[key] = {}
        tracks[metric] = track
        self._count += 1

    def discard(self, key: tuple[str, Labels], metric: str) -> None:
        tracks = self._by_set.get(key)
        if tracks is not None and tracks.pop(metric, None) is not None:
            self._count -= 1
            if not tracks:
                del self._by_set[key]

    def drop_device(self, device: str) -> None:
        for key in [k for k in self._by_set if k[0] == device]:
            self._count -= len(self._by_set.pop(key))


@dataclass(slots=True, eq=False)
class Series:
    """One exported series: its latest value, when it last moved, and its labels (``LabelSet``, shared
    by a device's series of one label set). The family name is its key in ``Store.families``.

    Compared and hashed by identity: the change log (``Changes``) keys on the object.
    """

    value: int | float | Histogram
    updated: float
    labelset: LabelSet
    source: str | None = None  # the protocol feeding it, when a device series
    relay_id: int = -1  # in a worker: its id towards the supervisor (``relay.Outbox``); -2 once gone

    @property
    def labels_text(self) -> str:
        """Its labels rendered, ``{a="1"}`` ("" in a store that is not rendered)."""
        return self.labelset.text

    @property
    def owner(self) -> str | None:
        """The device it belongs to."""
        return self.labelset.owner

    @property
    def ttl(self) -> float:
        return self.labelset.ttl


class Changes:
    """What changed in a store since the last ``take`` (a worker relays it to the daemon's exposition).

    Attributes:
        new: series created, with their family name and labels.
        dirty: series whose value changed.
        gone: series removed (expired, forgotten, their device dropped).
    """

    __slots__ = ("dirty", "gone", "new")

    def __init__(self) -> None:
        self.new: list[tuple[Series, str, FullLabels]] = []
        self.dirty: set[Series] = set()
        self.gone: list[Series] = []

    def take(self) -> tuple[list[tuple[Series, str, FullLabels]], set[Series], list[Series]]:
        """The changes so far, and a fresh start."""
        out = (self.new, self.dirty, self.gone)
        self.new, self.dirty, self.gone = [], set(), []
        return out


@dataclass(frozen=True, slots=True)
class TargetLabels:
    """What the store adds to every series of a target."""

    static: FullLabels = ()
    ttl: float = math.inf
    max_series: int | None = None  # new series beyond this many are dropped (None: no cap)
    # ("interface", name) or ("component", name) -> the link that member belongs to
    links: Mapping[tuple[str, str], str] = field(default_factory=dict)


class Store:
    """Latest values per series, counter state and collector health, keyed by catalogue name."""

    def __init__(
        self, clock: Clock | None = None, archive: ArchiveSink | None = None, rendered: bool = True
    ) -> None:
        self.clock = clock or SystemClock()
        self.archive = archive
        # A worker process' store is relayed, never rendered: its series need no rendered labels.
        self.rendered = rendered
        self.families: dict[str, dict[FullLabels, Series]] = {}
        self._targets: dict[str, TargetLabels] = {}
        # Counter state per source: SNMP and gNMI reading the same counter must not look like resets.
        self._tracks: dict[str, Tracks] = {}
        # (device, sample labels) -> the label set its series share (one per interface, not per series)
        self._keys: dict[tuple[str, Labels], LabelSet] = {}
        self._count: dict[str, int] = {}  # device -> its device series (the cap's count)
        self._speed: dict[tuple[str, str], float] = {}  # (device, interface) -> bytes/s, for rate bounds
        self._device_pairs: dict[str, tuple[str, str]] = {}
        self.changes: Changes | None = None  # set by a worker process: every change is logged for relay

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
                self._gone(family.pop(key))
        for tracks in self._tracks.values():
            tracks.drop_device(device)
        self._keys = {k: v for k, v in self._keys.items() if k[0] != device}
        self._speed = {k: v for k, v in self._speed.items() if k[0] != device}
        self._count.pop(device, None)
        self._device_pairs.pop(device, None)

    # -- device data ----------------------------------------------------------------------------
    def ingest(self, device: str, source: str, samples: Iterable[Sample], received_ns: int) -> int:
        """Fold readings of ``device`` into the store and the archive.

        When two sources (SNMP and gNMI) feed the same series, the one that feeds it first keeps it while
        it stays fresh; the other's readings are archived (with their ``source``) but not exported.
        Invalid readings and new series beyond the target's cap are dropped and counted (module docstring).

        Returns:
            how many samples were ingested.
        """
        now = self.clock.monotonic()
        target = self._targets.get(device) or TargetLabels()
        archive = self.archive
        tracks = self._tracks.get(source)
        if tracks is None:
            tracks = self._tracks[source] = Tracks()
        families, keys, changes = self.families, self._keys, self.changes
        n = 0
        # Samples of one label set come together (an interface's counters, sharing one labels tuple):
        # its label set and counter tracks are looked up once for the run, not once per sample.
        run_labels: Labels | None = None
        run_set: LabelSet | None = None
        run_tracks: dict[str, counters.CounterTrack] | None = None
        for s in samples:
            metric = s.metric
            is_counter = _IS_COUNTER.get(metric)
            if is_counter is None:
                is_counter = _IS_COUNTER[metric] = _spec(metric).is_counter
            raw = s.raw
            # The common valid readings pass inline; anything else is judged by ``_invalid``.
            if not (
                (raw.__class__ is int and 0 <= raw <= counters.MAX64 and math.isfinite(s.scale))
                if is_counter
                else s.value.__class__ is float
            ):
                problem = _invalid(s, is_counter)
                if problem is not None:
                    self.invalid(device, source, problem, metric)
                    continue
            family = families.get(metric)
            if family is None:
                family = families[metric] = {}
            if s.labels is not run_labels:
                run_labels, run_set, run_tracks = s.labels, keys.get((device, s.labels)), None
            ls = run_set
            series = family.get(ls.full) if ls is not None else None
            if series is None or ls is None:
                ls = self._admit(device, ls, target, s, source)
                if ls is None:
                    continue
                run_set = ls
            n += 1
            value: int | float
            if raw is None:
                value = s.value
                exact = None
                if metric == SPEED_METRIC:
                    self._note_speed(device, s)
            else:
                if run_tracks is None:
                    run_tracks = tracks.of(ls.key)
                track = run_tracks.get(metric)
                if track is None:
                    track = counters.start(raw, s.epoch, now)
                    tracks.add(ls.key, metric, track)
                    run_tracks = None  # ``of`` may have answered a fresh empty dict
                else:
                    elapsed = now - track.seen
                    track.seen = now
                    up = raw - track.last_raw
                    if up >= 0 and s.epoch == track.epoch:
                        # The common reading (no decrease, same epoch) counts its increase whatever the
                        # bound (``counters.advance``): inline, without working out a bound it ignores.
                        track.last_raw = raw
                        track.total += up
                        if elapsed > 0 and up / elapsed > track.peak:
                            track.peak = up / elapsed
                    elif counters.advance(
                        track, raw, s.width, s.epoch, self._bound(device, s, elapsed), elapsed
                    ):
                        self.inc(
                            "dci_counter_discontinuities_total", (("device", device), ("metric", metric))
                        )
                if s.scale == 1.0:
                    value = exact = track.total
                else:  # a counter in other units (µs, ms): exported scaled, no exact integer in catalogue units
                    value, exact = track.total * s.scale, None
            if series is None:
                family[ls.full] = series = Series(value, now, ls, source)
                if changes is not None:
                    changes.new.append((series, metric, ls.full))
            # The first source to feed a series keeps it while it stays fresh (SNMP and gNMI may both read it).
            elif series.source == source or now - series.updated > ls.ttl:
                series.value = value
                series.updated = now
                series.source = source
                if changes is not None:
                    changes.dirty.add(series)
            if archive is not None:
                time_ns = s.time_ns if s.time_ns is not None else received_ns
                archive.add(
                    (time_ns, received_ns, device, source, metric, s.labels, ls.link, float(value), exact)
                )
        return n

    def invalid(self, device: str, source: str, reason: str, what: str = "") -> None:
        """Count a reading that was dropped as invalid, with one rate-limited log line per reason."""
        self.inc(
            "spanwatch_invalid_values_total", (("device", device), ("source", source), ("reason", reason))
        )
        _limited.log(
            logging.WARNING,
            ("invalid", device, source, reason),
            "%s %s: dropped a value (%s)%s; counted in spanwatch_invalid_values_total",
            source,
            device,
            reason,
            f" of {what}" if what else "",
        )

    def series_dropped(self, device: str, source: str, readings: int = 1) -> None:
        """Count readings of new series dropped at the target's series cap, with a rate-limited log line
        (the store drops them; a gNMI decoder that knows the cap drops them before they are decoded)."""
        self.inc("spanwatch_series_dropped_total", (("device", device),), readings)
        _limited.log(
            logging.WARNING,
            ("series cap", device),
            "%s %s: %d series, the cap: new series are dropped (spanwatch_series_dropped_total)",
            source,
            device,
            self._count.get(device, 0),
        )

    def holds(self, device: str, metric: str, lbls: Labels) -> bool:
        """Whether the store still keeps state for this device series (sources prune their caches by it)."""
        return self._held(device, metric, lbls) is not None

    def _held(self, device: str, metric: str, lbls: Labels) -> Series | None:
        """The device series of ``device``, ``metric`` and sample labels ``lbls``, or None."""
        ls = self._keys.get((device, lbls))
        if ls is None:
            return None
        series = self.families.get(metric, {}).get(ls.full)
        return series if series is not None and series.labelset is ls else None

    def _admit(
        self, device: str, ls: LabelSet | None, target: TargetLabels, s: Sample, source: str
    ) -> LabelSet | None:
        """Make room for a new series: its (possibly new) label set, or None at the target's cap (counted)."""
        count = self._count.get(device, 0)
        if target.max_series is not None and count >= target.max_series:
            self.series_dropped(device, source)
            return None
        if ls is None:
            key = (device, s.labels)
            full, link = self._compose(device, target, s)
            ls = self._keys[key] = LabelSet(full, self._text(full), device, target.ttl, key, link)
        ls.series += 1
        self._count[device] = count + 1
        return ls

    def _note_speed(self, device: str, s: Sample) -> None:
        interface = next((v for k, v in s.labels if k == "interface"), None)
        if interface is not None:
            # Some agents report speed 0 for sub-interfaces: unknown, not "no traffic possible".
            if s.value > 0:
                self._speed[(device, interface)] = float(s.value)
            else:
                self._speed.pop((device, interface), None)

    def _bound(self, device: str, s: Sample, elapsed: float) -> float | None:
        """How far the counter of ``s`` can have moved in ``elapsed`` seconds (device units), or None."""
        metric = s.metric
        if metric in _PER_UNIT:
            per_unit = _PER_UNIT[metric]
        else:
            per_unit = _PER_UNIT[metric] = _BYTES_PER_UNIT.get(CATALOG[metric].unit)
        if per_unit is None or s.scale != 1.0:
            return None
        interface = _interface_of(s.labels)
        speed = self._speed.get((device, interface or ""))
        if speed is None:
            return None
        return speed / per_unit * (max(elapsed, 0.0) + BOUND_SLACK_SECONDS)

    def forget(self, device: str, metric: str, lbls: Labels) -> None:
        """Remove one series now (a gNMI delete notification)."""
        for tracks in self._tracks.values():
            tracks.discard((device, lbls), metric)
        series = self._held(device, metric, lbls)
        if series is not None:
            del self.families[metric][series.labelset.full]
            self._gone(series)
            self._prune(metric, series.labelset)

    def _prune(self, metric: str, ls: LabelSet) -> None:
        """Forget the per-series state of a removed series (counter tracks, the cap's count, its label set
        once no series uses it)."""
        device, lbls = ls.key
        for tracks in self._tracks.values():
            tracks.discard(ls.key, metric)
        left = self._count.get(device, 1) - 1
        if left > 0:
            self._count[device] = left
        else:
            self._count.pop(device, None)
        ls.series -= 1
        if ls.series <= 0 and self._keys.get(ls.key) is ls:
            del self._keys[ls.key]
        if metric == SPEED_METRIC:
            interface = next((v for k, v in lbls if k == "interface"), None)
            self._speed.pop((device, interface or ""), None)

    def _compose(self, device: str, target: TargetLabels, s: Sample) -> tuple[FullLabels, str | None]:
        link = None
        if target.links:
            link = next((target.links[kv] for kv in s.labels if kv in target.links), None)
        pair = self._device_pairs.get(device)
        if pair is None:  # one ("device", name) pair shared by every series of the device
            pair = self._device_pairs[device] = ("device", device)
        full = (pair, *target.static, *s.labels)
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
        for metric, family in self.families.items():
            stale = [k for k, s in family.items() if now - s.updated > s.labelset.ttl]
            for key in stale:
                series = family.pop(key)
                self._gone(series)
                if series.labelset.series:  # a device series
                    self._prune(metric, series.labelset)
            dropped += len(stale)
        return dropped

    # -- collector health --------------------------------------------------------------------------
    def set(self, metric: str, full: FullLabels, value: float) -> None:
        """Set a health or link gauge."""
        self._put(metric, full, value, self.clock.monotonic())

    def inc(self, metric: str, full: FullLabels, amount: int = 1) -> None:
        """Add to a health counter, creating it at zero."""
        series = self.families.get(metric, {}).get(full)
        if series is None:
            self._put(metric, full, amount, self.clock.monotonic())
        else:
            series.value += amount  # type: ignore[operator]
            if self.changes is not None:
                self.changes.dirty.add(series)

    def observe(self, metric: str, full: FullLabels, value: float) -> None:
        """Record one observation in a histogram."""
        family = self.families.setdefault(metric, {})
        series = family.get(full)
        if series is None:
            bounds = HISTOGRAM_BUCKETS[metric]
            series = Series(Histogram(bounds), math.inf, self._single(full))
            family[full] = series
            if self.changes is not None:
                self.changes.new.append((series, metric, full))
        assert isinstance(series.value, Histogram)
        series.value.observe(value)
        if self.changes is not None:
            self.changes.dirty.add(series)

    def series_count(self) -> int:
        """How many series the store holds."""
        return sum(map(len, self.families.values()))

    def value(self, metric: str, full: FullLabels) -> int | float | Histogram | None:
        """The current value of one series, or None."""
        series = self.families.get(metric, {}).get(full)
        return None if series is None else series.value

    def _put(self, metric: str, full: FullLabels, value: float, now: float) -> None:
        """Set a series that is not a device's reading (health, links, probes), creating it."""
        family = self.families.get(metric)
        if family is None:
            if CATALOG.get(metric) is None:
                raise KeyError(f"{metric} is not in the metric catalogue")
            family = self.families[metric] = {}
        series = family.get(full)
        if series is None:
            family[full] = series = Series(value, now, self._single(full))
            if self.changes is not None:
                self.changes.new.append((series, metric, full))
        else:
            series.value = value
            series.updated = now
            series.source = None
            if self.changes is not None:
                self.changes.dirty.add(series)

    def _text(self, full: FullLabels) -> str:
        return render_labels(full) if self.rendered else ""

    def _single(self, full: FullLabels) -> LabelSet:
        """The labels of a series that is not a device's reading (health, links, probes)."""
        return LabelSet(full, self._text(full), _owner(full))

    def _gone(self, series: Series) -> None:
        if self.changes is not None:
            self.changes.gone.append(series)


_IS_COUNTER: dict[str, bool] = {}  # metric -> whether the catalogue says counter (ingest's hot loop)
_PER_UNIT: dict[str, float | None] = {}  # metric -> ``_BYTES_PER_UNIT`` of its unit (``_bound``)


@functools.lru_cache(maxsize=1 << 16)
def _interface_of(lbls: Labels) -> str | None:
    """The ``interface`` label's value (sample labels repeat: looked up once each)."""
    return next((v for k, v in lbls if k == "interface"), None)


def _spec(metric: str) -> MetricSpec:
    spec = CATALOG.get(metric)
    if spec is None:
        raise KeyError(f"{metric} is not in the metric catalogue")
    return spec


def _invalid(s: Sample, is_counter: bool) -> str | None:
    """Why the catalogue cannot hold ``s`` (the ``reason`` label), or None when it can."""
    if is_counter:
        raw = s.raw
        if raw is None or not isinstance(raw, int) or isinstance(raw, bool):
            value = s.value if raw is None else raw
            if isinstance(value, float) and math.isnan(value):
                return "nan"
            if isinstance(value, float) and math.isinf(value):
                return "inf"
            return "not_an_integer"
        if raw < 0:
            return "negative"
        if raw > counters.MAX64:
            return "above_uint64"
        if not math.isfinite(s.scale):
            return "not_a_number"
        return None
    # A gauge may be NaN or infinite (Prometheus and the archive hold both; a dead optic reads -Inf dBm).
    return None if isinstance(s.value, int | float) else "not_a_number"


def _owner(full: FullLabels) -> str | None:
    return full[0][1] if full and full[0][0] == "device" else None
