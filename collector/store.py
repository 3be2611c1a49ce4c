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

Memory (issue 33, "a compact store"): a device's series are no objects. Each holds a slot in the store's
columns (a few flat lists and arrays: value, when it moved, source, relay id, counter state); the series
of one label set (an interface's counters) form a ``Row`` that keeps their labels and rendered text once
and their slots in one array, in the order of a ``Shape`` (the row's metrics) that rows of the same kind
share. The exposition joins the family name, the row's text and the value at scrape time.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import math
from array import array
from bisect import bisect_left
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, cast

from collector import counters
from collector.clock import Clock, SystemClock
from collector.contracts.catalog import CATALOG, HISTOGRAM_BUCKETS, POLL_DURATION_BUCKETS, MetricSpec
from collector.lograte import RateLimitedLog
from collector.model import ArchiveRow, CounterReading, Labels, Sample, SeriesHandle, sample_of

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
        i = bisect_left(self.bounds, value)  # the first bucket whose bound is >= value
        if i < len(self.counts) and value <= self.bounds[i]:  # NaN: in no bucket, as under the linear walk
            self.counts[i] += 1
        self.count += 1
        self.sum += value

    def cumulative(self) -> list[int]:
        out, running = [], 0
        for c in self.counts:
            running += c
            out.append(running)
        return out


class LabelSet:
    """The labels of an exported series (a ``Row`` for a device's series).

    Attributes:
        full: the exported labels (device, target labels, sample labels, link).
        text: ``full`` rendered (``{a="1"}``), or "" in a store that is not rendered.
        owner: the device the series belong to, so a removed target's series go with it.
    """

    __slots__ = ("full", "owner", "text")

    def __init__(self, full: FullLabels, text: str, owner: str | None) -> None:
        self.full = full
        self.text = text
        self.owner = owner


class Shape:
    """Which metrics a row holds, in slot order: shared by every row of that shape (an interface of one
    device model has the same counters as the next), so a row keeps only its slot numbers."""

    __slots__ = ("_grown", "index", "metrics")

    def __init__(self, metrics: tuple[str, ...]) -> None:
        self.metrics = metrics
        self.index = {m: i for i, m in enumerate(metrics)}
        self._grown: dict[str, Shape] = {}  # metric -> this shape with it appended (interned by the store)


class Row(LabelSet):
    """A device's series of one set of sample labels (an interface's counters): their labels once, and
    where their values are in the store's columns (``slots[shape.index[metric]]``).

    Attributes:
        labels: its sample labels, its key among its device's rows (``owner`` is the device).
        ttl: seconds without a reading after which its series expire (inf: never).
        link: the link its member belongs to, or None.
        shape: its metrics, in slot order.
        slots: each metric's slot in the columns.
    """

    __slots__ = ("labels", "link", "shape", "slots", "ttl")

    def __init__(
        self, full: FullLabels, text: str, device: str, labels: Labels, ttl: float, link: str | None
    ) -> None:
        super().__init__(full, text, device)
        self.labels = labels
        self.ttl = ttl
        self.link = link
        self.shape = EMPTY_SHAPE
        self.slots = array("i")


EMPTY_SHAPE = Shape(())


@dataclass(slots=True, eq=False)
class Series:
    """A series that is not a device's reading (health, links, probes, histograms; a worker's series in the
    daemon): its value, when it last moved, its labels. The family name is its key in ``Store.families``.

    Compared and hashed by identity: the change log (``Changes``) keys on the object.
    """

    value: int | float | Histogram
    updated: float
    labelset: LabelSet
    source: str | None = None  # the protocol feeding it: a worker's device series, in the daemon
    relay_id: int = -1  # in a worker: its id towards the supervisor (``relay.Outbox``); -2 once gone

    @property
    def labels_text(self) -> str:
        """Its labels rendered, ``{a="1"}`` ("" in a store that is not rendered)."""
        return self.labelset.text

    @property
    def owner(self) -> str | None:
        """The device it belongs to."""
        return self.labelset.owner


Ref = Series | int
"""A series in the change log: a ``Series``, or the column slot of a device series."""


class Changes:
    """What changed in a store since the last ``Store.take_changes`` (a worker relays it to the daemon).

    Attributes:
        new: series created, with their family name and labels.
        dirty: series whose value changed.
        gone: series removed (expired, forgotten, their device dropped).
    """

    __slots__ = ("dirty", "gone", "new")

    def __init__(self) -> None:
        self.new: list[tuple[Ref, str, FullLabels]] = []
        self.dirty: set[Ref] = set()
        self.gone: list[Ref] = []


@dataclass(frozen=True, slots=True)
class TargetLabels:
    """What the store adds to every series of a target."""

    static: FullLabels = ()
    ttl: float = math.inf
    max_series: int | None = None  # new series beyond this many are dropped (None: no cap)
    # ("interface", name) or ("component", name) -> the link that member belongs to
    links: Mapping[tuple[str, str], str] = field(default_factory=dict)


class Store:
    """Latest values per series, counter state and collector health, keyed by catalogue name.

    A device's series live in columns (issue 33, "a compact store"): one slot per series in a few flat
    lists and arrays (value, when it moved, its source, its relay id, and the counter state of the
    source that tracks it), found through its ``Row``. Every other series (health, links, probes,
    histograms; in the daemon, what the workers relay) is a ``Series`` in ``families``: few of them, and
    set from many places.
    """

    def __init__(
        self, clock: Clock | None = None, archive: ArchiveSink | None = None, rendered: bool = True
    ) -> None:
        self.clock = clock or SystemClock()
        self.archive = archive
        # A worker process' store is relayed, never rendered: its series need no rendered labels.
        self.rendered = rendered
        self.families: dict[str, dict[FullLabels, Series]] = {}  # the series that are not a device's
        self._targets: dict[str, TargetLabels] = {}
        # device -> sample labels -> its row, in creation order (the exposition's order): a dict a device,
        # not a (device, labels) key tuple a row (56 bytes an interface)
        self._rows: dict[str, dict[Labels, Row]] = {}
        self._per_metric: dict[str, int] = {}  # metric -> device series of it
        # The columns, by slot: numbers in arrays, so that a series holds no object of its own (at scale,
        # small objects that live long among a poll's short-lived ones cost the allocator about as much
        # again). The exported value is ``_kind``'s: the counter total (EXACT), a float (FLOAT), or an
        # object in ``_held`` (HELD: an integer gauge, a total past 2^64, another source's total).
        # ``_tracker`` is the source whose counter state the counter columns hold (the first to feed the
        # series); another source reading the same counter (SNMP and gNMI both) keeps its own
        # ``CounterTrack`` in ``_others``, so the two never look like resets of each other; so does a
        # total past 2^64, which no array holds.
        self._kind = bytearray()
        self._float = array("d")
        self._held: dict[int, int | float] = {}
        self._updated = array("d")
        # Sources as codes (``_sources``: code -> name; 0 is none): a byte a series, not a reference.
        self._source = bytearray()
        self._tracker = bytearray()
        self._sources: list[str | None] = [None]
        self._relay = array("q")  # only in a worker's store (``log_changes``)
        self._total = array("Q")
        self._raw = array("Q")  # the device's last reading (a valid one fits 64 bits)
        self._epoch: list[Hashable] = []
        self._seen = array("d")
        self._peak = array("d")
        self._others: dict[int, dict[str, counters.CounterTrack]] = {}
        self._free: list[int] = []
        # device -> a token replaced whenever one of its slots is released: a ``SeriesHandle`` trusts the
        # slot it remembers only while it holds its device's current token (a released slot may be reused
        # by another series, and a handle read under another device names another series).
        self._layouts: dict[str, object] = {}
        self._releasing: list[int] = []  # slots gone since the last relay frame: reused after it
        self._count: dict[str, int] = {}  # device -> its device series (the cap's count)
        self._device_pairs: dict[str, tuple[str, str]] = {}
        self.changes: Changes | None = None  # a worker's (``log_changes``): every change is logged for relay

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
        for row in list(self._rows.get(device, {}).values()):
            for metric in reversed(row.shape.metrics):
                self._remove(row, metric)
        self._rows.pop(device, None)
        self._count.pop(device, None)
        self._device_pairs.pop(device, None)
        self._layouts.pop(device, None)

    # -- device data ----------------------------------------------------------------------------
    def ingest(
        self, device: str, source: str, samples: Iterable[Sample | CounterReading], received_ns: int
    ) -> int:
        """Fold readings of ``device`` received at ``received_ns`` into the store and the archive
        (``ingest_runs``)."""
        return self.ingest_runs(device, source, ((samples, received_ns),))

    def ingest_runs(
        self, device: str, source: str, runs: Iterable[tuple[Iterable[Sample | CounterReading], int]]
    ) -> int:
        """Fold readings of ``device`` into the store and the archive.

        ``runs`` are the readings with the time they were received (Unix ns: the archive's
        ``received_ns``), one pair per message: a gNMI batch is one call, not one per response, since
        the call's setup costs as much as a few readings.

        A reading is a ``Sample`` or a ``CounterReading``. The store remembers a counter reading's series
        in its handle, so the next reading of that series that only adds to it (the same source, the
        same epoch, no decrease: a counter's steady state) is a few column writes: no validity checks
        (a 64-bit unsigned integer needs none), no row or slot lookups, no ``Sample``. Anything else goes
        the general way, as a ``Sample``.

        When two sources (SNMP and gNMI) feed the same series, the one that feeds it first keeps it while
        it stays fresh; the other's readings are archived (with their ``source``) but not exported.
        Invalid readings and new series beyond the target's cap are dropped and counted (module docstring).

        Returns:
            how many samples were ingested.
        """
        now = self.clock.monotonic()
        target = self._targets.get(device) or TargetLabels()
        archive = self.archive
        rows, changes = self._rows.setdefault(device, {}), self.changes
        kinds, floats, held, updated, sources = (
            self._kind,
            self._float,
            self._held,
            self._updated,
            self._source,
        )
        tracker, totals, raws, epochs = self._tracker, self._total, self._raw, self._epoch
        code = self._code(source)
        seen, peaks = self._seen, self._peak
        n = 0
        # Samples of one label set come together (an interface's counters, sharing one labels tuple):
        # its row is looked up once for the run, not once per sample.
        run_labels: Labels | None = None
        row: Row | None = None
        index: Mapping[str, int] = {}  # the row's metric -> slot position
        layout = self._layouts.get(device)
        if layout is None:
            layout = self._layouts[device] = object()
        s: Sample
        handle: SeriesHandle | None
        for readings, received_ns in runs:
            for reading in readings:
                if reading.__class__ is tuple:
                    handle, reading_raw, epoch, time_ns = reading
                    slot = handle.slot
                    if (
                        handle.token is layout
                        and tracker[slot] == code
                        and sources[slot] == code
                        and epoch == epochs[slot]
                    ):
                        up = reading_raw - raws[slot]
                        total = totals[slot] + up
                        if up >= 0 and total <= counters.MAX64:  # as the general way's common reading
                            elapsed = now - seen[slot]
                            if elapsed > 0 and up / elapsed > peaks[slot]:
                                peaks[slot] = up / elapsed
                            seen[slot], raws[slot], totals[slot], updated[slot] = now, reading_raw, total, now
                            n += 1
                            if changes is not None:
                                changes.dirty.add(slot)
                            if archive is not None:
                                archive.add(
                                    (
                                        received_ns if time_ns is None else time_ns,
                                        received_ns,
                                        device,
                                        source,
                                        handle.metric,
                                        handle.labels,
                                        handle.row.link,
                                        float(total),
                                        total,
                                    )
                                )
                            continue
                    s = sample_of(reading)
                else:
                    handle, s = None, reading  # type: ignore[assignment]
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
                if s.labels is not run_labels:
                    run_labels, row = s.labels, rows.get(s.labels)
                    index = EMPTY_SHAPE.index if row is None else row.shape.index
                pos = index.get(metric)
                created = pos is None
                if pos is None:
                    row, slot = self._admit(device, row, target, s, source)
                    if slot < 0:
                        continue
                    index = row.shape.index  # type: ignore[union-attr]
                else:
                    slot = row.slots[pos]  # type: ignore[union-attr]
                if handle is not None:
                    handle.slot, handle.row, handle.token = slot, row, layout
                n += 1
                value: int | float
                if raw is None:
                    value = s.value
                    exact, tracked = None, False
                else:
                    tracked = created or tracker[slot] == code  # this source's state is in the columns
                    if created:
                        tracker[slot], totals[slot], raws[slot], epochs[slot] = code, raw, raw, s.epoch
                        seen[slot], peaks[slot] = now, 0.0
                        total = raw
                    elif tracked:
                        elapsed = now - seen[slot]
                        seen[slot] = now
                        up = raw - raws[slot]
                        if up >= 0 and s.epoch == epochs[slot]:
                            # The common reading (no decrease, same epoch) counts its increase whatever the
                            # bound (``counters.advance``): inline, without working out a bound it ignores.
                            raws[slot] = raw
                            total = totals[slot] + up
                            if elapsed > 0 and up / elapsed > peaks[slot]:
                                peaks[slot] = up / elapsed
                            if total <= counters.MAX64:
                                totals[slot] = total
                            else:
                                self._demote(
                                    slot, counters.CounterTrack(raw, total, s.epoch, now, peaks[slot])
                                )
                                tracked = False
                        else:
                            track = counters.CounterTrack(
                                raws[slot], totals[slot], epochs[slot], now, peaks[slot]
                            )
                            self._advance(device, s, track, elapsed)
                            total = track.total
                            if total <= counters.MAX64:
                                raws[slot], totals[slot], epochs[slot], peaks[slot] = (
                                    track.last_raw,
                                    total,
                                    track.epoch,
                                    track.peak,
                                )
                            else:
                                self._demote(slot, track)
                                tracked = False
                    else:
                        total = self._other_track(device, s, source, slot, now)
                    if s.scale == 1.0:
                        value = exact = total
                    else:  # a counter in other units (µs, ms): exported scaled, no exact integer in catalogue units
                        value, exact = total * s.scale, None
                # The first source to feed a series keeps it while it stays fresh (SNMP and gNMI may both read it).
                if created or sources[slot] == code or now - updated[slot] > row.ttl:  # type: ignore[union-attr]
                    if exact is not None and tracked:
                        kind = EXACT  # the total column is the value
                    elif value.__class__ is float:
                        kind, floats[slot] = FLOAT, value
                    else:
                        kind, held[slot] = HELD, value
                    if kinds[slot] == HELD and kind != HELD:
                        del held[slot]
                    kinds[slot], updated[slot], sources[slot] = kind, now, code
                    if changes is not None:
                        if created:
                            changes.new.append((slot, metric, row.full))  # type: ignore[union-attr]
                        else:
                            changes.dirty.add(slot)
                if archive is not None:
                    time_ns = s.time_ns if s.time_ns is not None else received_ns
                    link = row.link  # type: ignore[union-attr]
                    archive.add(
                        (time_ns, received_ns, device, source, metric, s.labels, link, float(value), exact)
                    )
        return n

    def _advance(self, device: str, s: Sample, track: counters.CounterTrack, elapsed: float) -> None:
        """Fold a reading that is not a plain increase into ``track`` (``counters.advance``), counting a
        discontinuity."""
        assert s.raw is not None
        if counters.advance(track, s.raw, s.width, s.epoch, self._bound(device, s, elapsed), elapsed):
            self.inc("dci_counter_discontinuities_total", (("device", device), ("metric", s.metric)))

    def _demote(self, slot: int, track: counters.CounterTrack) -> None:
        """Move a counter whose total outgrew 64 bits out of the columns, into a ``CounterTrack`` of its
        own (Python integers: exact at any size); its source's readings go there from now on."""
        source = self._sources[self._tracker[slot]]
        assert source is not None
        self._others.setdefault(slot, {})[source] = track
        self._tracker[slot] = 0

    def _other_track(self, device: str, s: Sample, source: str, slot: int, now: float) -> int:
        """The total of a counter read by a second source, from that source's own track."""
        assert s.raw is not None
        tracks = self._others.setdefault(slot, {})
        track = tracks.get(source)
        if track is None:
            track = tracks[source] = counters.start(s.raw, s.epoch, now)
        else:
            elapsed = now - track.seen
            track.seen = now
            self._advance(device, s, track, elapsed)
        return track.total

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
        row = self._rows.get(device, {}).get(lbls)
        return row is not None and metric in row.shape.index

    def track(self, source: str, device: str, metric: str, lbls: Labels) -> counters.CounterTrack | None:
        """A copy of the counter state ``source`` keeps for a device series, or None."""
        row = self._rows.get(device, {}).get(lbls)
        pos = None if row is None else row.shape.index.get(metric)
        if row is None or pos is None:
            return None
        slot = row.slots[pos]
        if self._sources[self._tracker[slot]] != source:
            other = self._others.get(slot, {}).get(source)
            return None if other is None else dataclasses.replace(other)
        return counters.CounterTrack(
            self._raw[slot], self._total[slot], self._epoch[slot], self._seen[slot], self._peak[slot]
        )

    def _admit(
        self, device: str, row: Row | None, target: TargetLabels, s: Sample, source: str
    ) -> tuple[Row | None, int]:
        """A slot for a new series in its (possibly new) row, or -1 at the target's cap (counted)."""
        count = self._count.get(device, 0)
        if target.max_series is not None and count >= target.max_series:
            self.series_dropped(device, source)
            return row, -1
        if row is None:
            full, link = self._compose(device, target, s)
            row = Row(full, self._text(full), device, s.labels, target.ttl, link)
            self._rows.setdefault(device, {})[s.labels] = row
        slot = self._slot()
        row.shape = _grown(row.shape, s.metric)
        row.slots.append(slot)
        self._count[device] = count + 1
        self._per_metric[s.metric] = self._per_metric.get(s.metric, 0) + 1
        return row, slot

    def _slot(self) -> int:
        """A free column slot (reused, or appended to every column)."""
        if self._free:
            slot = self._free.pop()
            if self.changes is not None:
                self._relay[slot] = -1
            return slot
        self._kind.append(FLOAT)
        self._float.append(0.0)
        self._updated.append(0.0)
        self._source.append(0)
        self._tracker.append(0)
        if self.changes is not None:
            self._relay.append(-1)
        self._total.append(0)
        self._raw.append(0)
        self._epoch.append(None)
        self._seen.append(0.0)
        self._peak.append(0.0)
        return len(self._kind) - 1

    def _release(self, slot: int) -> None:
        """Free a removed series' slot (after the next relay frame in a worker: its id may be sent)."""
        if self._kind[slot] == HELD:
            del self._held[slot]
        self._kind[slot] = FLOAT
        self._epoch[slot] = None
        self._source[slot] = self._tracker[slot] = 0
        self._others.pop(slot, None)
        if self.changes is None:
            self._free.append(slot)
        else:
            self.changes.gone.append(slot)
            self._releasing.append(slot)

    def _code(self, source: str) -> int:
        """The code of a source's name (the sources are the protocols: a few)."""
        try:
            return self._sources.index(source)
        except ValueError:
            if len(self._sources) == 256:
                raise ValueError(f"more than 255 sources: {source}") from None
            self._sources.append(source)
            return len(self._sources) - 1

    def log_changes(self) -> Changes:
        """Log every change from now on, for a worker's relay (``relay.Outbox``)."""
        if self.changes is None:
            self.changes = Changes()
            self._relay = array("q", [-1]) * len(self._kind)
        return self.changes

    def take_changes(self) -> tuple[list[tuple[Ref, str, FullLabels]], set[Ref], list[Ref]]:
        """The changes since the last call, and a fresh start (the slots of removed series are reused
        from now on)."""
        assert self.changes is not None
        changes = self.changes
        out = (changes.new, changes.dirty, changes.gone)
        changes.new, changes.dirty, changes.gone = [], set(), []
        self._free.extend(self._releasing)
        self._releasing = []
        return out

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
        speed = None if interface is None else self._speed(device, interface)
        if speed is None:
            return None
        return speed / per_unit * (max(elapsed, 0.0) + BOUND_SLACK_SECONDS)

    def _speed(self, device: str, interface: str) -> float | None:
        """The interface's speed (bytes/s) as its speed series holds it, or None: unknown, or reported as 0
        (some agents do for sub-interfaces), which is not "no traffic possible"."""
        row = self._rows.get(device, {}).get((("interface", interface),))  # the catalogue's speed labels
        pos = None if row is None else row.shape.index.get(SPEED_METRIC)
        if row is None or pos is None:
            return None
        speed = self._read(row.slots[pos])
        return float(speed) if speed > 0 else None

    def forget(self, device: str, metric: str, lbls: Labels) -> None:
        """Remove one series now (a gNMI delete notification)."""
        row = self._rows.get(device, {}).get(lbls)
        if row is not None and metric in row.shape.index:
            self._remove(row, metric)

    def _remove(self, row: Row, metric: str) -> None:
        """Remove one device series and what it kept (counter state, the cap's count, its row once empty)."""
        shape = row.shape
        pos = shape.index[metric]
        self._release(row.slots[pos])
        del row.slots[pos]
        row.shape = _shape(shape.metrics[:pos] + shape.metrics[pos + 1 :])
        device = cast(str, row.owner)
        self._layouts[device] = object()  # its handles find their series again
        left = self._count.get(device, 1) - 1
        if left > 0:
            self._count[device] = left
        else:
            self._count.pop(device, None)
        left = self._per_metric[metric] - 1
        if left > 0:
            self._per_metric[metric] = left
        else:
            del self._per_metric[metric]
        if not row.slots:
            rows = self._rows[device]
            del rows[row.labels]
            if not rows:
                del self._rows[device]

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
        updated = self._updated
        dropped = 0
        for row in list(self._all_rows()):
            ttl = row.ttl
            stale = [
                m for m, slot in zip(row.shape.metrics, row.slots, strict=True) if now - updated[slot] > ttl
            ]
            for metric in stale:
                self._remove(row, metric)
            dropped += len(stale)
        return dropped

    # -- reading it ----------------------------------------------------------------------------------
    def metrics(self) -> set[str]:
        """The families that hold a series."""
        return {name for name, family in self.families.items() if family} | set(self._per_metric)

    def device_series(self, metric: str) -> Iterator[tuple[Row, int | float]]:
        """Every device series of ``metric``: its row and value, rows in creation order."""
        if metric not in self._per_metric:
            return
        kinds, totals, floats, held = self._kind, self._total, self._float, self._held
        for row in self._all_rows():
            pos = row.shape.index.get(metric)
            if pos is not None:
                slot = row.slots[pos]
                kind = kinds[slot]
                yield row, totals[slot] if kind == EXACT else floats[slot] if kind == FLOAT else held[slot]

    def items(self, metric: str) -> list[tuple[FullLabels, int | float | Histogram]]:
        """Every series of ``metric`` as ``(labels, value)``."""
        out: list[tuple[FullLabels, int | float | Histogram]] = [
            (full, s.value) for full, s in self.families.get(metric, {}).items()
        ]
        out += [(row.full, v) for row, v in self.device_series(metric)]
        return out

    def series_count(self) -> int:
        """How many series the store holds."""
        return sum(map(len, self.families.values())) + sum(self._per_metric.values())

    def value(self, metric: str, full: FullLabels) -> int | float | Histogram | None:
        """The current value of one series, or None."""
        series = self.families.get(metric, {}).get(full)
        if series is not None:
            return series.value
        # A scan of the device's rows (tests and diagnostics; nothing on a hot path asks by full labels).
        device = full[0][1] if full and full[0][0] == "device" else None
        for row in self._rows.get(device, {}).values() if device is not None else ():
            pos = row.shape.index.get(metric)
            if pos is not None and row.full == full:
                return self._read(row.slots[pos])
        return None

    def _all_rows(self) -> Iterator[Row]:
        """Every device row, in creation order within a device, devices in the order first seen."""
        return itertools.chain.from_iterable(rows.values() for rows in self._rows.values())

    def _read(self, slot: int) -> int | float:
        """A device series' value (``_kind`` says which column holds it; the scrape's and the relay's
        loops read it inline)."""
        kind = self._kind[slot]
        if kind == EXACT:
            return self._total[slot]
        return self._float[slot] if kind == FLOAT else self._held[slot]

    # -- the change log (``relay.Outbox``) -------------------------------------------------------------
    def relay_id(self, ref: Ref) -> int:
        return ref.relay_id if isinstance(ref, Series) else self._relay[ref]

    def set_relay_id(self, ref: Ref, relay_id: int) -> None:
        if isinstance(ref, Series):
            ref.relay_id = relay_id
        else:
            self._relay[ref] = relay_id

    def sent_values(self, refs: Iterable[Ref]) -> tuple[list[int], list[int | float | Histogram]]:
        """The relay ids and values of the series among ``refs`` whose definition was sent (the relay's
        hot loop: a tick's changed values)."""
        ids: list[int] = []
        values: list[int | float | Histogram] = []
        relay, kinds, totals, floats, held = self._relay, self._kind, self._total, self._float, self._held
        for ref in refs:
            if isinstance(ref, int):  # a device series: the common case, read inline from the columns
                relay_id = relay[ref]
                if relay_id >= 0:
                    ids.append(relay_id)
                    kind = kinds[ref]
                    values.append(
                        totals[ref] if kind == EXACT else floats[ref] if kind == FLOAT else held[ref]
                    )
            elif ref.relay_id >= 0:
                ids.append(ref.relay_id)
                values.append(ref.value)
        return ids, values

    def ref_value(self, ref: Ref) -> int | float | Histogram:
        return ref.value if isinstance(ref, Series) else self._read(ref)

    def ref_source(self, ref: Ref) -> str | None:
        return ref.source if isinstance(ref, Series) else self._sources[self._source[ref]]

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

    def observe(self, metric: str, full: FullLabels, *values: float) -> None:
        """Record observations in a histogram."""
        family = self.families.setdefault(metric, {})
        series = family.get(full)
        if series is None:
            bounds = HISTOGRAM_BUCKETS[metric]
            series = Series(Histogram(bounds), math.inf, self._single(full))
            family[full] = series
            if self.changes is not None:
                self.changes.new.append((series, metric, full))
        histogram = series.value
        assert isinstance(histogram, Histogram)
        for value in values:
            histogram.observe(value)
        if self.changes is not None:
            self.changes.dirty.add(series)

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


FLOAT, EXACT, HELD = 0, 1, 2
"""Where a device series' value is (``Store._kind``): the float column, the total column, ``_held``."""

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


MAX_SHAPES = 4096
"""Shapes interned at most: a device sending its metrics in ever new orders cannot grow this table past
it (a shape beyond it still works, unshared)."""
_SHAPES: dict[tuple[str, ...], Shape] = {(): EMPTY_SHAPE}


def _shape(metrics: tuple[str, ...]) -> Shape:
    """The shape of ``metrics``, shared while the table has room."""
    shape = _SHAPES.get(metrics)
    if shape is None:
        shape = Shape(metrics)
        if len(_SHAPES) < MAX_SHAPES:
            _SHAPES[metrics] = shape
    return shape


def _grown(shape: Shape, metric: str) -> Shape:
    """``shape`` with ``metric`` appended (remembered on ``shape``: a row grows along the same path as the
    last row of its kind)."""
    grown = shape._grown.get(metric)
    if grown is None:
        grown = _shape((*shape.metrics, metric))
        if len(shape._grown) < MAX_SHAPES:
            shape._grown[metric] = grown
    return grown
