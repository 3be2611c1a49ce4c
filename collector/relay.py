"""What crosses from a worker process to the daemon that serves ``/metrics`` (issue 18, "use the cores").

Workers decode, keep counter state and write their own archive files; the daemon only needs the values
to expose. Each relay tick a worker sends one frame of its store's changes (``Store.changes``): a series
is defined once (an integer id, its family and labels), then travels as ``(id, value)`` in two flat
lists, and its removal as its id. A frame is one pickled tuple behind a 4-byte length: compact, and
decoded in C on both sides. Pickle is safe here because both ends are this program (the worker is our
child, over a pipe only it holds).

Series without a ``device`` label (archive rows, dropped rows...) exist in every worker: the mirror
exposes their sum.
"""

from __future__ import annotations

import asyncio
import pickle
import struct
from dataclasses import dataclass, field

from collector.store import FullLabels, Histogram, LabelSet, Series, Store, render_labels

_LENGTH = struct.Struct("!I")
UNSENT, GONE = -1, -2  # ``Store.relay_id`` before its definition is sent, and after its removal
MAX_FRAME = 1 << 30

Definition = tuple[int, str, FullLabels, "str | None", "str | None", "int | float | Histogram"]
"""``(id, family, labels, owner, source, value)`` of a series the daemon has not seen."""

Frame = tuple[list[Definition], list[int], list["int | float | Histogram"], list[int]]
"""``(definitions, ids, values, removed ids)``."""


class Outbox:
    """The worker side: turns a store's change log into frames."""

    def __init__(self, store: Store) -> None:
        self.store = store
        store.log_changes()
        self._next = 0  # ids are kept with the series (``Store.relay_id``): no map of every series

    def frame(self) -> Frame | None:
        """The changes since the last frame, or None when nothing changed."""
        store = self.store
        new, dirty, gone = store.take_changes()
        if not (new or dirty or gone):
            return None
        removed = []
        for ref in gone:
            relay_id = store.relay_id(ref)
            if relay_id >= 0:
                removed.append(relay_id)
            store.set_relay_id(ref, GONE)  # a series created and removed within one tick needs nothing
        defs: list[Definition] = []
        for ref, metric, full in new:
            if store.relay_id(ref) != UNSENT:
                continue
            store.set_relay_id(ref, self._next)
            owner = ref.owner if isinstance(ref, Series) else full[0][1]  # a device series: device first
            defs.append((self._next, metric, full, owner, store.ref_source(ref), store.ref_value(ref)))
            self._next += 1
            dirty.discard(ref)
        ids, values = store.sent_values(dirty)
        return defs, ids, values, removed


@dataclass
class _Shared:
    """A series without a device: one value per worker, exposed summed."""

    series: Series
    parts: dict[int, float] = field(default_factory=dict)


class Mirror:
    """The daemon side: folds each worker's frames into the store ``/metrics`` renders."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # worker -> id -> (series, family, labels)
        self._tables: dict[int, dict[int, tuple[Series, str, FullLabels]]] = {}
        self._shared: dict[tuple[str, FullLabels], _Shared] = {}

    def apply(self, worker: int, frame: Frame) -> None:
        """Fold one frame of ``worker`` in."""
        defs, ids, values, removed = frame
        table = self._tables.setdefault(worker, {})
        for i in removed:
            entry = table.pop(i, None)
            if entry is not None:
                self._remove(worker, *entry)
        now = self.store.clock.monotonic()
        for i, metric, full, owner, source, value in defs:
            if owner is None:
                table[i] = (self._share(worker, metric, full, value), metric, full)
                continue
            series = Series(value, now, LabelSet(full, render_labels(full), owner), source)
            self.store.families.setdefault(metric, {})[full] = series  # a new worker's series replaces
            table[i] = (series, metric, full)
        for i, value in zip(ids, values, strict=True):
            entry = table.get(i)
            if entry is None:
                continue
            series, metric, full = entry
            if series.owner is None:
                self._share(worker, metric, full, value)
            else:
                series.value = value
                series.updated = now

    def drop_worker(self, worker: int) -> None:
        """Forget every series of ``worker`` (it died; its targets are reported down by the caller)."""
        for series, metric, full in self._tables.pop(worker, {}).values():
            self._remove(worker, series, metric, full)

    def _remove(self, worker: int, series: Series, metric: str, full: FullLabels) -> None:
        shared = self._shared.get((metric, full))
        if shared is not None and shared.series is series:
            shared.parts.pop(worker, None)
            series.value = _sum(shared.parts)
            return
        family = self.store.families.get(metric, {})
        if family.get(full) is series:
            del family[full]

    def _share(self, worker: int, metric: str, full: FullLabels, value: object) -> Series:
        shared = self._shared.get((metric, full))
        if shared is None:
            series = Series(0, 0.0, LabelSet(full, render_labels(full), None))
            shared = self._shared[(metric, full)] = _Shared(series)
        shared.parts[worker] = value  # type: ignore[assignment]
        shared.series.value = _sum(shared.parts)
        self.store.families.setdefault(metric, {})[full] = shared.series
        return shared.series


def _sum(parts: dict[int, float]) -> int | float:
    total: int | float = 0
    for v in parts.values():
        total += v
    return total


def encode(frame: Frame) -> bytes:
    """One frame, length-prefixed."""
    body = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> Frame | None:
    """The next frame, or None at the end of the stream (the worker exited).

    Raises:
        ValueError: a length past ``MAX_FRAME`` (never sent by a worker).
    """
    try:
        head = await reader.readexactly(_LENGTH.size)
        (size,) = _LENGTH.unpack(head)
        if size > MAX_FRAME:
            raise ValueError(f"relay frame of {size} bytes")
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        return None
    frame: Frame = pickle.loads(body)
    return frame
