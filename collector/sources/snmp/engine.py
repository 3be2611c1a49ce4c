"""The SNMP engine: walked varbinds + cached label tables -> catalogue ``Sample``s. No sockets here.

The per-MIB facts live in the YAML modules (``collector/mappings/snmp``); this module only knows the
generic moves: split the index, resolve labels (ifIndex -> ifName, lookups, ENTITY containment), scale,
enum, mW/W -> dBm, mantissa x 10^-exponent, sum rows that land on the same series (unicast + multicast +
broadcast, Arista's per-packet-type queue rows), and attach the discontinuity epoch to counters.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar, cast

from collector.contracts.catalog import CATALOG
from collector.model import Labels, Sample, counter, gauge, labels
from collector.sources.snmp.ber import TAG_COUNTER32, TAG_OCTETS, Oid, VarBind
from collector.sources.snmp.tables import (
    Column,
    Convert,
    Format,
    LabelExpr,
    Lookup,
    SensorRule,
    SensorTable,
    Table,
)
from collector.sources.snmp.walk import parse_oid

Rows = dict[Oid, dict[int, tuple[int, object]]]
"""index suffix -> column -> (tag, value)."""

_H = TypeVar("_H", bound=Hashable)
_LANE = re.compile(r"(?i)\blane\s*(\d+)")
TICKS_WRAP = 1 << 32  # sysUpTime (TimeTicks) wraps here, after 497 days
UPTIME_SLACK_SECONDS = 5.0  # a poll's own duration and jitter
MAX_SHARED_EPOCHS = 4096  # a device's distinct epochs kept for sharing: its interfaces, with room


def text(value: object) -> str:
    """An OCTET STRING as text (device strings are ASCII/UTF-8 in practice; undecodable bytes are kept)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").rstrip("\x00").strip()
    return str(value)


@dataclass
class LabelCache:
    """Label tables walked at start and every ``label_refresh`` (not every poll)."""

    if_name: dict[int, str] = field(default_factory=dict)  # ifName, falling back to ifDescr
    if_alias: dict[int, str] = field(default_factory=dict)
    ent_name: dict[int, str] = field(default_factory=dict)
    ent_descr: dict[int, str] = field(default_factory=dict)
    ent_parent: dict[int, int] = field(default_factory=dict)
    ent_ifindex: dict[int, int] = field(default_factory=dict)  # entAliasMappingIdentifier
    lookups: dict[str, dict[Oid, object]] = field(default_factory=dict)
    _names: dict[str, int] | None = None

    def interface(self, ifindex: int) -> str:
        """The interface label of ``ifindex``; the index itself when the agent has no name for it."""
        return self.if_name.get(ifindex) or str(ifindex)

    def by_name(self) -> dict[str, int]:
        """Interface name -> ifIndex."""
        if self._names is None:
            self._names = {name: i for i, name in self.if_name.items()}
        return self._names


def table_roots(table: Table) -> list[Oid]:
    """The column OIDs a poll walks for ``table``."""
    entry = parse_oid(table.entry)
    cols = {c.column for c in table.columns}
    cols |= {c.exponent_column for c in table.columns if c.exponent_column is not None}
    if table.discontinuity_column is not None:
        cols.add(table.discontinuity_column)
    return [(*entry, c) for c in sorted(cols)]


def sensor_roots(table: SensorTable) -> list[Oid]:
    """The column OIDs a poll walks for a sensor table."""
    entry = parse_oid(table.entry)
    cols = {table.type_column, table.scale_column, table.precision_column, table.value_column}
    cols |= {c for c in (table.status_column, table.units_column, table.measured_column) if c is not None}
    return [(*entry, c) for c in sorted(cols)]


def rows_of(entry: Oid, walked: Mapping[Oid, list[VarBind]]) -> Rows:
    """Regroup walked columns into rows keyed by index suffix."""
    depth = len(entry) + 1
    rows: Rows = {}
    for root, binds in walked.items():
        col = root[-1]
        for oid, tag, value in binds:
            rows.setdefault(oid[depth:], {})[col] = (tag, value)
    return rows


def column_values(walked: Mapping[Oid, list[VarBind]], root: Oid) -> dict[Oid, object]:
    """One walked column as ``suffix -> value``."""
    depth = len(root)
    return {oid[depth:]: value for oid, _, value in walked.get(root, ())}


def _convert(value: float, how: Convert | None) -> float | None:
    if how is None:
        return value
    milliwatts = value if how == "mw_to_dbm" else value * 1000.0
    if milliwatts <= 0:
        return None  # no light (or no optic): dBm is undefined, so no sample
    return 10.0 * math.log10(milliwatts)


class Epochs:
    """The discontinuity epoch of counters: device boots (sysUpTime going back) and, per ifIndex,
    ifCounterDiscontinuityTime."""

    def __init__(self) -> None:
        self.boots = 0
        self.uptime: int | None = None
        self._uptime_at: float | None = None  # monotonic seconds of the last sysUpTime reading
        self.per_ifindex: dict[int, object] = {}
        self._shared: dict[tuple[object, ...], tuple[object, ...]] = {}  # equal epochs as one tuple

    def see_uptime(self, ticks: int | None, now: float | None = None) -> bool:
        """Fold a sysUpTime reading in (``now``: monotonic seconds); True when it went backwards (the device
        rebooted).

        sysUpTime is TimeTicks, 32 bits of centiseconds: it wraps after 497 days without a reboot. A
        decrease that is exactly the time elapsed since the last reading, counted across 2^32, is that
        wrap, not a reboot (a false reboot resets every counter of the device).
        """
        now = time.monotonic() if now is None else now
        rebooted = ticks is not None and self.uptime is not None and ticks < self.uptime
        if rebooted and self._uptime_at is not None and ticks is not None and self.uptime is not None:
            across = (ticks + TICKS_WRAP - self.uptime) / 100.0
            elapsed = now - self._uptime_at
            rebooted = across > elapsed * 1.1 + UPTIME_SLACK_SECONDS
        if rebooted:
            self.boots += 1
        if ticks is not None:
            self.uptime, self._uptime_at = ticks, now
        return rebooted

    def of(self, ifindex: int | None) -> Hashable:
        """The epoch for a counter of ``ifindex`` (or of no interface)."""
        epoch = (self.boots,) if ifindex is None else (self.boots, self.per_ifindex.get(ifindex))
        # Equal epochs as one tuple: every counter keeps its epoch, and the interfaces of a device mostly
        # share theirs (no discontinuity since boot). Bounded against markers that change every poll.
        shared = self._shared.get(epoch)
        if shared is None:
            if len(self._shared) >= MAX_SHARED_EPOCHS:
                self._shared.clear()
            shared = self._shared[epoch] = epoch
        return shared


RowLabels = tuple["int | Labels | None", ...]
"""A row's ifIndex (None when it belongs to no interface), then each mapped column's series labels (None
where the column's ``where`` excludes the row): one flat tuple, as every row of every target keeps one.
Where every column carries the same labels (an interface's counters, the common case) it is only
``(ifindex, labels)``, and equal ones are one tuple for all the tables of a target (see ``labels_of``)."""


def labels_of(found: RowLabels, column: int) -> Labels | None:
    """The series labels of mapped column ``column`` (from 1) of a row ``Resolver.row`` found."""
    return cast("Labels | None", found[1] if len(found) == 2 else found[column])


class Resolver:
    """Turns one row's index into labels (and the ifIndex the row belongs to), once per label refresh.

    A row's labels depend only on its index and the label tables, which change at label refresh, when
    a new ``Resolver`` is made: so they are resolved once and remembered (``row``) instead of being
    rebuilt every poll, and every poll hands the store the same label tuples.
    """

    def __init__(self, cache: LabelCache, module: str) -> None:
        self.cache = cache
        self.module = module
        self._rows: dict[str, dict[Oid, RowLabels | None]] = {}
        # Labels, row labels and index suffixes as one object each for all the tables of the target while
        # rows are resolved (ifTable and ifXTable rows of an interface are alike): ~300 bytes an interface
        # at 12,800 interfaces, measured. Emptied once a poll has resolved its rows (``settle``).
        self._shared: dict[object, object] = {}

    def value(self, expr: LabelExpr, parts: Mapping[str, int]) -> object:
        """An index part's value, or what a lookup finds (None when it has no entry)."""
        if isinstance(expr, str):
            return parts[expr]
        if isinstance(expr, Format):
            return expr.format.format(**parts)
        return self._lookup(expr, parts)

    def _lookup(self, expr: Lookup, parts: Mapping[str, int]) -> object:
        key: list[int] = []
        for sub in expr.key:
            v = self.value(sub, parts)
            if not isinstance(v, int):
                return None
            key.append(v)
        return self.cache.lookups.get(f"{self.module}.{expr.lookup}", {}).get(tuple(key))

    def labels(self, table: Table, parts: Mapping[str, int]) -> tuple[dict[str, str], int | None] | None:
        """The labels of one row and the ifIndex it belongs to; None when a lookup has no entry."""
        out: dict[str, str] = {}
        ifindex: int | None = None
        for name, expr in table.labels.items():
            v = self.value(expr, parts)
            if v is None:
                return None  # the lookup has no entry (stale or partial): the row cannot be labelled
            if isinstance(v, int) and name in table.label_offset:
                v += table.label_offset[name]
            if name == "interface" and isinstance(v, int):
                ifindex = v
                out[name] = self.cache.interface(v)
            else:
                out[name] = text(v)
        return out, ifindex

    def row(self, table: Table, suffix: Oid) -> RowLabels | None:
        """The remembered labels of the row at ``suffix``; None for a row the table does not export."""
        memo = self._rows.setdefault(table.name, {})
        if suffix in memo:
            return memo[suffix]
        found = self._row(table, suffix)
        memo[self._share(suffix)] = found
        return found

    def settle(self) -> None:
        """A poll's rows are resolved: the objects they share are held by the memo, not by this table."""
        self._shared.clear()

    def _row(self, table: Table, suffix: Oid) -> RowLabels | None:
        if len(suffix) != len(table.index):
            return None  # an index that does not fit the table (sanitised or broken agent rows)
        parts = dict(zip(table.index, suffix, strict=True))
        if any(parts[k] != v for k, v in table.where.items()):
            return None
        resolved = self.labels(table, parts)
        if resolved is None:
            return None
        lbls, ifindex = resolved
        # One tuple for equal labels, as the store keeps the tuple of every series it holds.
        per_column = [
            None
            if any(parts[k] != v for k, v in c.where.items())
            else self._share(_series_labels(c.metric, {**lbls, **c.labels}))
            for c in table.columns
        ]
        if per_column and all(c is per_column[0] for c in per_column):
            return self._share((ifindex, per_column[0]))
        return (ifindex, *per_column)

    def _share(self, value: _H) -> _H:
        return cast("_H", self._shared.setdefault(value, value))


def table_samples(
    table: Table, rows: Rows, resolver: Resolver, epochs: Epochs
) -> tuple[list[Sample], list[Sample]]:
    """Samples of a plain table, in one pass over its rows.

    Args:
        table: the mapping.
        rows: the walked rows (see ``rows_of``).
        resolver: labels for the module.
        epochs: boot and discontinuity state.

    Returns:
        one sample per mapped column per row (before summing; see ``combine``): the samples of the
        ordinary columns, and those of the fallback columns (see ``prefer``).
    """
    primary: list[Sample] = []
    fallback: list[Sample] = []
    columns = table.columns
    marker_column = table.discontinuity_column
    for suffix, row in rows.items():
        found = resolver.row(table, suffix)
        if found is None:
            continue
        ifindex = cast("int | None", found[0])
        if ifindex is not None and marker_column is not None:
            marker = row.get(marker_column)
            epochs.per_ifindex[ifindex] = None if marker is None else marker[1]
        for i, col in enumerate(columns, 1):
            series = labels_of(found, i)
            if series is None:
                continue  # the column's ``where`` excludes this row
            sample = _column_sample(col, row, series, ifindex, epochs)
            if sample is not None:
                (fallback if col.fallback else primary).append(sample)
    return primary, fallback


def _column_sample(
    col: Column,
    row: Mapping[int, tuple[int, object]],
    series: Labels,
    ifindex: int | None,
    epochs: Epochs,
) -> Sample | None:
    cell = row.get(col.column)
    if cell is not None and col.text:
        cell = _decimal_text(cell)
    if cell is None or not isinstance(cell[1], int | float) or cell[1] in col.skip:
        return None
    tag, raw = cell[0], cell[1]
    if CATALOG[col.metric].is_counter:
        if not isinstance(raw, int) or raw < 0:
            return None
        return counter(col.metric, series, raw, 32 if tag == TAG_COUNTER32 else 64, epochs.of(ifindex))
    if col.enum is not None:
        scaled = col.enum.get(int(raw), col.enum_default) if raw == int(raw) else None
    else:
        scaled = float(raw)
    if scaled is None:
        return None
    scaled *= col.scale
    if col.exponent_column is not None:
        exp = row.get(col.exponent_column)
        if exp is None or not isinstance(exp[1], int):
            return None
        scaled *= 10.0 ** -exp[1]
    value = _convert(scaled, col.convert)
    return None if value is None else gauge(col.metric, series, value)


def _decimal_text(cell: tuple[int, object]) -> tuple[int, object] | None:
    """A decimal number sent as an OCTET STRING, as a float cell; None when it is not one."""
    try:
        value = float(text(cell[1]))
    except ValueError:
        return None
    return (cell[0], value) if math.isfinite(value) else None


def _series_labels(metric: str, lbls: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    allowed = CATALOG[metric].labels
    return labels(**{k: v for k, v in lbls.items() if k in allowed})


def prefer(primary: list[Sample], fallback: list[Sample]) -> list[Sample]:
    """``primary`` plus the ``fallback`` samples of series that no primary sample covers.

    Per series (metric and labels, so per interface): an interface with ifHCInOctets never also gets
    ifInOctets, and a 32-bit counter is only exported where the 64-bit one is missing.
    """
    covered = {(s.metric, s.labels) for s in primary}
    return primary + [s for s in fallback if (s.metric, s.labels) not in covered]


def combine(samples: list[Sample]) -> list[Sample]:
    """Sum samples that land on the same series (counters: exact integer sum).

    A sum of Counter32 parts stays 32 bits wide: a decrease is then read as wraps of its parts, judged by
    the counter's bound (``counters.advance``), not as a reset whose whole new sum Prometheus would count
    (a +3.0e9 spike when one part wrapped). A sum with a 64-bit part is 64 bits wide.
    """
    seen: dict[tuple[str, tuple[tuple[str, str], ...]], Sample] = {}
    out: list[Sample] = []
    for s in samples:
        key = (s.metric, s.labels)
        first = seen.get(key)
        if first is None:
            seen[key] = s
            out.append(s)
            continue
        if first.raw is not None and s.raw is not None:
            first.raw += s.raw
            first.value = float(first.raw)
            first.width = max(first.width, s.width)
        else:
            first.value += s.value
    return out


# -- ENTITY sensors ---------------------------------------------------------------------------------


def sensor_samples(table: SensorTable, rows: Rows, cache: LabelCache) -> list[Sample]:
    """Samples of an ENTITY-SENSOR-style table.

    value = reading x 10^(3 x (scale - 9)) x 10^-precision (the SensorDataScale enum puts units at 9);
    the rules pick the metric by sensor type, name/description and units; the interface comes from
    entAliasMapping or from an interface name found in the entity's (or an ancestor's) name/description.
    """
    out: list[Sample] = []
    for suffix, row in rows.items():
        if len(suffix) != 1:
            continue
        sample = _sensor_sample(table, suffix[0], row, cache)
        if sample is not None:
            out.append(sample)
    return out


def _cell_int(row: Mapping[int, tuple[int, object]], col: int | None, default: int | None) -> int | None:
    cell = row.get(col) if col is not None else None
    return cell[1] if cell is not None and isinstance(cell[1], int) else default


def _sensor_sample(
    table: SensorTable, index: int, row: Mapping[int, tuple[int, object]], cache: LabelCache
) -> Sample | None:
    kind = _cell_int(row, table.type_column, None)
    reading = _cell_int(row, table.value_column, None)
    if kind is None or reading is None or _cell_int(row, table.status_column, 1) != 1:
        return None  # unavailable / nonoperational sensors report stale values
    name = f"{cache.ent_name.get(index, '')} {cache.ent_descr.get(index, '')}"
    units_cell = row.get(table.units_column) if table.units_column is not None else None
    units = text(units_cell[1]) if units_cell is not None and units_cell[0] == TAG_OCTETS else ""
    rule = _rule(table.rules, kind, name, units)
    if rule is None:
        return None
    scale = _cell_int(row, table.scale_column, 9) or 9
    precision = _cell_int(row, table.precision_column, 0) or 0
    value = _convert(reading * 10.0 ** (3 * (scale - 9) - precision), rule.convert)
    measured = _cell_int(row, table.measured_column, 0) or index
    ifindex = interface_of(measured, cache)
    if value is None or ifindex is None:
        return None
    lane = _LANE.search(name)
    series = _series_labels(
        rule.metric, {"interface": cache.interface(ifindex), "lane": lane.group(1) if lane else ""}
    )
    return gauge(rule.metric, tuple((k, v) for k, v in series if v), value)


def _rule(rules: tuple[SensorRule, ...], kind: int, name: str, units: str) -> SensorRule | None:
    for rule in rules:
        if kind not in rule.types:
            continue
        if rule.match is not None and not re.search(rule.match, name):
            continue
        if rule.units is not None and not re.search(rule.units, units):
            continue
        return rule
    return None


def interface_of(entity: int, cache: LabelCache) -> int | None:
    """The ifIndex an entity belongs to: entAliasMapping first, then interface names in the entity's
    name or description, climbing entPhysicalContainedIn (a transceiver's sensors sit below the port).

    Arista names sensors "DOM RX Power Sensor for Ethernet1"; NX-OS "Ethernet1/25 Lane 1 Transceiver
    Receive Power Sensor": both carry the interface name as one whitespace-separated word.
    """
    names = cache.by_name()
    seen: set[int] = set()
    node: int | None = entity
    while node and node not in seen and len(seen) < 16:
        seen.add(node)
        if node in cache.ent_ifindex:
            return cache.ent_ifindex[node]
        for candidate in (cache.ent_name.get(node, ""), cache.ent_descr.get(node, "")):
            if candidate in names:
                return names[candidate]
            for word in candidate.split():
                if word in names:
                    return names[word]
        node = cache.ent_parent.get(node)
    return None
