"""Mapping tables: data that says where each catalogue quantity lives on each protocol and vendor.

One YAML file per SNMP module (``snmp/<module>.yaml``) and per gNMI subscription set
(``gnmi/<set>.yaml``); the file name is the name a config uses. The protocol sources load and validate
them at start-up.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

HERE = Path(__file__).parent


@cache
def snmp_module_names() -> frozenset[str]:
    """Every SNMP module a target's ``modules`` list may name."""
    return frozenset(p.stem for p in (HERE / "snmp").glob("*.yaml"))


@cache
def gnmi_subscription_names() -> frozenset[str]:
    """Every gNMI subscription set a target's ``subscriptions`` list may name."""
    return frozenset(p.stem for p in (HERE / "gnmi").glob("*.yaml"))
