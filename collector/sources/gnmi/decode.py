"""gNMI notifications -> catalogue ``Sample``s: TypedValue decoding, path joining and table matching.

This is the hot path of a gNMI stream, so it is written for speed: each update's path arrives as its
bytes (``shallow``: the response is parsed with paths left unparsed) and is looked up in a per-device cache
of decisions (rule, labels, reset-marker key), so parsing the path, the Python-level path walk,
normalisation and table match run once per distinct path, not once per update.

Path normalisation (``normalise``): prefix and path elements are joined; origins are ignored (an
``openconfig`` origin, none, or a module name all address the same tree); RFC 7951 module prefixes on
element names (``openconfig-interfaces:interfaces``) are stripped; a nameless element that only carries
keys is merged into the element before it (Junos JTI sends ``qmon-sw/{key name=xe-0/0/0:0}``).

Reset markers (``last-clear``): a counter's ``Sample.epoch`` is not the marker's value but how many times the
marker *changed* while we watched it (None before the first change). The first marker value seen is the
baseline: a device that sends its counters and their ``last-clear`` in separate notifications would
otherwise show one false discontinuity at start-up (epoch None, then the marker). A clear the collector did
not witness (before start-up) needs no epoch: the store restarts from the first reading anyway, and a
counter that went down is a reset by itself.
"""

from __future__ import annotations

import json
import logging
import math
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from collector.model import CounterReading, Labels, Sample, SeriesHandle
from collector.sources.gnmi import shallow
from collector.sources.gnmi.paths import Elem, PathTable, Rule, strip_module

log = logging.getLogger(__name__)

Scalar = int | float | str | bool | bytes | None
_MAX_CACHE = 200_000  # distinct paths per device before the decision cache is rebuilt
# Paths of series beyond the cap remembered as such; past this many they are matched again on each update,
# so a device announcing a million names costs CPU, not memory (issue 34).
_MAX_OVER_CAP_CACHED = 4096


# -- TypedValue ------------------------------------------------------------------------------------
def _bytes_value(raw: bytes) -> float | bytes:
    # Junos native sensors send some float leaves (lane_laser_output_power_dbm) as bytes_val holding an
    # IEEE-754 big-endian float32 (issue_17154); 8 bytes is a float64. Anything else stays bytes.
    if len(raw) == 4:
        return _f32(struct.unpack(">f", raw)[0])
    if len(raw) == 8:
        return float(struct.unpack(">d", raw)[0])
    return raw


def _f32(x: float) -> float:
    # A float32 carries ~7 significant digits: keep the value the device meant (36.66, not 36.659999).
    return float(f"{x:.7g}")


def _decimal(d: Any) -> float:
    return float(Decimal(d.digits).scaleb(-d.precision))


class BadJson(ValueError):
    """A json_val / json_ietf_val that does not parse, or nests deeper than ``MAX_JSON_DEPTH``."""


MAX_JSON_DEPTH = 64  # OpenConfig trees are about 12 deep; 100k nested arrays blew the C stack's guard


def _json(raw: bytes) -> Any:
    # Nesting is checked before parsing: json.loads recurses, and a RecursionError is no place to be.
    depth = 0
    for c in raw.translate(None, _NOT_BRACKETS):
        depth += 1 if c in _OPENERS else -1
        if depth > MAX_JSON_DEPTH:
            raise BadJson(f"nested deeper than {MAX_JSON_DEPTH}")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise BadJson(type(e).__name__) from None


_OPENERS = b"[{"
# Every byte but brackets: what bytes.translate deletes to leave the nesting (brackets inside strings
# count too, which only makes the check stricter than needed).
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def decode_value(val: Any) -> Any:
    """One gNMI ``TypedValue`` as a Python value.

    Args:
        val: a ``gnmi_pb2.TypedValue``.

    Returns:
        int, float, str, bool, bytes, a list (leaf-list), a parsed JSON document (json_val /
        json_ietf_val; see ``flatten_json``), or None when no value is set.

    Raises:
        BadJson: a JSON value that does not parse or nests too deep.
    """
    kind = val.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("uint_val", "int_val", "double_val", "string_val", "bool_val", "ascii_val"):
        return getattr(val, kind)
    if kind == "float_val":
        return _f32(val.float_val)
    if kind == "decimal_val":
        return _decimal(val.decimal_val)
    if kind == "bytes_val":
        return _bytes_value(val.bytes_val)
    if kind in ("json_val", "json_ietf_val"):
        return JsonDoc(_json(getattr(val, kind)), ietf=kind == "json_ietf_val")
    if kind == "leaflist_val":
        return [decode_value(e) for e in val.leaflist_val.element]
    return None  # any_val / proto_bytes: nothing in the catalogue arrives that way


@dataclass(frozen=True, slots=True)
class JsonDoc:
    """A decoded json_val / json_ietf_val document (ietf: keys may carry RFC 7951 module prefixes)."""

    doc: Any
    ietf: bool


def flatten_json(doc: JsonDoc, base: list[Elem]) -> Iterator[tuple[list[Elem], Any]]:
    """Yield ``(path, leaf value)`` for every leaf of a JSON document rooted at ``base``.

    Objects become child elements; a list of scalars is a leaf-list (yielded as one list value); a list
    of objects is a YANG list whose key leaves JSON does not mark, so it is skipped.
    """
    stack: list[tuple[list[Elem], Any]] = [(base, doc.doc)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                name = strip_module(k) if doc.ietf else k
                stack.append(([*path, (name, {})], v))
        elif isinstance(node, list):
            if all(not isinstance(x, dict | list) for x in node):
                yield path, node
        else:
            yield path, node


def number(value: Any, values: dict[str, float] | Any = None) -> float | int | None:
    """A decoded leaf as a number, or None when it is not numeric.

    Args:
        value: a decoded scalar.
        values: enum mapping for string leaves (identity prefixes such as ``openconfig-if-ethernet:``
            are stripped before lookup).
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        if values is not None:
            return values.get(strip_module(value))
        try:  # RFC 7951 encodes 64-bit integers and decimal64 as strings
            return int(value)
        except ValueError:
            pass
        try:
            f = float(value)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


# -- paths -----------------------------------------------------------------------------------------
def normalise(prefix: Any, path: Any) -> list[Elem]:
    """Join a notification prefix and an update path into normalised elements.

    Args:
        prefix: a ``gnmi_pb2.Path`` (may be empty) or None.
        path: a ``gnmi_pb2.Path``.
    """
    out: list[Elem] = []
    for p in (prefix, path):
        if p is None:
            continue
        if not p.elem and p.element:  # gNMI < 0.4 sends the deprecated string elements
            for name in p.element:
                out.append((strip_module(name), {}))
            continue
        for e in p.elem:
            keys = dict(e.key)
            if not e.name and out:
                # Junos: a nameless element carrying the keys of the list element before it.
                out[-1][1].update(keys)
                continue
            out.append((strip_module(e.name), keys))
    return out


def is_under(path: list[Elem], top: list[Elem]) -> bool:
    """Whether ``path`` is ``top`` or inside it (a key ``*`` or absent in ``top`` matches any)."""
    if len(top) > len(path):
        return False
    for (n, k), (tn, tk) in zip(path, top, strict=False):
        if tn not in (n, "*", "..."):
            return False
        if any(v != "*" and k.get(kk) != v for kk, v in tk.items()):
            return False
    return True


# -- the decoder -----------------------------------------------------------------------------------
class _Leaf(SeriesHandle):
    """A cached decision for one path: what its updates become (the rule's fields copied for speed).

    It is also its series' handle (``SeriesHandle``): a plain counter's reading (``_PlainCounter``) goes to
    the store through it as a ``CounterReading``.
    """

    __slots__ = ("epoch", "epoch_key", "rule")

    def __init__(
        self, rule: Rule, lbls: Labels, epoch_key: tuple[object, ...] | None, epoch: list[int | None] | None
    ) -> None:
        super().__init__(rule.metric, lbls)
        self.rule = rule
        self.epoch_key = epoch_key
        # the epoch of the reset marker that governs it (``Decoder._epochs``), or None when none does
        self.epoch = epoch


class _PlainCounter(_Leaf):
    """A counter in wire units (the integer goes to the store as is): the common update, a class of its
    own so that the hot loop tells it by one check."""

    __slots__ = ()


_NOMATCH = object()
_OVER_CAP = object()  # the path maps to a new series while the device is at its series cap


class Decoder:
    """Turns one device's notifications into samples and deletes, remembering decisions per path.

    Args:
        table: the device's path rules.
        max_series: the target's series cap (None: none).
        handles: a plain counter's reading comes out as a ``CounterReading`` through its path's series
            handle, not as a ``Sample``: what ``Store.ingest_runs`` takes fastest (the source's stream).
    """

    def __init__(self, table: PathTable, max_series: int | None = None, handles: bool = False) -> None:
        self.table = table
        self.handles = handles
        # The target's series cap: series beyond it are neither remembered nor decoded, only counted in
        # ``over_cap`` (the store would drop them anyway; remembering them first is what cost memory).
        self.max_series = max_series
        self.over_cap = 0  # updates dropped for the cap since the source last drained it
        self._over_cached = 0
        # prefix bytes -> path bytes -> decision (_Leaf, a base path for JSON values, or _NOMATCH)
        self._cache: dict[bytes, dict[bytes, Any]] = {}
        self._size = 0
        self._markers: dict[Any, object] = {}  # epoch key -> the reset marker's last value
        # epoch key -> [how many times that marker changed, or None before the first change]: one cell per
        # marker that its leaves share, so a counter reads its epoch without hashing the key
        self._epochs: dict[Any, list[int | None]] = {}
        self._live: dict[tuple[str, Labels], list[Elem]] = {}  # series seen -> path, for deletes
        self._labels: dict[Labels, Labels] = {}  # the cached decisions' label sets, one object each
        self.invalid: list[str] = []  # reasons of values dropped while decoding; the source drains it

    def notification(self, n: Any) -> tuple[list[Sample | CounterReading], list[tuple[str, Labels]]]:
        """Decode one ``Notification`` (a ``shallow`` one; a ``gnmi_pb2`` one is converted first).

        Returns:
            the readings (time_ns = the notification timestamp: ``Sample``s, and ``CounterReading``s when
            the decoder gives ``handles``) and the series its deletes remove.

        Raises:
            google.protobuf.message.DecodeError: a path new to the decoder is not a ``Path``.
        """
        n = shallow.notification(n)
        ts = n.timestamp or None
        pkey: bytes = n.prefix
        gone = self._deletes(pkey, n.delete) if n.delete else []
        sub = self._cache.get(pkey)
        if sub is None:
            sub = self._cache[pkey] = {}
        over_cap = self.over_cap
        dropped = len(self.invalid)
        out, deferred, late = self._updates(sub, pkey, n.update, ts)
        if late:
            # A reset marker changed after counters it governs were decoded (it follows them in the
            # notification): decode again, now with the new marker. Happens at start-up and on a clear.
            self.over_cap = over_cap
            del self.invalid[dropped:]  # counted again by the second pass
            out, deferred, _ = self._updates(sub, pkey, n.update, ts)
        if deferred:
            for leaf, value in deferred:
                if leaf.rule.is_epoch:
                    self._marker(leaf.epoch_key, value)
            for leaf, value in deferred:
                sample = None if leaf.rule.is_epoch else _sample(leaf, value, ts, self.invalid)
                if sample is not None:
                    out.append(sample)
        if self._size > _MAX_CACHE:
            self._clear_cache()
        return out, gone

    def _clear_cache(self) -> None:
        self._cache.clear()
        self._labels.clear()
        self._size = 0
        self._over_cached = 0

    def counter_key(self, n: Any) -> tuple[bytes, ...] | None:
        """What a notification updates, when that is only counters (or unmapped paths) already decided.

        Two notifications with the same key update the same counters, so the older one may be skipped
        unread under a backlog: the newer one carries every increment. None when it holds a delete, a
        gauge, a reset marker or a path not decided yet: then every reading of it counts.
        """
        n = shallow.notification(n)
        if n.delete:
            return None
        pkey: bytes = n.prefix
        sub = self._cache.get(pkey)
        if sub is None:
            return None
        key = [pkey]
        for u in n.update:
            pb: bytes = u.path
            leaf = sub.get(pb)
            if leaf is not _NOMATCH and (
                not isinstance(leaf, _Leaf) or not leaf.rule.counter or leaf.rule.is_epoch
            ):
                return None
            key.append(pb)
        return tuple(key)

    def _updates(
        self, sub: dict[bytes, Any], pkey: bytes, updates: Any, ts: int | None
    ) -> tuple[list[Sample | CounterReading], list[tuple[_Leaf, Any]], bool]:
        """Decode the updates of one notification (the hot loop).

        Returns:
            readings, JSON-derived leaves still to convert, and whether a reset marker changed after
            counters were decoded.
        """
        out: list[Sample | CounterReading] = []
        append = out.append
        deferred: list[tuple[_Leaf, Any]] = []
        handles = self.handles
        late = False
        for u in updates:
            pb = u.path
            leaf: Any = sub.get(pb)
            if leaf.__class__ is _PlainCounter:  # the common case, inline
                val = u.val
                raw = val.uint_val
                # an unset oneof member reads 0, so a non-zero uint_val is the value set
                if raw or val.WhichOneof("value") == "uint_val":
                    cell = leaf.epoch
                    epoch = None if cell is None else cell[0]
                    append(
                        (leaf, raw, epoch, ts)
                        if handles
                        else Sample(leaf.metric, leaf.labels, float(raw), raw, 64, epoch, ts)
                    )
                    continue
            elif leaf is None:
                leaf = self._resolve(pkey, pb)
                if leaf is not _OVER_CAP or self._remember_over_cap():
                    sub[pb] = leaf
            if leaf is _NOMATCH:
                continue  # an unmapped path: its value is never read
            val = u.val
            if not isinstance(leaf, _Leaf):
                if leaf is _OVER_CAP:
                    self.over_cap += 1
                else:  # the path only maps when the value is a JSON document
                    self._json(leaf, val, deferred)
                continue
            try:
                scalar = _scalar(val)
            except BadJson:
                self.invalid.append("malformed_json")
                continue
            if leaf.rule.is_epoch:
                if self._marker(leaf.epoch_key, scalar):
                    late = late or bool(out)
                continue
            sample = _sample(leaf, scalar, ts, self.invalid)
            if sample is not None:
                out.append(sample)
        return out, deferred, late

    def _marker(self, key: Any, value: Any) -> bool:
        """Record a reset marker's value.

        Returns:
            whether the counters it governs entered a new epoch (the marker changed after its first value).
        """
        old = self._markers.get(key, _NOMATCH)
        if old == value:
            return False
        if old is _NOMATCH and self.max_series is not None and len(self._markers) >= self.max_series:
            return False  # a marker per series at most: the counters it would govern are beyond the cap
        self._markers[key] = value
        if old is _NOMATCH:
            return False  # the baseline (see the module docstring)
        cell = self._epoch_cell(key)
        if cell is not None:
            cell[0] = (cell[0] or 0) + 1
        return True

    def _remember_over_cap(self) -> bool:
        """Whether one more path beyond the cap may be cached (a bounded number is)."""
        self._over_cached += 1
        return self._over_cached <= _MAX_OVER_CAP_CACHED

    def _resolve(self, pkey: bytes, pb: bytes) -> Any:
        self._size += 1
        elems = normalise(shallow.path(pkey), shallow.path(pb))
        leaf = self._leaf(elems)
        if leaf is not None:
            return leaf
        # No leaf maps here; a JSON value at this path may still hold mapped leaves below it.
        return elems if self._maps_below(elems) else _NOMATCH

    def _leaf(self, elems: list[Elem]) -> Any:
        """The decision for a leaf path: a ``_Leaf``, ``_OVER_CAP``, or None when no rule maps it."""
        rule = self.table.match(elems)
        if rule is None:
            return None
        lbls = rule.labels(elems)
        if lbls is None:
            return None
        if not rule.is_epoch:
            ident = (rule.metric, lbls)
            if ident not in self._live:
                if self.max_series is not None and len(self._live) >= self.max_series:
                    return _OVER_CAP
                self._live[ident] = elems
        # One tuple per label set, shared by its leaves: the store recognises an interface's next
        # counter by identity instead of hashing its labels again.
        lbls = self._labels.setdefault(lbls, lbls)
        plain = rule.counter and rule.scale == 1.0
        key = rule.epoch_key(elems)
        epoch = None if key is None or rule.is_epoch else self._epoch_cell(key)
        return (_PlainCounter if plain else _Leaf)(rule, lbls, key, epoch)

    def _epoch_cell(self, key: Any) -> list[int | None] | None:
        """The epoch cell of a reset marker, or None past one per series (as ``_marker``): its counters
        then carry no epoch, and a reset shows by their decrease alone."""
        cell = self._epochs.get(key)
        if cell is None:
            if self.max_series is not None and len(self._epochs) >= self.max_series:
                return None
            cell = self._epochs[key] = [None]
        return cell

    def _maps_below(self, elems: list[Elem]) -> bool:
        n = len(elems)
        names = tuple(e[0] for e in elems)
        if any(len(k) > n and k[:n] == names for k in self.table.exact):
            return True
        return any(size > n for size in self.table.wild)

    def _json(self, base: list[Elem], val: Any, deferred: list[tuple[_Leaf, Any]]) -> None:
        try:
            value = decode_value(val)
        except BadJson:
            self.invalid.append("malformed_json")  # one bad document: drop it, keep the stream
            return
        if not isinstance(value, JsonDoc):
            return
        for path, leaf_value in flatten_json(value, base):
            leaf = self._leaf(path)
            if leaf is _OVER_CAP:
                self.over_cap += 1
            elif leaf is not None:
                deferred.append((leaf, leaf_value))

    def prune(self, keep: Callable[[str, Labels], bool]) -> int:
        """Forget series the store no longer holds (expired), so churn does not grow ``_live``.

        Returns:
            how many were forgotten.
        """
        gone = [ident for ident in self._live if not keep(*ident)]
        for ident in gone:
            del self._live[ident]
        if gone:
            self._clear_cache()  # cached decisions would not re-register a series that comes back
        return len(gone)

    def _deletes(self, pkey: bytes, deletes: Any) -> list[tuple[str, Labels]]:
        gone: list[tuple[str, Labels]] = []
        prefix = shallow.path(pkey)
        for d in deletes:
            top = normalise(prefix, shallow.path(d))
            if not top:
                continue  # Huawei sends empty delete paths (issue_17412)
            for ident, path in list(self._live.items()):
                if is_under(path, top):
                    del self._live[ident]
                    gone.append(ident)
        if gone:
            # Deletes are rare; re-resolving paths afterwards is cheap and re-registers live series.
            self._clear_cache()
        return gone


def _scalar(val: Any) -> Any:
    """A TypedValue as a Python scalar."""
    kind = val.WhichOneof("value")
    if kind == "uint_val":
        return val.uint_val
    return decode_value(val)


def _sample(leaf: _Leaf, value: Any, ts: int | None, invalid: list[str]) -> Sample | None:
    """The sample of one leaf's value; None when it is no number, its reason appended to ``invalid``."""
    rule = leaf.rule
    x = number(value, rule.values)
    if x is None:
        invalid.append(_unreadable(value, rule.values))
        return None
    if rule.counter:
        epoch = None if leaf.epoch is None else leaf.epoch[0]
        if isinstance(x, float) and not math.isfinite(x):
            # No integer to track: the store drops it and counts it (spanwatch_invalid_values_total).
            return Sample(leaf.metric, leaf.labels, x, None, 64, epoch, ts, rule.scale)
        raw = int(x)
        if leaf.__class__ is _PlainCounter:
            return Sample(leaf.metric, leaf.labels, float(raw), raw, 64, epoch, ts)
        # a counter in other units (µs -> s): the store tracks the integers, exports scaled
        return Sample(leaf.metric, leaf.labels, raw * rule.scale, raw, 64, epoch, ts, rule.scale)
    return Sample(leaf.metric, leaf.labels, x * rule.scale, None, 64, None, ts)


def _unreadable(value: Any, values: Mapping[str, float] | None) -> str:
    """Why ``number`` found no number in ``value`` (the ``reason`` of spanwatch_invalid_values_total)."""
    if isinstance(value, str) and values is not None:
        return "unknown_enum"
    if isinstance(value, str):
        try:
            f = float(value)
        except ValueError:
            return "not_a_number"
        return "nan" if math.isnan(f) else "inf"
    return "not_a_number"
