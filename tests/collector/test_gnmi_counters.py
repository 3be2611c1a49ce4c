"""gNMI counters through decoder and store: reset markers seen at start-up, and scaled (µs) counters."""

from __future__ import annotations

from typing import Any

from pygnmi.spec.v080 import gnmi_pb2

from collector.exporters.prometheus import render
from collector.sources.gnmi.client import make_path
from collector.sources.gnmi.decode import Decoder
from collector.sources.gnmi.paths import combined_table, load_set
from collector.store import Store

COUNTERS = "/interfaces/interface[name=Et1]/state/counters"
RX_BYTES = ("dci_interface_receive_bytes_total", (("device", "d"), ("interface", "Et1")))
RESETS = (
    "dci_counter_discontinuities_total",
    (("device", "d"), ("metric", "dci_interface_receive_bytes_total")),
)


def feed(decoder: Decoder, store: Store, prefix: Any, updates: dict[str, Any], ts: int) -> None:
    n = gnmi_pb2.Notification(timestamp=ts, prefix=prefix)
    for path, val in updates.items():
        n.update.add(path=make_path(path), val=gnmi_pb2.TypedValue(**val))
    samples, _ = decoder.notification(n)
    store.ingest("d", "gnmi", samples, ts)


def test_last_clear_in_a_later_notification_is_not_a_reset() -> None:
    decoder, store = Decoder(load_set("interfaces").table), Store()
    prefix = make_path(COUNTERS)
    feed(decoder, store, prefix, {"in-octets": {"uint_val": 100}}, 1)
    feed(decoder, store, prefix, {"last-clear": {"uint_val": 777}}, 2)  # the baseline, not a clear
    feed(decoder, store, prefix, {"in-octets": {"uint_val": 150}}, 3)
    assert store.value(*RX_BYTES) == 150
    assert store.value(*RESETS) is None
    # A real clear afterwards: a new last-clear (and counters restarting) is one discontinuity.
    feed(decoder, store, prefix, {"last-clear": {"uint_val": 900}, "in-octets": {"uint_val": 10}}, 4)
    feed(decoder, store, prefix, {"in-octets": {"uint_val": 30}}, 5)
    assert store.value(*RESETS) == 1
    assert store.value(*RX_BYTES) == 30  # the series restarted at the device's value (metrics.md)


def test_a_changed_last_clear_resets_even_when_the_counter_grew() -> None:
    decoder, store = Decoder(load_set("interfaces").table), Store()
    prefix = make_path(COUNTERS)
    feed(decoder, store, prefix, {"in-octets": {"uint_val": 100}, "last-clear": {"uint_val": 1}}, 1)
    feed(decoder, store, prefix, {"in-octets": {"uint_val": 5000}, "last-clear": {"uint_val": 2}}, 2)
    assert store.value(*RESETS) == 1
    assert store.value(*RX_BYTES) == 5000  # the series restarted at the device's value


def pause(interface: str, priority: str, direction: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (
        "dci_pfc_pause_duration_seconds_total",
        (("device", "d"), ("interface", interface), ("priority", priority), ("direction", direction)),
    )


def test_sonic_pause_duration_us_is_an_exact_integer_track_exported_in_seconds() -> None:
    decoder, store = Decoder(combined_table([load_set("sonic_counters")])), Store()
    prefix = gnmi_pb2.Path(target="COUNTERS_DB")
    for ts, us in ((1, 2**60 + 1), (2, 2**60 + 3)):  # past 2^53: a float total would lose the 2 µs step
        body = f'{{"SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION_US": "{us}"}}'.encode()
        feed(decoder, store, prefix, {"COUNTERS/Ethernet8": {"json_val": body}}, ts)
    n = gnmi_pb2.Notification(timestamp=3, prefix=prefix)
    n.update.add(path=make_path("COUNTERS/Ethernet8"), val=gnmi_pb2.TypedValue(json_val=b"{}"))
    samples, _ = decoder.notification(n)
    assert samples == []
    track = store.track(
        "gnmi", "d", "dci_pfc_pause_duration_seconds_total", pause("Ethernet8", "3", "rx")[1][1:]
    )
    assert track is not None and track.total == 2**60 + 3  # the store keeps the device's integers exactly
    assert store.value(*pause("Ethernet8", "3", "rx")) == (2**60 + 3) * 1e-6


def test_cumulus_pause_duration_is_scaled_and_keeps_reset_tracking() -> None:
    decoder, store = Decoder(load_set("cumulus_qos").table), Store()
    prefix = make_path("/qos/interfaces/interface[interface-id=swp1]/switch-priority[priority=3]/state")
    feed(decoder, store, prefix, {"in-pause-duration": {"uint_val": 1_500_000}}, 1)
    feed(decoder, store, prefix, {"in-pause-duration": {"uint_val": 2_000_000}}, 2)
    assert store.value(*pause("swp1", "3", "rx")) == 2.0
    feed(decoder, store, prefix, {"in-pause-duration": {"uint_val": 250_000}}, 3)  # went down: a reset
    assert store.value(*pause("swp1", "3", "rx")) == 0.25
    metric = (("device", "d"), ("metric", "dci_pfc_pause_duration_seconds_total"))
    assert store.value("dci_counter_discontinuities_total", metric) == 1


def test_ingress_and_egress_lengths_of_one_queue_are_two_exported_series() -> None:
    decoder, store = Decoder(combined_table([load_set("qos"), load_set("qos_input")])), Store()
    base = "/qos/interfaces/interface[interface-id=Et1]"
    for side, length in (("output", 10), ("input", 20)):
        feed(
            decoder,
            store,
            make_path(f"{base}/{side}/queues/queue[name=3]/state"),
            {"max-queue-len": {"uint_val": length}},
            1,
        )
    text = render(store)
    assert 'dci_queue_watermark_bytes{device="d",interface="Et1",queue="3"} 10' in text
    assert 'dci_queue_watermark_bytes{device="d",interface="Et1",queue="3",direction="rx"} 20' in text
    assert text.count("# TYPE dci_queue_watermark_bytes gauge") == 1
