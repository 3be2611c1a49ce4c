"""The schema of the SNMP mapping modules (``snmp/<module>.yaml``) and their loader.

A module lists tables. A plain table names its entry OID, how its index splits into named parts,
which labels come from which part (or from a lookup table walked at label refresh), and per column the
catalogue metric and the transform to catalogue units (scale, enum, mW/W to dBm, mantissa x 10^-exponent).
A sensor table (ENTITY-SENSOR-MIB and Cisco's variant) adds the type/scale/precision arithmetic and rules
that pick the metric from the sensor type and its name. Everything is checked at load: unknown keys,
metric names outside the catalogue, labels outside SERIES_LABELS, lookups that are not declared.
"""

from __future__ import annotations

import re
import string
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from collector import yaml_input
from collector.contracts.catalog import CATALOG, SERIES_LABELS
from collector.errors import MappingError
from collector.mappings import HERE

Convert = Literal["mw_to_dbm", "w_to_dbm"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _oid(text: str) -> str:
    if not re.fullmatch(r"\d+(\.\d+)+", text):
        raise ValueError(f"not a numeric OID: {text!r}")
    return text


def _metric(name: str) -> str:
    if name not in CATALOG:
        raise ValueError(f"{name!r} is not in the metric catalogue")
    return name


def _labels(names: dict[str, object]) -> None:
    bad = sorted(set(names) - set(SERIES_LABELS))
    if bad:
        raise ValueError(f"labels {bad} are not series labels {SERIES_LABELS}")


class Lookup(_Strict):
    """A label value read from a lookup table at ``key`` (index parts or nested lookups)."""

    lookup: str
    key: tuple[LabelExpr, ...]


class Format(_Strict):
    """A label value written from index parts: ``{format: "port-{shelf}/{slot}/{port}"}`` (for devices
    whose only port names repeat per card)."""

    format: str


LabelExpr = str | Lookup | Format
"""An index part name, a ``Lookup`` or a ``Format``. For the ``interface`` label an index part or a lookup
gives an ifIndex (named by ifName); a lookup may also give the name itself."""


class Column(_Strict):
    """One column of a table and how it becomes a catalogue value."""

    column: int = Field(ge=0)
    metric: str
    scale: float = 1.0
    enum: dict[int, float] | None = None
    enum_default: float | None = None
    convert: Convert | None = None
    exponent_column: int | None = None  # value x 10^-(that column), for mantissa/exponent pairs
    skip: tuple[int, ...] = ()  # raw values meaning "no reading" (e.g. 0 mW: no optic)
    labels: dict[str, str] = {}
    # The value is a decimal number written as text (Ciena's Decimal3Dig, "-21.004"), not an integer.
    text: bool = False
    # Keep only rows whose index parts have these values (PM tables: one row per statistic).
    where: dict[str, int] = {}
    # Only used for a series that no non-fallback column of the module produced (per interface):
    # 32-bit counters standing in for absent HC ones, never summed with them.
    fallback: bool = False

    @field_validator("metric")
    @classmethod
    def _known(cls, v: str) -> str:
        return _metric(v)

    @model_validator(mode="after")
    def _check(self) -> Column:
        _labels(dict(self.labels))
        return self


class Table(_Strict):
    """A conceptual table: entry OID, index parts, labels and mapped columns."""

    name: str
    entry: str
    index: tuple[str, ...] = Field(min_length=1)
    labels: dict[str, LabelExpr] = {}
    columns: tuple[Column, ...] = Field(min_length=1)
    discontinuity_column: int | None = None  # ifCounterDiscontinuityTime: part of counters' epoch
    where: dict[str, int] = {}  # keep only rows whose index parts have these values
    # added to an index part used as a label (JUNIPER-DOM-MIB lanes count from 0, the catalogue from 1)
    label_offset: dict[str, int] = {}

    @field_validator("entry")
    @classmethod
    def _numeric(cls, v: str) -> str:
        return _oid(v)

    @model_validator(mode="after")
    def _check(self) -> Table:
        _labels(dict(self.labels))
        unknown = sorted(set(self.where).union(*(c.where for c in self.columns)) - set(self.index))
        if unknown:
            raise ValueError(f"where: {unknown} are not index parts")
        offset = sorted(k for k in self.label_offset if not isinstance(self.labels.get(k), str))
        if offset:
            raise ValueError(f"label_offset: {offset} are not labels taken from an index part")
        return self


class SensorRule(_Strict):
    """Which sensors become ``metric``: by type code, and optionally by name/description and units."""

    metric: str
    types: tuple[int, ...] = Field(min_length=1)
    match: str | None = None
    units: str | None = None
    convert: Convert | None = None

    @field_validator("metric")
    @classmethod
    def _known(cls, v: str) -> str:
        return _metric(v)

    @field_validator("match", "units")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            re.compile(v)
        return v


class SensorTable(_Strict):
    """An ENTITY-SENSOR-style table indexed by entPhysicalIndex."""

    name: str
    entry: str
    type_column: int
    scale_column: int
    precision_column: int
    value_column: int
    status_column: int | None = None  # ok(1) only
    units_column: int | None = None
    measured_column: int | None = None  # entSensorMeasuredEntity: the entity the sensor measures
    rules: tuple[SensorRule, ...] = Field(min_length=1)

    @field_validator("entry")
    @classmethod
    def _numeric(cls, v: str) -> str:
        return _oid(v)


class Module(_Strict):
    """One mapping module (one YAML file)."""

    description: str
    lookups: dict[str, str] = {}
    tables: tuple[Table, ...] = ()
    sensors: tuple[SensorTable, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> Module:
        for oid in self.lookups.values():
            _oid(oid)
        for table in self.tables:
            parts = set(table.index)
            for label, expr in table.labels.items():
                _check_expr(expr, parts, set(self.lookups), f"{table.name}.labels.{label}")
            for col in table.columns:
                spec = CATALOG[col.metric]
                required = set(spec.labels) - set(spec.optional)
                missing = sorted(required & {"direction"} - set(col.labels))
                if missing and "direction" not in table.labels:
                    raise ValueError(f"{table.name}: {col.metric} needs label {missing}")
        return self


def _check_expr(expr: LabelExpr, parts: set[str], lookups: set[str], where: str) -> None:
    if isinstance(expr, str):
        if expr not in parts:
            raise ValueError(f"{where}: {expr!r} is not an index part")
        return
    if isinstance(expr, Format):
        named = {name for _, name, _, _ in string.Formatter().parse(expr.format) if name is not None}
        if not named or named - parts:
            raise ValueError(f"{where}: format {expr.format!r} must name index parts only ({sorted(parts)})")
        return
    if expr.lookup not in lookups:
        raise ValueError(f"{where}: lookup {expr.lookup!r} is not declared in lookups")
    for sub in expr.key:
        _check_expr(sub, parts, lookups, where)


def load_file(path: Path) -> Module:
    """Load and validate one module file.

    Raises:
        MappingError: unreadable file, bad YAML or a table that does not validate.
    """
    try:
        raw = yaml_input.load(path)
        return Module.model_validate(raw)
    except (OSError, yaml_input.YamlInputError) as e:
        raise MappingError(f"{path.name}: {e}") from None
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise MappingError(f"{path.name}: {problems}") from None


@cache
def load_all() -> dict[str, Module]:
    """Every shipped module, by name (file stem), validated.

    Raises:
        MappingError: a shipped table is malformed.
    """
    return {p.stem: load_file(p) for p in sorted((HERE / "snmp").glob("*.yaml"))}
