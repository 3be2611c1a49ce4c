"""gNMI subscription sets: every shipped table loads; malformed tables fail with MappingError."""

from __future__ import annotations

from typing import Any

import pytest

from collector.contracts.catalog import CATALOG
from collector.errors import MappingError
from collector.mappings import gnmi_subscription_names
from collector.sources.gnmi.paths import load_set as load
from collector.sources.gnmi.paths import parse_set, parse_template, split_path

EXPECTED_SETS = {
    "interfaces",
    "qos",
    "transceiver",
    "optical_channel",
    "logical_channel",
    "arista_pfc",
    "sonic_counters",
    "cumulus_qos",
    "qos_input",
    "juniper_optics",
    "juniper_qmon",
}


def test_every_shipped_set_loads_and_maps_only_catalogue_names() -> None:
    assert gnmi_subscription_names() >= EXPECTED_SETS
    for name in sorted(gnmi_subscription_names()):
        s = load(name)
        rules = [*s.table.exact.values(), *(r for b in s.table.wild.values() for _, r in b)]
        assert rules, name
        assert all(r.is_epoch or r.metric in CATALOG for r in rules), name


def good(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "description": "t",
        "subscriptions": [{"path": "/a/b", "mode": "sample"}],
        "groups": [
            {"prefix": "/a/b[name={interface}]", "leaves": {"c": "dci_interface_receive_bytes_total"}}
        ],
    }
    raw.update(over)
    return raw


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (good(extra=1), "extra"),
        (good(groups=[{"prefix": "/a", "leaves": {"c": "dci_made_up_total"}}]), "not a device metric"),
        (good(groups=[{"prefix": "/a", "leaves": {"c": "spanwatch_target_up"}}]), "not a device metric"),
        (
            good(groups=[{"prefix": "/a[name={colour}]", "leaves": {"c": "dci_interface_oper_up"}}]),
            "not a series label",
        ),
        (
            good(groups=[{"prefix": "/a[name={lane|double}]", "leaves": {"c": "dci_interface_oper_up"}}]),
            "unknown transform",
        ),
        (
            good(
                groups=[{"prefix": "/a", "leaves": {"c": {"metric": "dci_interface_oper_up", "stats": True}}}]
            ),
            "no _min/_max/_avg",
        ),
        (
            good(
                groups=[
                    {
                        "prefix": "/a",
                        "leaves": {"c": "dci_interface_oper_up", "d/../c": "dci_interface_oper_up"},
                    },
                    {"prefix": "/a", "leaves": {"c": "dci_interface_oper_up"}},
                ]
            ),
            "mapped twice",
        ),
        (good(subscriptions=[]), "at least 1"),
        (good(groups=[{"prefix": "/a[name=x", "leaves": {"c": "dci_interface_oper_up"}}]), "unbalanced"),
        (good(subscriptions=[{"path": "/a", "mode": "sometimes"}]), "sample"),
    ],
)
def test_bad_tables_are_rejected(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(MappingError, match=message):
        parse_set("bad", raw)


def test_unknown_set_is_a_mapping_error() -> None:
    with pytest.raises(MappingError, match="no_such_set"):
        load("no_such_set")


def test_templates() -> None:
    assert split_path("/a/b[k=x/y]/c") == ["a", "b[k=x/y]", "c"]
    t = parse_template("/COUNTERS/{interface}/Queues/{queue|after_colon}/X[k=lit][j=*]")
    assert t.names == ("COUNTERS", None, "Queues", None, "X")
    assert [(c.label, c.index, c.key) for c in t.captures] == [("interface", 1, None), ("queue", 3, None)]
    assert t.literals == ((4, "k", "lit"),)
    assert t.captures[1].value([("", {})] * 3 + [("Ethernet0:7", {})]) == "7"


def test_literal_keys_must_match() -> None:
    s = parse_set(
        "t",
        good(
            groups=[
                {
                    "prefix": "/a/b[type=UNICAST][name={interface}]",
                    "leaves": {"c": "dci_interface_receive_bytes_total"},
                }
            ]
        ),
    )
    path = [("a", {}), ("b", {"type": "UNICAST", "name": "e1"}), ("c", {})]
    assert s.table.match(path) is not None
    path[1][1]["type"] = "MULTICAST"
    assert s.table.match(path) is None
