"""Mapping tables: data that says where each catalogue quantity lives on each protocol and vendor.

One YAML file per SNMP module (``snmp/<module>.yaml``) and per gNMI subscription set
(``gnmi/<set>.yaml``); the file name is the name a config uses. The protocol sources load and validate
them at start-up.

Users add their own in directories the config names (``mappings: {snmp_dirs: [...], gnmi_dirs: [...]}``),
same schema, same naming. A user file may not take a shipped name, nor a name another user directory
already gave: such a file is a config error, never a silent override, so what ``if_mib`` means is the
same on every collector (copy the shipped file under a new name to change it).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Literal

HERE = Path(__file__).parent

Kind = Literal["snmp", "gnmi"]
_WHAT = {"snmp": "SNMP module", "gnmi": "gNMI subscription set"}


@cache
def shipped(kind: Kind) -> dict[str, Path]:
    """The shipped mapping files of one kind, by name."""
    return {p.stem: p for p in sorted((HERE / kind).glob("*.yaml"))}


@cache
def snmp_module_names() -> frozenset[str]:
    """Every shipped SNMP module a target's ``modules`` list may name."""
    return frozenset(shipped("snmp"))


@cache
def gnmi_subscription_names() -> frozenset[str]:
    """Every shipped gNMI subscription set a target's ``subscriptions`` list may name."""
    return frozenset(shipped("gnmi"))


def user_files(kind: Kind, dirs: Sequence[Path], key: str) -> tuple[dict[str, Path], list[str]]:
    """The user's mapping files of one kind, by name, and the problems found (each with its location).

    Args:
        kind: ``snmp`` or ``gnmi``.
        dirs: the directories the config names, in order.
        key: the config key of ``dirs``, for locations (``mappings.snmp_dirs``).
    """
    found: dict[str, Path] = {}
    problems: list[str] = []
    ships = shipped(kind)
    for i, folder in enumerate(dirs):
        where = f"{key}[{i}]"
        if not folder.is_dir():
            problems.append(f"{where}: directory not found: {folder}")
            continue
        for path in sorted(folder.glob("*.yaml")):
            name = path.stem
            if name in ships:
                problems.append(
                    f"{where}: {path.name}: {name!r} is the name of a shipped {_WHAT[kind]} "
                    "(user files may not replace shipped ones: give it another name)"
                )
            elif name in found:
                problems.append(f"{where}: {path.name}: {name!r} is already defined by {found[name]}")
            else:
                found[name] = path
    return found, problems


def all_files(kind: Kind, dirs: Sequence[Path] = ()) -> dict[str, Path]:
    """Shipped and user files of one kind, by name (a conflicting user file is left out)."""
    return {**user_files(kind, dirs, "")[0], **shipped(kind)}
