"""gNMI subscription sets: load, validate and compile the path tables in ``collector/mappings/gnmi``.

One YAML file per subscription set names the paths to subscribe to and, in ``groups``, maps each leaf
(a path template) onto a catalogue metric. A template element is ``name``, ``name[key=value]...`` or a
captured element name ``{label}``; a key value is ``*`` (any), a literal, or ``{label}`` /
``{label|transform}`` (captured into a series label). Names are never derived from paths: every metric is
written out in the table.

Tables are compiled ahead of use into ``PathTable``: a dict keyed by the tuple of element names (keys
left out), so matching one update is one dict lookup; the rare templates with a wildcard element name
(SONiC's ``COUNTERS/<port>/...``) sit in a per-length list tried only on a miss.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from collector.contracts.catalog import CATALOG, SERIES_LABELS, STAT_SUFFIXES, Kind
from collector.errors import MappingError
from collector.mappings import HERE as MAPPINGS_DIR
from collector.yaml_input import read_yaml

GNMI_DIR = MAPPINGS_DIR / "gnmi"

Elem = tuple[str, dict[str, str]]
"""A normalised path element: the name without module prefix, and its keys."""


def _plus1(value: str) -> str:
    # Juniper native optics number lanes from 0; the catalogue's ``lane`` is 1-based.
    return str(int(value) + 1)


def _after_colon(value: str) -> str:
    # SONiC names queues and PFC watchdog entries "<port>:<index>" in COUNTERS_DB.
    return value.rpartition(":")[2]


TRANSFORMS: dict[str, Callable[[str], str]] = {"plus1": _plus1, "after_colon": _after_colon}
"""Label value transforms a template may name after ``|``."""

_STAT_LEAVES = {"instant": "", "avg": "_avg", "min": "_min", "max": "_max"}
assert set(_STAT_LEAVES.values()) - {""} == set(STAT_SUFFIXES)


# -- the YAML schema -------------------------------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SubscriptionSpec(_Strict):
    """One subscription path and its mode (gNMI SubscriptionMode)."""

    path: str
    mode: Literal["sample", "on_change", "target_defined"] = "sample"


class LeafSpec(_Strict):
    """Where one leaf goes: metric, scale into catalogue units, static labels, string values."""

    metric: str
    scale: float = 1.0
    labels: dict[str, str] = {}
    stats: bool = Field(default=False, description="an OpenConfig stat container (instant/avg/min/max)")
    values: dict[str, float] | None = Field(default=None, description="string (enum) value -> number")


class GroupSpec(_Strict):
    """Leaves under one common prefix template."""

    prefix: str
    epoch: str | None = Field(
        default=None, description="leaf (under prefix) used as the counters' reset marker"
    )
    labels: dict[str, str] = {}
    leaves: dict[str, str | LeafSpec]


class SetSpec(_Strict):
    """One subscription set (one YAML file)."""

    description: str
    target: str | None = Field(default=None, description="gNMI prefix target, e.g. SONiC's COUNTERS_DB")
    subscriptions: list[SubscriptionSpec] = Field(min_length=1)
    groups: list[GroupSpec] = []


# -- path templates --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Capture:
    """Take a label from element ``index``: its key ``key``, or its name when ``key`` is None."""

    label: str
    index: int
    key: str | None
    transform: Callable[[str], str] | None = None

    def value(self, elems: list[Elem]) -> str | None:
        name, keys = elems[self.index]
        raw = name if self.key is None else keys.get(self.key)
        if raw is None:
            return None
        return self.transform(raw) if self.transform is not None else raw


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed path template."""

    names: tuple[str | None, ...]  # None: any element name
    captures: tuple[Capture, ...]
    literals: tuple[tuple[int, str, str], ...]  # (element index, key, required value)


def split_path(path: str) -> list[str]:
    """Split ``/a/b[k=v/w]/c`` into elements, keeping ``/`` inside brackets.

    Raises:
        MappingError: unbalanced brackets.
    """
    parts: list[str] = []
    buf: list[str] = []
    depth = 0
    for ch in path:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise MappingError(f"unbalanced ']' in path {path!r}")
        if ch == "/" and depth == 0:
            if buf:
                parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    if depth:
        raise MappingError(f"unbalanced '[' in path {path!r}")
    if buf:
        parts.append("".join(buf))
    return parts


def parse_elem(text: str) -> Elem:
    """``name[k=v][k2=v2]`` -> ``(name, {k: v, k2: v2})``, the module prefix stripped from the name.

    Raises:
        MappingError: a malformed key.
    """
    name, _, rest = text.partition("[")
    keys: dict[str, str] = {}
    if rest:
        for chunk in ("[" + rest).split("]")[:-1]:
            k, sep, v = chunk.lstrip("[").partition("=")
            if not sep or not k:
                raise MappingError(f"malformed key {chunk!r} in {text!r}")
            keys[k] = v
    return strip_module(name), keys


def strip_module(name: str) -> str:
    """``openconfig-interfaces:interfaces`` -> ``interfaces`` (RFC 7951 module-qualified names)."""
    return name.rpartition(":")[2] if ":" in name else name


def _capture(text: str, index: int, key: str | None) -> Capture:
    label, _, transform = text[1:-1].partition("|")
    if label not in SERIES_LABELS:
        raise MappingError(f"{label!r} is not a series label (known: {', '.join(SERIES_LABELS)})")
    if transform and transform not in TRANSFORMS:
        raise MappingError(f"unknown transform {transform!r} (known: {', '.join(TRANSFORMS)})")
    return Capture(label, index, key, TRANSFORMS.get(transform))


def parse_template(path: str) -> Template:
    """Parse a path template (see the module docstring).

    Raises:
        MappingError: malformed template, unknown label or transform.
    """
    names: list[str | None] = []
    captures: list[Capture] = []
    literals: list[tuple[int, str, str]] = []
    for i, part in enumerate(split_path(path)):
        name, keys = parse_elem(part)
        if name == "*" or (name.startswith("{") and name.endswith("}")):
            names.append(None)
            if name != "*":
                captures.append(_capture(name, i, None))
        else:
            names.append(name)
        for k, v in keys.items():
            if v.startswith("{") and v.endswith("}"):
                captures.append(_capture(v, i, k))
            elif v != "*":
                literals.append((i, k, v))
    return Template(tuple(names), tuple(captures), tuple(literals))


# -- compiled rules --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Rule:
    """What one matched leaf becomes.

    Attributes:
        metric: catalogue name.
        counter: the catalogue says counter (an integer reading with reset tracking).
        scale: multiply the wire value by this to get catalogue units.
        values: string (enum) value -> number, or None.
        captures: labels taken from the path.
        static: labels fixed by the table.
        literals: key values the path must carry.
        epoch_group: the reset-marker group this counter belongs to, or None.
        epoch_captures: how many leading captures identify the group instance (the prefix's captures).
        is_epoch: this leaf is the group's reset marker, not a metric.
    """

    metric: str
    counter: bool
    scale: float
    values: Mapping[str, float] | None
    captures: tuple[Capture, ...]
    static: tuple[tuple[str, str], ...]
    literals: tuple[tuple[int, str, str], ...] = ()
    epoch_group: int | None = None
    epoch_captures: int = 0
    is_epoch: bool = False

    def labels(self, elems: list[Elem]) -> tuple[tuple[str, str], ...] | None:
        """The series labels for a matched path, canonical order; None when a key is missing."""
        pairs = list(self.static)
        for c in self.captures:
            v = c.value(elems)
            if v is None:
                return None
            pairs.append((c.label, v))
        pairs.sort(key=lambda kv: _LABEL_ORDER[kv[0]])
        return tuple(pairs)

    def epoch_key(self, elems: list[Elem]) -> tuple[object, ...] | None:
        """Which reset marker instance governs this leaf, or None."""
        if self.epoch_group is None:
            return None
        return (self.epoch_group, *(c.value(elems) for c in self.captures[: self.epoch_captures]))

    def accepts(self, elems: list[Elem]) -> bool:
        """Whether the path carries every literal key value the template requires."""
        return all(elems[i][1].get(k) == v for i, k, v in self.literals)


_LABEL_ORDER = {name: i for i, name in enumerate(SERIES_LABELS)}


@dataclass(slots=True)
class PathTable:
    """Compiled rules of one or more subscription sets."""

    exact: dict[tuple[str, ...], Rule] = field(default_factory=dict)
    wild: dict[int, list[tuple[tuple[str | None, ...], Rule]]] = field(default_factory=dict)

    def match(self, elems: list[Elem]) -> Rule | None:
        """The rule for a normalised path, or None.

        Args:
            elems: the full path (prefix joined), module prefixes stripped.
        """
        names = tuple(e[0] for e in elems)
        rule = self.exact.get(names)
        if rule is None:
            for pattern, candidate in self.wild.get(len(names), ()):
                if all(p is None or p == n for p, n in zip(pattern, names, strict=True)):
                    rule = candidate
                    break
        if rule is None or not rule.accepts(elems):
            return None
        return rule

    def add(self, names: tuple[str | None, ...], rule: Rule, where: str) -> None:
        """Add one rule; a second rule for the same path in one table is a table bug.

        Raises:
            MappingError: the path is already mapped to a different metric.
        """
        if None in names:
            bucket = self.wild.setdefault(len(names), [])
            if any(p == names for p, _ in bucket):
                raise MappingError(f"{where}: path mapped twice")
            bucket.append((names, rule))
            return
        key = tuple(n for n in names if n is not None)
        if key in self.exact:
            raise MappingError(f"{where}: path mapped twice")
        self.exact[key] = rule

    def merge(self, other: PathTable) -> None:
        """Add ``other``'s rules; where both map a path, the first set named wins."""
        for k, r in other.exact.items():
            self.exact.setdefault(k, r)
        for n, bucket in other.wild.items():
            mine = self.wild.setdefault(n, [])
            mine.extend(item for item in bucket if all(p != item[0] for p, _ in mine))


@dataclass(frozen=True, slots=True)
class SubscriptionSet:
    """One loaded set: what to subscribe to and the compiled table."""

    name: str
    target: str | None
    subscriptions: tuple[SubscriptionSpec, ...]
    table: PathTable


def _leaf_rules(leaf: LeafSpec, group_labels: dict[str, str], where: str) -> list[tuple[str, str]]:
    """(relative path suffix, metric) pairs for one leaf, stat containers expanded."""
    spec = CATALOG.get(leaf.metric)
    if spec is None or leaf.metric.startswith("spanwatch_"):
        raise MappingError(f"{where}: {leaf.metric!r} is not a device metric of the catalogue")
    for label in {**group_labels, **leaf.labels}:
        if label not in SERIES_LABELS:
            raise MappingError(f"{where}: {label!r} is not a series label")
    if not leaf.stats:
        return [("", leaf.metric)]
    if not spec.stats:
        raise MappingError(f"{where}: {leaf.metric} has no _min/_max/_avg variants (stats: true)")
    return [(f"/{child}", leaf.metric + suffix) for child, suffix in _STAT_LEAVES.items()]


def compile_set(spec: SetSpec, where: str, group_base: int = 0) -> PathTable:
    """Compile one validated set into a ``PathTable``.

    Args:
        spec: the validated set.
        where: the file name, for error messages.
        group_base: first reset-marker group id (keeps ids unique across sets).

    Raises:
        MappingError: a bad template, metric or label.
    """
    table = PathTable()
    for gi, group in enumerate(spec.groups):
        gid = group_base + gi
        gwhere = f"{where}: groups[{gi}]"
        prefix = parse_template(group.prefix)
        n_prefix_caps = len(prefix.captures)
        if group.epoch is not None:
            tpl = parse_template(f"{group.prefix}/{group.epoch}")
            rule = Rule("", False, 1.0, None, tpl.captures, (), tpl.literals, gid, n_prefix_caps, True)
            table.add(tpl.names, rule, f"{gwhere}.epoch")
        for rel, raw in group.leaves.items():
            leaf = LeafSpec(metric=raw) if isinstance(raw, str) else raw
            lwhere = f"{gwhere}.leaves[{rel}]"
            for suffix, metric in _leaf_rules(leaf, group.labels, lwhere):
                tpl = parse_template(f"{group.prefix}/{rel}{suffix}")
                counter = CATALOG[metric].kind is Kind.COUNTER
                static = tuple((k, str(v)) for k, v in {**group.labels, **leaf.labels}.items())
                rule = Rule(
                    metric,
                    counter,
                    leaf.scale,
                    leaf.values,
                    tpl.captures,
                    static,
                    tpl.literals,
                    gid if counter and group.epoch is not None else None,
                    n_prefix_caps,
                )
                table.add(tpl.names, rule, lwhere)
    return table


def parse_set(name: str, raw: object) -> SubscriptionSet:
    """Validate and compile one set from its parsed YAML.

    Raises:
        MappingError: the table is malformed.
    """
    try:
        spec = SetSpec.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise MappingError(f"{name}.yaml: {problems}") from None
    try:
        table = compile_set(spec, f"{name}.yaml")
    except MappingError as e:
        message = str(e)
        raise MappingError(
            message if message.startswith(f"{name}.yaml") else f"{name}.yaml: {message}"
        ) from None
    return SubscriptionSet(name, spec.target, tuple(spec.subscriptions), table)


@cache
def load_set(name: str, directory: Path = GNMI_DIR) -> SubscriptionSet:
    """Load one shipped subscription set by name (the YAML file stem).

    Raises:
        MappingError: unknown set or malformed table.
    """
    path = directory / f"{name}.yaml"
    return parse_set(name, read_yaml(path, MappingError))


def combined_table(sets: Iterable[SubscriptionSet]) -> PathTable:
    """One table for every set a target subscribes to (the first set wins a shared path)."""
    table = PathTable()
    offset = 0
    for s in sets:
        # Reset-marker group ids are per set; shift them so two sets never share an id.
        shifted = PathTable(
            {k: _shift(r, offset) for k, r in s.table.exact.items()},
            {n: [(p, _shift(r, offset)) for p, r in b] for n, b in s.table.wild.items()},
        )
        table.merge(shifted)
        offset += 10_000
    return table


def _shift(rule: Rule, offset: int) -> Rule:
    if rule.epoch_group is None:
        return rule
    return Rule(
        rule.metric,
        rule.counter,
        rule.scale,
        rule.values,
        rule.captures,
        rule.static,
        rule.literals,
        rule.epoch_group + offset,
        rule.epoch_captures,
        rule.is_epoch,
    )
