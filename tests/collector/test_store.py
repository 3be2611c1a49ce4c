"""The store: labels composed once, counters unwrapped, resets counted, expiry, health series."""

from __future__ import annotations

import math

import pytest

from collector.clock import FakeClock
from collector.exporters.archive import Archive
from collector.model import counter, gauge, labels
from collector.store import Store, TargetLabels

RX = "dci_interface_receive_bytes_total"


def _store(tmp_path=None) -> tuple[Store, FakeClock]:
    clock = FakeClock()
    store = Store(clock, Archive(tmp_path, clock) if tmp_path else None)
    store.set_target(
        "sw1",
        TargetLabels(
            static=(("site", "a"),),
            ttl=30.0,
            links={("interface", "Eth1"): "paris-lyon", ("component", "OpticalChannel1/1"): "paris-lyon"},
        ),
    )
    return store, clock


def test_series_carry_device_static_labels_and_link() -> None:
    store, _ = _store()
    store.ingest("sw1", "snmp", [gauge("dci_optics_rx_power_dbm", labels(interface="Eth1", lane=2), -3.5)], 0)
    ((full, _),) = store.items("dci_optics_rx_power_dbm")
    assert full == (
        ("device", "sw1"),
        ("site", "a"),
        ("interface", "Eth1"),
        ("lane", "2"),
        ("link", "paris-lyon"),
    )


async def test_counter32_wrap_gives_no_spike_and_reboot_is_counted() -> None:
    store, clock = _store()
    key = (("device", "sw1"), ("site", "a"), ("interface", "Eth1"), ("link", "paris-lyon"))
    lbl = labels(interface="Eth1")
    store.ingest("sw1", "snmp", [counter(RX, lbl, 2**32 - 40, 32, epoch=0)], 0)
    await clock.advance(10)
    store.ingest("sw1", "snmp", [counter(RX, lbl, 2**32 - 10, 32, epoch=0)], 0)  # a rate seen: 3/s
    await clock.advance(10)
    store.ingest("sw1", "snmp", [counter(RX, lbl, 20, 32, epoch=0)], 0)
    assert store.value(RX, key) == 2**32 + 20
    assert store.value("dci_counter_discontinuities_total", (("device", "sw1"), ("metric", RX))) is None
    await clock.advance(10)
    store.ingest("sw1", "snmp", [counter(RX, lbl, 7, 32, epoch=1)], 0)  # rebooted
    assert store.value(RX, key) == 7
    assert store.value("dci_counter_discontinuities_total", (("device", "sw1"), ("metric", RX))) == 1


def test_unknown_metric_is_refused() -> None:
    store, _ = _store()
    with pytest.raises(KeyError, match="catalogue"):
        store.ingest("sw1", "snmp", [gauge("dci_made_up", (), 1.0)], 0)


async def test_series_expire_after_their_ttl() -> None:
    store, clock = _store()
    store.ingest("sw1", "snmp", [gauge("dci_interface_oper_up", labels(interface="Eth1"), 1.0)], 0)
    await clock.advance(29)
    assert store.expire() == 0
    await clock.advance(2)
    assert store.expire() == 1
    assert not store.items("dci_interface_oper_up")


def test_changing_a_targets_labels_drops_its_old_series() -> None:
    store, _ = _store()
    store.ingest("sw1", "snmp", [gauge("dci_interface_oper_up", labels(interface="Eth1"), 1.0)], 0)
    store.set_target("sw1", TargetLabels(static=(("site", "b"),)))
    assert not store.items("dci_interface_oper_up")
    store.ingest("sw1", "snmp", [gauge("dci_interface_oper_up", labels(interface="Eth1"), 1.0)], 0)
    assert store.items("dci_interface_oper_up") == [
        ((("device", "sw1"), ("site", "b"), ("interface", "Eth1")), 1.0)
    ]


def test_forget_removes_one_series() -> None:
    store, _ = _store()
    lbl = labels(interface="Eth1")
    store.ingest("sw1", "gnmi", [counter(RX, lbl, 5)], 0)
    store.forget("sw1", RX, lbl)
    assert not store.items(RX)


def test_every_reading_reaches_the_archive(tmp_path) -> None:
    store, _ = _store(tmp_path)
    store.ingest("sw1", "gnmi", [counter(RX, labels(interface="Eth1"), 5, time_ns=123)], 456)
    assert store.archive is not None and store.archive.pending == 1  # type: ignore[attr-defined]
    (row,) = store.archive.rows()  # type: ignore[attr-defined]
    assert row == (123, 456, "sw1", "gnmi", RX, (("interface", "Eth1"),), "paris-lyon", 5.0, 5)


def test_health_counters_and_histograms() -> None:
    store, _ = _store()
    health = (("device", "sw1"), ("source", "snmp"))
    store.inc("spanwatch_polls_total", (*health, ("status", "timeout")))
    store.inc("spanwatch_polls_total", (*health, ("status", "timeout")))
    store.observe("spanwatch_poll_duration_seconds", health, 0.2)
    assert store.value("spanwatch_polls_total", (*health, ("status", "timeout"))) == 2
    hist = store.value("spanwatch_poll_duration_seconds", health)
    assert hist is not None and hist.count == 1 and math.isclose(hist.sum, 0.2)  # type: ignore[union-attr]


def test_scaled_counters_keep_reset_tracking_and_export_catalogue_units() -> None:
    store, _ = _store()
    metric = "dci_pfc_pause_duration_seconds_total"
    lbl = labels(interface="Eth1", priority=3, direction="rx")
    key = (
        ("device", "sw1"),
        ("site", "a"),
        ("interface", "Eth1"),
        ("priority", "3"),
        ("direction", "rx"),
        ("link", "paris-lyon"),
    )
    store.ingest("sw1", "gnmi", [counter(metric, lbl, 1_500_000, scale=1e-6)], 0)  # µs on the wire
    store.ingest("sw1", "gnmi", [counter(metric, lbl, 2_000_000, scale=1e-6)], 0)
    assert store.value(metric, key) == pytest.approx(2.0)
    store.ingest("sw1", "gnmi", [counter(metric, lbl, 10, scale=1e-6)], 0)  # cleared on the device
    assert store.value(metric, key) == pytest.approx(1e-5)
    assert store.value("dci_counter_discontinuities_total", (("device", "sw1"), ("metric", metric))) == 1


async def test_two_sources_of_one_series_do_not_fight() -> None:
    store, clock = _store()
    lbl = labels(interface="Eth2")
    key = (("device", "sw1"), ("site", "a"), ("interface", "Eth2"))
    store.ingest("sw1", "gnmi", [counter(RX, lbl, 1_000)], 0)
    store.ingest("sw1", "snmp", [counter(RX, lbl, 900)], 0)  # SNMP lags behind: not a reset
    store.ingest("sw1", "gnmi", [counter(RX, lbl, 2_000)], 0)
    assert store.value(RX, key) == 2_000
    assert store.value("dci_counter_discontinuities_total", (("device", "sw1"), ("metric", RX))) is None
    await clock.advance(31)  # gNMI went quiet past the TTL: SNMP takes the series over
    store.ingest("sw1", "snmp", [counter(RX, lbl, 2_500)], 0)
    assert store.value(RX, key) == 2_500


def test_optics_reported_per_component_get_the_link_of_the_member_they_carry() -> None:
    store, _ = _store()
    store.ingest("sw1", "gnmi", [gauge("dci_optics_osnr_db", labels(component="OpticalChannel1/1"), 31.5)], 0)
    ((full, _),) = store.items("dci_optics_osnr_db")
    assert full == (
        ("device", "sw1"),
        ("site", "a"),
        ("component", "OpticalChannel1/1"),
        ("link", "paris-lyon"),
    )
