"""``dci_link_*`` from the config and the member speeds the devices report (what a link can carry)."""

from __future__ import annotations

import pytest

from collector import config as configuration
from collector import links
from collector.model import gauge, labels
from collector.store import Store, TargetLabels

SPEED = "dci_interface_speed_bytes_per_second"
CONFIG = {
    "targets": [
        {
            "name": "a1",
            "labels": {"site": "a"},
            "snmp": {"address": "127.0.0.1", "community_env": "LINKS_TEST_COMMUNITY"},
        },
        {
            "name": "a2",
            "labels": {"site": "a"},
            "snmp": {"address": "127.0.0.1", "community_env": "LINKS_TEST_COMMUNITY"},
        },
        {
            "name": "b1",
            "labels": {"site": "b"},
            "snmp": {"address": "127.0.0.1", "community_env": "LINKS_TEST_COMMUNITY"},
        },
    ],
    "links": [
        {
            "name": "a-b",
            "site_a": "a",
            "site_b": "b",
            "distance_km": 100,
            "members": [
                {"device": "a1", "interface": "Eth1"},
                {"device": "a2", "interface": "Eth1"},
                {"device": "b1", "interface": "Eth1"},
                {"device": "b1", "interface": "Eth2"},
            ],
        }
    ],
}


def test_capacity_is_the_narrower_side_of_the_member_speeds_the_devices_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LINKS_TEST_COMMUNITY", "x")
    config = configuration.parse(CONFIG)
    store = Store()
    for device in ("a1", "a2", "b1"):
        store.set_target(device, TargetLabels(ttl=60))
    links.update(store, config)
    name = (("link", "a-b"),)
    assert store.value("dci_link_capacity_bytes_per_second", name) == 0.0  # no speed reported yet
    store.ingest("a1", "snmp", [gauge(SPEED, labels(interface="Eth1"), 50e9)], 0)
    store.ingest("a2", "snmp", [gauge(SPEED, labels(interface="Eth1"), 50e9)], 0)
    store.ingest("b1", "snmp", [gauge(SPEED, labels(interface=i), 40e9) for i in ("Eth1", "Eth2", "Eth3")], 0)
    links.update(store, config)
    assert store.value("dci_link_capacity_bytes_per_second", name) == 80e9  # b: two members of 40 GB/s
    delay = store.value("dci_link_propagation_delay_seconds", name)
    assert isinstance(delay, float) and 480e-6 < delay < 520e-6  # 100 km of fibre
    assert store.value("dci_link_bandwidth_delay_product_bytes", name) == 80e9 * 2 * delay
