"""The compact store (issue 33): the series of one label set share their labels, and nothing outlives them."""

from __future__ import annotations

import gc
import tracemalloc

from collector.clock import FakeClock
from collector.exporters.prometheus import render
from collector.model import counter, gauge, labels
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
    rx, tx, up = (
        store.families[m][(("device", "sw1"), ("site", "a"), ("interface", "Eth1"), ("link", "paris-lyon"))]
        for m in (RX, TX, UP)
    )
    assert rx.labelset is tx.labelset is up.labelset
    assert rx.labels_text is up.labels_text == '{device="sw1",site="a",interface="Eth1",link="paris-lyon"}'
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
    assert ("sw1", lbl) in store._keys  # TX and UP still use it
    store.forget("sw1", TX, lbl)
    store.forget("sw1", UP, lbl)
    assert ("sw1", lbl) not in store._keys
    store.ingest("sw1", "gnmi", _interface("Eth3", 1), 0)  # the three freed places are taken again
    assert store.holds("sw1", UP, labels(interface="Eth3"))
    clock._now += 31
    assert store.expire() == 4
    assert store._keys == {} and store._count == {} and len(store._tracks["gnmi"]) == 0


def test_a_series_costs_under_500_traced_bytes() -> None:
    """10 counters and a gauge on each of 1,000 interfaces, two rounds: what the store keeps per series
    (Python objects, as tracemalloc counts them; 640-690 bytes before the label sets were shared)."""
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
    series = len(store.families[UP]) + sum(len(store.families[m]) for m in names)
    assert series == 9000
    assert held / series < 500, held / series
