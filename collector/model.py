"""The one model every source produces: a ``Sample`` named by the catalogue.

Downstream of the sources nothing knows an OID or a YANG path, only ``Sample``s.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from collector.contracts.catalog import SERIES_LABELS

Labels = tuple[tuple[str, str], ...]
"""Series labels beyond ``device`` as ``(name, value)`` pairs, in ``SERIES_LABELS`` order."""

ArchiveRow = tuple[int, int, str, str, str, Labels, "str | None", float, "int | None"]
"""One reading as the archive keeps it: ``(time_ns, received_ns, device, source, metric, labels, link,
value, counter)``; ``counter`` is the exact unwrapped total of an unscaled counter, else None. A plain tuple,
not a named one: the store builds one per reading on the ingest hot path."""

_ORDER = {name: i for i, name in enumerate(SERIES_LABELS)}


def labels(**pairs: str | int | None) -> Labels:
    """Build canonical series labels, dropping ``None`` values.

    Raises:
        KeyError: a label name that is not a series label.
    """
    items = [(k, str(v)) for k, v in pairs.items() if v is not None]
    items.sort(key=lambda kv: _ORDER[kv[0]])
    return tuple(items)


@dataclass(slots=True)
class Sample:
    """One reading of one series, already in catalogue units.

    Attributes:
        metric: catalogue name.
        labels: series labels beyond ``device`` (see ``labels()``).
        value: the gauge value; for counters the device's raw integer as a float (informational).
        raw: counters only: the device's exact integer reading, before unwrapping.
        width: counters only: 32 for a Counter32 (a decrease is a wrap), 64 otherwise (a decrease is a reset).
        epoch: counters only: what the device says about discontinuities (sysUpTime boot count,
            ifCounterDiscontinuityTime, gNMI last-clear); a change means the counter was reset.
        time_ns: when the device measured it (gNMI notification timestamp), or None for "when received".
        scale: counters only: catalogue units per device unit (1e-6 for a pause duration counted in µs).
            The store tracks the device's integers and exports ``total * scale``; only unscaled
            counters keep an exact integer total.
    """

    metric: str
    labels: Labels
    value: float
    raw: int | None = None
    width: int = 64
    epoch: Hashable = None
    time_ns: int | None = None
    scale: float = 1.0


def counter(
    metric: str,
    lbls: Labels,
    raw: int,
    width: int = 64,
    epoch: Hashable = None,
    time_ns: int | None = None,
    scale: float = 1.0,
) -> Sample:
    """A counter sample from the device's integer reading (``scale``: catalogue units per device unit)."""
    return Sample(metric, lbls, raw * scale, raw, width, epoch, time_ns, scale)


def gauge(metric: str, lbls: Labels, value: float, time_ns: int | None = None) -> Sample:
    """A gauge sample."""
    return Sample(metric, lbls, value, time_ns=time_ns)


class SeriesHandle:
    """A series a source names again and again (a gNMI path's counter), with a place where the store
    remembers where the series is (``Store.ingest_runs``): a reading through it skips the validity checks
    and lookups a ``Sample`` needs. Only the store reads or writes ``slot``, ``row`` and ``token``.
    """

    __slots__ = ("labels", "metric", "row", "slot", "token")

    def __init__(self, metric: str, lbls: Labels) -> None:
        self.metric = metric
        self.labels = lbls
        self.slot = -1
        self.row: Any = None  # the store's ``Row`` of the series
        self.token: object = None  # the store's layout token when ``slot`` was remembered


CounterReading = tuple[SeriesHandle, int, Hashable, "int | None"]
"""A reading of an unscaled 64-bit counter as ``(handle, raw, epoch, time_ns)``: what a ``Sample`` with
``raw``, ``width`` 64 and ``scale`` 1 says, in a tuple (a source's hot path builds one per update)."""


def sample_of(reading: Sample | CounterReading) -> Sample:
    """A reading as a ``Sample``."""
    if isinstance(reading, Sample):
        return reading
    handle, raw, epoch, time_ns = reading
    return Sample(handle.metric, handle.labels, float(raw), raw, 64, epoch, time_ns)
