"""The compact store (issue 33): a device's series are slots in columns, the series of one label set share
one row, and nothing outlives them."""

from __future__ import annotations

import gc
import tracemalloc

from collector.clock import FakeClock
from collector.exporters.prometheus import render
from collector.model import counter, gauge, labels
from collector.relay import Outbox
from collector.store import Store, TargetLabels

RX, TX, UP = (
    "dci_interface_receive_bytes_total",
    "dci_interface_transmit_bytes_total",
    "dci_interface_oper_up",
)
LINKS = {("interface", "Eth1"): "paris-lyon"}


def _store() -> tuple[Store, FakeClock]:
    clock = FakeClock()
    store = Store(clock)
    store.set_target("sw1", TargetLabels(static=(("site", "a"),), ttl=30.0, links=LINKS))
    return store, clock


def _interface(name: str, value: int) -> list:
    lbl = labels(interface=name)
    return [counter(RX, lbl, value), counter(TX, lbl, 2 * value), gauge(UP, lbl, 1)]


def test_the_series_of_one_interface_share_their_labels_and_render_as_before() -> None:
    store, _ = _store()
    store.ingest("sw1", "snmp", _interface("Eth1", 5), 0)
    (row,) = store._rows["sw1"].values()
    assert row.full == (("device", "sw1"), ("site", "a"), ("interface", "Eth1"), ("link", "paris-lyon"))
    assert row.text == '{device="sw1",site="a",interface="Eth1",link="paris-lyon"}'
    assert row.shape.metrics == (RX, TX, UP) and len(row.slots) == 3
    assert [store.value(m, row.full) for m in (RX, TX, UP)] == [5, 10, 1]
    text = render(store)
    assert (
        'dci_interface_receive_bytes_total{device="sw1",site="a",interface="Eth1",link="paris-lyon"} 5\n'
        in text
    )
    assert (
        'dci_interface_transmit_bytes_total{device="sw1",site="a",interface="Eth1",link="paris-lyon"} 10\n'
        in text
    )
    assert 'dci_interface_oper_up{device="sw1",site="a",interface="Eth1",link="paris-lyon"} 1\n' in text


def test_a_label_set_goes_with_its_last_series_and_counts_under_the_cap_per_series() -> None:
    store, clock = _store()
    store.set_target("sw1", TargetLabels(ttl=30.0, max_series=4))
    store.ingest("sw1", "gnmi", _interface("Eth1", 5) + _interface("Eth2", 7), 0)  # 6 series, cap 4
    assert store.value("spanwatch_series_dropped_total", (("device", "sw1"),)) == 2
    lbl = labels(interface="Eth1")
    store.forget("sw1", RX, lbl)
    assert not store.holds("sw1", RX, lbl) and store.holds("sw1", TX, lbl)
    assert lbl in store._rows["sw1"]  # TX and UP still use it
    store.forget("sw1", TX, lbl)
    store.forget("sw1", UP, lbl)
    assert lbl not in store._rows["sw1"]
    store.ingest("sw1", "gnmi", _interface("Eth3", 1), 0)  # the three freed places are taken again
    assert store.holds("sw1", UP, labels(interface="Eth3"))
    clock._now += 31
    assert store.expire() == 4
    assert store._rows == {} and store._count == {} and store._per_metric == {}
    assert sorted(store._free) == list(range(len(store._kind)))  # the columns never grew past 6 slots


def test_a_series_costs_under_200_traced_bytes() -> None:
    """8 counters and a gauge on each of 1,000 interfaces, two rounds: what the store keeps per series
    (as tracemalloc counts it; 640-690 bytes before the label sets were shared, ~336 with an object per
    series, ~172 in columns)."""
    store, _ = _store()
    names = [
        f"dci_interface_{d}_{k}_total"
        for d in ("receive", "transmit")
        for k in ("bytes", "packets", "errors", "discards")
    ]
    lbls = [labels(interface=f"Ethernet{i}") for i in range(1000)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for round_ in range(2):
            samples = [gauge(UP, lbl, 1) for lbl in lbls]
            samples += [
                counter(m, lbl, 1000 * i + round_, width=32) for i, lbl in enumerate(lbls) for m in names
            ]
            store.ingest("sw1", "snmp", samples, 0)
            del samples
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    series = sum(len(store.items(m)) for m in (UP, *names))
    assert series == 9000
    assert held / series < 200, held / series


def test_two_sources_reading_one_counter_keep_their_own_counts() -> None:
    """SNMP and gNMI both read Eth1's bytes: the first keeps the series while fresh, the other's readings
    run on their own counter state (no false reset either way), and it takes over once the first stops."""
    store, clock = _store()
    lbl = labels(interface="Eth1")
    full = (("device", "sw1"), ("site", "a"), ("interface", "Eth1"), ("link", "paris-lyon"))
    for i in range(3):
        store.ingest("sw1", "snmp", [counter(RX, lbl, 1000 + 10 * i)], 0)
        store.ingest("sw1", "gnmi", [counter(RX, lbl, 5 + i)], 0)  # another base: its own track
        clock._now += 10
    assert store.value(RX, full) == 1020
    gnmi = store.track("gnmi", "sw1", RX, lbl)
    snmp = store.track("snmp", "sw1", RX, lbl)
    assert gnmi is not None and (gnmi.last_raw, gnmi.total) == (7, 7)
    assert snmp is not None and (snmp.last_raw, snmp.total) == (1020, 1020)
    assert store.value("dci_counter_discontinuities_total", (("device", "sw1"), ("metric", RX))) is None
    clock._now += 31  # SNMP went quiet past the TTL: gNMI's reading takes the series
    store.ingest("sw1", "gnmi", [counter(RX, lbl, 9)], 0)
    assert store.value(RX, full) == 9
    store.forget("sw1", RX, lbl)
    assert store.track("gnmi", "sw1", RX, lbl) is None and store._others == {}


def test_a_worker_reuses_a_removed_series_slot_only_after_the_frame_that_removes_it() -> None:
    store, _ = _store()
    box = Outbox(store)
    a, b = labels(interface="Eth1"), labels(interface="Eth2")
    store.ingest("sw1", "gnmi", [counter(RX, a, 1)], 0)
    first = box.frame()
    assert first is not None and [d[0] for d in first[0] if d[1] == RX] == [0]
    store.forget("sw1", RX, a)
    store.ingest("sw1", "gnmi", [counter(RX, b, 2)], 0)  # in the same tick: a fresh slot, a fresh id
    assert len(store._kind) == 2
    second = box.frame()
    assert second is not None
    defs, ids, values, removed = second
    assert removed == [0] and [(d[0], d[2][2], d[5]) for d in defs] == [(1, ("interface", "Eth2"), 2)]
    store.ingest("sw1", "gnmi", [counter(RX, b, 5)], 0)
    store.ingest("sw1", "gnmi", [counter(RX, a, 3)], 0)  # now Eth1's old slot is reused, under a new id
    third = box.frame()
    assert third is not None
    defs, ids, values, removed = third
    assert (ids, values, removed) == ([1], [5], []) and [(d[0], d[5]) for d in defs] == [(2, 3)]
    assert len(store._kind) == 2


def test_a_total_past_64_bits_stays_exact_out_of_the_columns() -> None:
    store, clock = _store()
    lbl = labels(interface="Eth1")
    full = (("device", "sw1"), ("site", "a"), ("interface", "Eth1"), ("link", "paris-lyon"))
    top = 2**64 - 1
    store.ingest("sw1", "snmp", [counter(RX, lbl, top - 5, width=32)], 0)
    clock._now += 10
    store.ingest("sw1", "snmp", [counter(RX, lbl, top - 10, width=32)], 0)  # wrapped: 2^32 - 5 more
    assert store.value(RX, full) == top - 5 + 2**32 - 5  # past 2^64: no array holds it
    clock._now += 10
    store.ingest("sw1", "snmp", [counter(RX, lbl, top - 8, width=32)], 0)
    assert store.value(RX, full) == top - 5 + 2**32 - 5 + 2
    line = RX + '{device="sw1",site="a",interface="Eth1",link="paris-lyon"} ' + str(top + 2**32 - 8)
    assert line + "\n" in render(store)
    track = store.track("snmp", "sw1", RX, lbl)
    assert track is not None and track.total == top + 2**32 - 8
    store.forget("sw1", RX, lbl)
    assert store._held == {} and store._others == {}


def test_a_counter_is_bounded_by_the_speed_its_interface_series_holds() -> None:
    """The rate bound reads the interface's speed series (no second copy of it): a queue counter of Eth1
    too; a speed of 0 (sub-interfaces on some agents) or none is unknown, not "no traffic possible"."""
    store, clock = _store()
    speed = "dci_interface_speed_bytes_per_second"
    store.ingest("sw1", "snmp", [gauge(speed, labels(interface="Eth1"), 1.25e9)], 0)
    store.ingest("sw1", "snmp", [gauge(speed, labels(interface="Eth2"), 0.0)], 0)
    on_queue = counter("dci_queue_transmit_bytes_total", labels(interface="Eth1", queue="3"), 1)
    assert store._bound("sw1", counter(RX, labels(interface="Eth1"), 1), 1.0) == 1.25e9 * 1.1
    assert store._bound("sw1", on_queue, 1.0) == 1.25e9 * 1.1
    assert store._bound("sw1", counter(RX, labels(interface="Eth2"), 1), 1.0) is None
    assert store._bound("sw1", counter(RX, labels(interface="Eth3"), 1), 1.0) is None
    clock._now += 31  # the speed series expires: so does what it told
    store.expire()
    assert store._bound("sw1", counter(RX, labels(interface="Eth1"), 1), 1.0) is None
