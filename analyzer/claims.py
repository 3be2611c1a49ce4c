"""The vendor claims file (interfaces.md): read, checked, and matched to the collector config's devices.

A claims file names vendors, matches each to devices by their target labels (every label given must be
equal), and lists claims against the analyzer's measures (``analyzer.measures.MEASURES``)::

    vendors:
      - name: Vendor A deep-buffer DCI
        match: {vendor: vendor-a}
        claims:
          - {id: lossless-100km, text: "Zero loss at 100 km", measure: dropped_packets_per_terabyte,
             op: "<=", value: 0}

A claim on a measure read from counters of a traffic class (``Measure.by_class``: drops, ECN marks, PFC
pauses) is about the job's traffic class unless it says ``traffic_class: all``: another tenant's best-effort
drops, or pauses on its priority, do not contest a claim on the job's queue.

Every problem is reported with its location (``vendors[0].claims[1].measure: unknown measure 'x'``), all of
them in one ``InputError``, never as a traceback: an unknown measure is an error, not a skip, and so is a
vendor that matches no device (the comparison would silently say "no data" otherwise).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyzer.errors import InputError
from analyzer.measures import MEASURES
from collector import yaml_input
from collector.config import Config

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    "==": math.isclose,
    ">=": operator.ge,
    ">": operator.gt,
}
VENDOR_KEYS = frozenset({"name", "match", "claims"})
CLAIM_KEYS = frozenset({"id", "text", "measure", "op", "value", "traffic_class"})
# A claim's traffic class: ``job`` (the job's class, as the analysis was given or inferred it; the default
# of the measures read from a class's counters, ``Measure.by_class``) or ``all`` (every class together).
TRAFFIC_CLASSES = ("job", "all")


@dataclass(frozen=True)
class Claim:
    """One claim: ``measure op value``, e.g. ``dropped_packets_per_terabyte <= 0``.

    Attributes:
        id: unique within its vendor.
        text: the vendor's words.
        measure: a key of ``MEASURES``.
        op: a key of ``OPERATORS``.
        value: the claimed bound, in the measure's unit.
        traffic_class: ``job`` or ``all`` (``TRAFFIC_CLASSES``).
    """

    id: str
    text: str
    measure: str
    op: str
    value: float
    traffic_class: str = "all"

    def holds(self, measured: float) -> bool:
        """Whether a measured value satisfies the claim."""
        return OPERATORS[self.op](measured, self.value)


@dataclass(frozen=True)
class Vendor:
    """A vendor and its claims.

    Attributes:
        name: as the report shows it.
        match: target labels a device must all carry to be this vendor's.
        claims: in file order.
    """

    name: str
    match: Mapping[str, str]
    claims: tuple[Claim, ...]


@dataclass(frozen=True)
class Claims:
    """A whole claims file.

    Attributes:
        path: where it was read from.
        vendors: in file order.
    """

    path: Path
    vendors: tuple[Vendor, ...]


def _unknown_keys(raw: Mapping[Any, Any], allowed: frozenset[str], where: str) -> list[str]:
    return [
        f"{where}.{key}: unknown key (allowed: {', '.join(sorted(allowed))})"
        for key in raw
        if key not in allowed
    ]


def _text(raw: Mapping[Any, Any], key: str, where: str, problems: list[str]) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}.{key}: a non-empty string is required")
        return ""
    return value


def _claim(raw: Any, where: str, problems: list[str]) -> Claim | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: a claim must be a mapping with id, text, measure, op and value")
        return None
    before = len(problems)
    problems += _unknown_keys(raw, CLAIM_KEYS, where)
    claim_id, text = _text(raw, "id", where, problems), _text(raw, "text", where, problems)
    measure = raw.get("measure")
    if measure not in MEASURES:
        problems.append(f"{where}.measure: unknown measure {measure!r} (known: {', '.join(MEASURES)})")
    op = raw.get("op")
    if op not in OPERATORS:
        problems.append(f"{where}.op: {op!r} is not one of {', '.join(OPERATORS)}")
    value = _number(raw.get("value"))
    if value is None:
        problems.append(f"{where}.value: a finite number is required, got {raw.get('value')!r}")
    by_class = measure in MEASURES and MEASURES[str(measure)].by_class
    traffic_class = raw.get("traffic_class", "job" if by_class else "all")
    if traffic_class not in TRAFFIC_CLASSES:
        problems.append(
            f"{where}.traffic_class: {traffic_class!r} is not one of {', '.join(TRAFFIC_CLASSES)}"
        )
    elif traffic_class == "job" and measure in MEASURES and not by_class:
        problems.append(f"{where}.traffic_class: {measure!r} is not measured per traffic class")
    if len(problems) > before or value is None:
        return None
    return Claim(claim_id, text, str(measure), str(op), value, str(traffic_class))


def _number(raw: Any) -> float | None:
    """A finite number, or None.

    YAML's booleans are ints to Python, and a claim of ``true`` is a typo, not a number. PyYAML reads
    ``1e9`` and ``1.0e9`` as strings (YAML 1.1 wants ``1.0e+9``), so a string that is a number is one.
    """
    if isinstance(raw, bool):
        return None
    if isinstance(raw, str):
        try:
            raw = float(raw)
        except ValueError:
            return None
    if not isinstance(raw, int | float) or not math.isfinite(raw):
        return None
    return float(raw)


def _match(raw: Any, where: str, problems: list[str]) -> dict[str, str]:
    if not isinstance(raw, dict) or not raw:
        problems.append(f"{where}.match: a non-empty mapping of target label: value is required")
        return {}
    if not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in raw.values()):
        problems.append(f"{where}.match: label values must be strings")
        return {}
    return {str(k): str(v) for k, v in raw.items()}


def _vendor(raw: Any, where: str, problems: list[str]) -> Vendor | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: a vendor must be a mapping with name, match and claims")
        return None
    before = len(problems)
    problems += _unknown_keys(raw, VENDOR_KEYS, where)
    name = _text(raw, "name", where, problems)
    match = _match(raw.get("match"), where, problems)
    items = raw.get("claims")
    if not isinstance(items, list) or not items:
        problems.append(f"{where}.claims: a non-empty list of claims is required")
        items = []
    claims = [_claim(item, f"{where}.claims[{j}]", problems) for j, item in enumerate(items)]
    ids = [c.id for c in claims if c is not None]
    problems += [f"{where}.claims: duplicate id {i!r}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    if len(problems) > before:
        return None
    return Vendor(name, match, tuple(c for c in claims if c is not None))


def _parse(path: Path) -> Any:
    try:
        return yaml_input.load(path)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    except yaml_input.YamlInputError as exc:
        raise InputError(path, str(exc)) from None


def load_claims(path: Path) -> Claims:
    """Read and check a claims file.

    Args:
        path: the YAML file.

    Returns:
        The claims.

    Raises:
        InputError: the file is unreadable or invalid; the message lists every problem with its location.
    """
    raw = _parse(path)
    vendors = raw.get("vendors") if isinstance(raw, dict) else None
    if not isinstance(vendors, list) or not vendors:
        raise InputError(path, "vendors: a non-empty list of vendors is required")
    problems = _unknown_keys(raw, frozenset({"vendors"}), "")
    parsed = [_vendor(v, f"vendors[{i}]", problems) for i, v in enumerate(vendors)]
    names = [v.name for v in parsed if v is not None]
    problems += [f"vendors: duplicate name {n!r}" for n in sorted({n for n in names if names.count(n) > 1})]
    if problems:
        raise InputError(path, "; ".join(p.removeprefix(".") for p in problems))
    return Claims(path, tuple(v for v in parsed if v is not None))


def validate_claims(path: Path) -> int:
    """Check a claims file.

    Args:
        path: the YAML file.

    Returns:
        The number of claims.

    Raises:
        InputError: the file is unreadable or invalid; the message lists every problem with its location.
    """
    return sum(len(v.claims) for v in load_claims(path).vendors)


def match_vendors(claims: Claims, config: Config | None) -> dict[str, tuple[str, ...]]:
    """The devices of each vendor: the targets carrying every label of its ``match``.

    Args:
        claims: the claims file.
        config: the collector config (the targets' labels).

    Returns:
        Vendor name -> device names, in config order.

    Raises:
        InputError: there is no config, or a vendor matches no device (the message shows the labels seen).
    """
    if config is None:
        raise InputError(claims.path, "vendors are matched to devices by target labels: give --config too")
    out: dict[str, tuple[str, ...]] = {}
    problems = []
    for i, vendor in enumerate(claims.vendors):
        devices = tuple(
            t.name for t in config.targets if all(t.labels.get(k) == v for k, v in vendor.match.items())
        )
        if not devices:
            seen = sorted({f"{k}={v}" for t in config.targets for k, v in t.labels.items()})
            wanted = ", ".join(f"{k}={v}" for k, v in vendor.match.items())
            problems.append(
                f"vendors[{i}] {vendor.name!r}: match {{{wanted}}} matches no device "
                f"(the config's target labels: {', '.join(seen) or 'none'})"
            )
        out[vendor.name] = devices
    if problems:
        raise InputError(claims.path, "; ".join(problems))
    return out
