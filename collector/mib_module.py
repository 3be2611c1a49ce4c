"""``spanwatch mib-module``: a mapping module skeleton from a MIB module and a few lines of choices.

snmp_exporter's generator walks a MIB tree and a ``generator.yml``; this one does the same for one table:
pysmi compiles the MIB (its own source, the folders given with ``--mib-dir``, then small stand-ins for
the SMI modules every MIB imports) to JSON, and the choices say which table, which columns become which
catalogue metrics, and where the labels come from::

    description: Acme line cards, optical ports       # optional
    table: acmePortTable                              # the table (or its entry)
    labels: {interface: acmePortName}                 # an index part, or a column (read as a lookup)
    columns:
      acmePortRxPower: {metric: dci_optics_rx_power_dbm}      # scale from UNITS "0.01 dBm" when unsaid
      acmePortOsnr: {metric: dci_optics_osnr_db, scale: 0.1}

The result is validated against the mapping schema before it is written; review it (enums, skip values,
``where``) before use. Needs the ``generator`` extra (pysmi).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from collector.errors import ConfigError, SpanwatchError
from collector.sources.snmp.tables import Module
from collector.yaml_input import read_yaml

STUBS = Path(__file__).with_name("mib_stubs")
_TEXT_TYPES = {"DisplayString", "OctetString", "OCTET STRING", "SnmpAdminString"}
_UNITS_SCALE = re.compile(r"^\s*(?:units of\s+)?(0?\.\d+|1?0*1)\s*(?:[a-zA-Zµ%/]|$)")


class ColumnChoice(BaseModel):
    """What one column becomes (the same keys as a module's column, less ``column``)."""

    model_config = ConfigDict(extra="forbid")
    metric: str
    scale: float | None = None
    enum: dict[int, float] | None = None
    skip: tuple[int, ...] = ()
    labels: dict[str, str] = {}


class Choices(BaseModel):
    """The few lines a user writes."""

    model_config = ConfigDict(extra="forbid")
    description: str | None = None
    table: str
    labels: dict[str, str] = {}
    columns: dict[str, str | ColumnChoice]


def arguments(p: argparse.ArgumentParser) -> None:
    """``mib-module`` options."""
    p.add_argument("mib", type=Path, help="the MIB module's file")
    p.add_argument("--choices", type=Path, required=True, help="YAML: table, labels, columns (see docs)")
    p.add_argument("--mib-dir", type=Path, action="append", default=[], help="where its imports are")
    p.add_argument("--out", type=Path, help="write the module here (default: standard output)")


def run(args: argparse.Namespace) -> int:
    """Generate, validate and write the module."""
    raw = read_yaml(args.choices)
    try:
        choices = Choices.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(*(f"{args.choices}: {_where(err)}: {err['msg']}" for err in e.errors())) from None
    mib = compile_mib(args.mib, args.mib_dir)
    text = render(generate(mib, choices), args.mib.name, choices.table)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text)
        print(f"{args.out}: module written from {args.mib.name} {choices.table}", file=sys.stderr)
    return 0


def compile_mib(path: Path, mib_dirs: list[Path]) -> dict[str, Any]:
    """The MIB's objects as pysmi's JSON document (name -> object).

    Raises:
        SpanwatchError: pysmi is missing, or the MIB does not compile.
    """
    try:
        from pysmi.codegen import JsonCodeGen
        from pysmi.compiler import MibCompiler
        from pysmi.parser import SmiStarParser
        from pysmi.reader import FileReader
        from pysmi.searcher import StubSearcher
        from pysmi.writer import CallbackWriter
    except ImportError:
        raise SpanwatchError("mib-module needs pysmi: pip install 'spanwatch[generator]'") from None
    name = _module_name(path)
    compiled: dict[str, str] = {}
    compiler = MibCompiler(
        SmiStarParser(),
        JsonCodeGen(),
        CallbackWriter(lambda mib, data, _ctx: compiled.__setitem__(mib, data)),
    )
    # The MIB's own folder first, then the user's, then our stand-ins for the SMI modules.
    compiler.add_sources(*(FileReader(str(d)) for d in [path.parent, *mib_dirs, STUBS]))
    compiler.add_searchers(StubSearcher(*JsonCodeGen.baseMibs))
    status = compiler.compile(name, genTexts=True)
    if name not in compiled:
        problems = [f"{mib}: {getattr(s, 'error', s)}" for mib, s in status.items() if str(s) != "untouched"]
        raise SpanwatchError(
            f"{path}: does not compile ({'; '.join(problems)}); give its imports with --mib-dir"
        )
    document: dict[str, Any] = json.loads(compiled[name])
    return document


def _module_name(path: Path) -> str:
    """The module name a MIB file declares (``ACME-MIB DEFINITIONS ::= BEGIN``)."""
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise SpanwatchError(f"{path}: {e.strerror}") from None
    m = re.search(r"^\s*([A-Za-z][\w-]*)\s+DEFINITIONS\s*::=\s*BEGIN", text, flags=re.M)
    if m is None:
        raise SpanwatchError(f"{path}: not a MIB module (no 'NAME DEFINITIONS ::= BEGIN')")
    return m.group(1)


def generate(mib: dict[str, Any], choices: Choices) -> dict[str, Any]:
    """The module document for ``choices``.

    Raises:
        ConfigError: a choice names something the MIB does not have, or the module does not validate.
    """
    entry_name, entry = _entry(mib, choices.table)
    index = [i["object"] for i in entry.get("indices", [])]
    if not index:
        raise ConfigError(f"{choices.table}: the MIB gives its entry no INDEX")
    columns = {
        name: obj
        for name, obj in mib.items()
        if isinstance(obj, dict) and obj.get("nodetype") == "column" and _parent(obj["oid"]) == entry["oid"]
    }
    problems: list[str] = []
    labels: dict[str, Any] = {}
    lookups: dict[str, str] = {}
    wanted = choices.labels or ({"interface": index[0]} if index[0] in ("ifIndex",) else {})
    for label, source in wanted.items():
        if source in index:
            labels[label] = source
        elif source in columns:
            lookups[source] = columns[source]["oid"]
            labels[label] = {"lookup": source, "key": list(index)}
        else:
            problems.append(
                f"labels.{label}: {source!r} is neither an index part nor a column of {entry_name}"
            )
    mapped = []
    for name, choice in choices.columns.items():
        if name not in columns:
            problems.append(
                f"columns.{name}: not a column of {entry_name} (has: {', '.join(sorted(columns))})"
            )
            continue
        spec = ColumnChoice(metric=choice) if isinstance(choice, str) else choice
        obj = columns[name]
        column: dict[str, Any] = {"column": int(obj["oid"].rsplit(".", 1)[1]), "metric": spec.metric}
        scale = spec.scale if spec.scale is not None else _units_scale(obj.get("units", ""))
        if scale not in (None, 1.0):
            column["scale"] = scale
        if obj.get("syntax", {}).get("type") in _TEXT_TYPES:
            column["text"] = True  # a number sent as a string
        for key in ("enum", "skip", "labels"):
            if getattr(spec, key):
                column[key] = getattr(spec, key)
        mapped.append(column)
    if problems:
        raise ConfigError(*problems)
    document: dict[str, Any] = {
        "description": choices.description or f"{entry_name} (generated by spanwatch mib-module)",
    }
    if lookups:
        document["lookups"] = lookups
    document["tables"] = [
        {
            "name": choices.table,
            "entry": entry["oid"],
            "index": list(index),
            "labels": labels,
            "columns": mapped,
        }
    ]
    try:
        Module.model_validate(document)
    except ValidationError as e:
        raise ConfigError(*(f"generated module: {_where(err)}: {err['msg']}" for err in e.errors())) from None
    return document


def _entry(mib: dict[str, Any], name: str) -> tuple[str, dict[str, Any]]:
    obj = mib.get(name)
    if isinstance(obj, dict) and obj.get("nodetype") == "table":
        rows = [(n, o) for n, o in mib.items() if isinstance(o, dict) and o.get("nodetype") == "row"]
        found = [(n, o) for n, o in rows if _parent(o["oid"]) == obj["oid"]]
        if found:
            return found[0]
    if isinstance(obj, dict) and obj.get("nodetype") == "row":
        return name, obj
    tables = sorted(n for n, o in mib.items() if isinstance(o, dict) and o.get("nodetype") == "table")
    raise ConfigError(f"table: {name!r} is not a table of this MIB (tables: {', '.join(tables) or 'none'})")


def _parent(oid: str) -> str:
    return oid.rsplit(".", 1)[0]


def _units_scale(units: str) -> float | None:
    """``"0.01 dBm"`` -> 0.01 (a MIB's UNITS often carry the scale); None when they do not."""
    m = _UNITS_SCALE.match(units)
    return float(m.group(1)) if m else None


def _where(err: Any) -> str:
    return ".".join(str(p) for p in err["loc"])


def render(document: dict[str, Any], mib: str, table: str) -> str:
    """The module as YAML, with a header saying where it came from."""
    header = (
        f"# Generated by spanwatch mib-module from {mib} ({table}). Review before use: enums for status\n"
        "# columns, skip values that mean 'no reading', and whether a column is per lane.\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=110)
