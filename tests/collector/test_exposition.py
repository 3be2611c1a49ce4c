"""Rendering the store as Prometheus text: escaping, exact counters, histograms, specials, expiry, golden."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collector.clock import FakeClock
from collector.exporters.prometheus import escape_help, format_value, render
from collector.model import counter, gauge, labels
from collector.store import Store, TargetLabels

GOLDEN = Path(__file__).parents[1] / "golden" / "exposition.prom"
RX = "dci_interface_receive_bytes_total"


def _store() -> tuple[Store, FakeClock]:
    clock = FakeClock()
    store = Store(clock)
    store.set_target(
        "dci1.site-a",
        TargetLabels(
            static=(("site", "a"), ("vendor", "arista")),
            ttl=30.0,
            links={("interface", "Ethernet1/1"): "paris-lyon-1"},
        ),
    )
    return store, clock


def _small_store() -> Store:
    """A small but complete exposition: counters, gauges, specials, escaping, a histogram, health."""
    store, _ = _store()
    store.ingest("dci1.site-a", "gnmi", [
        counter(RX, labels(interface="Ethernet1/1"), 2**53 + 1),
        counter(RX, labels(interface='we"ird\\name\nx'), 7),
        counter("dci_queue_dropped_packets_total", labels(interface="Ethernet1/1", queue=3), 12),
        gauge("dci_optics_rx_power_dbm", labels(interface="Ethernet1/1", lane=1), -2.25),
        gauge("dci_optics_pre_fec_ber", labels(interface="Ethernet1/1"), 1.5e-9),
        gauge("dci_optics_osnr_db", labels(interface="Ethernet1/1"), math.nan),
        gauge("dci_optics_q_factor_db", labels(interface="Ethernet1/1"), math.inf),
        gauge("dci_optics_esnr_db", labels(interface="Ethernet1/1"), -math.inf),
    ], 0)  # fmt: skip
    health = (("device", "dci1.site-a"), ("source", "gnmi"))
    store.set("spanwatch_target_up", health, 1)
    store.inc("spanwatch_polls_total", (*health, ("status", "success")), 3)
    for seconds in (0.004, 0.07, 0.07, 3.0, 45.0):
        store.observe("spanwatch_poll_duration_seconds", health, seconds)
    store.inc("spanwatch_archive_rows_total", ())
    return store


def test_golden_exposition(update_golden: bool) -> None:
    text = render(_small_store())
    if update_golden:
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "exposition changed: review it, then rerun with --update-golden"


def test_output_parses_as_valid_exposition() -> None:
    families = {f.name: f for f in text_string_to_metric_families(render(_small_store()))}
    rx = families["dci_interface_receive_bytes"]
    assert rx.type == "counter"
    weird = next(s for s in rx.samples if s.labels["interface"] != "Ethernet1/1")
    assert weird.labels == {
        "device": "dci1.site-a",
        "site": "a",
        "vendor": "arista",
        "interface": 'we"ird\\name\nx',
    }
    assert math.isnan(families["dci_optics_osnr_db"].samples[0].value)
    assert families["dci_optics_q_factor_db"].samples[0].value == math.inf
    assert families["dci_optics_esnr_db"].samples[0].value == -math.inf
    hist = families["spanwatch_poll_duration_seconds"]
    assert hist.type == "histogram"
    buckets = {s.labels["le"]: s.value for s in hist.samples if s.name.endswith("_bucket")}
    assert buckets["0.005"] == 1 and buckets["0.1"] == 3 and buckets["5.0"] == 4 and buckets["+Inf"] == 5
    count = next(s.value for s in hist.samples if s.name.endswith("_count"))
    assert count == 5


def test_counters_stay_exact_past_2_53() -> None:
    store, _ = _store()
    big = 2**63 + 2**53 + 1  # an exact Python int where a float64 would round (2^64-1 is the device's max)
    store.ingest("dci1.site-a", "snmp", [counter(RX, labels(interface="Ethernet2/1"), big)], 0)
    line = next(x for x in render(store).splitlines() if x.startswith(RX + "{"))
    assert line.endswith(f" {big}")
    assert str(float(big)) not in line


def test_help_and_type_once_per_family_in_name_order() -> None:
    text = render(_small_store())
    types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert types == sorted(types)
    assert len(types) == len(set(types))
    assert f"# TYPE {RX} counter" in text
    assert "# TYPE dci_optics_rx_power_dbm gauge" in text


def test_link_label_is_appended_for_link_members() -> None:
    text = render(_small_store())
    assert (
        f'{RX}{{device="dci1.site-a",site="a",vendor="arista",interface="Ethernet1/1",link="paris-lyon-1"}}'
        in text
    )


async def test_expired_series_disappear_and_empty_families_render_nothing() -> None:
    store, clock = _store()
    store.ingest("dci1.site-a", "snmp", [counter(RX, labels(interface="Ethernet2/1"), 5)], 0)
    assert RX in render(store)
    await clock.advance(31.0)  # past the target's 30 s TTL
    assert store.expire() == 1
    assert render(store) == ""


async def test_expiry_keeps_series_that_keep_reporting() -> None:
    store, clock = _store()
    store.ingest("dci1.site-a", "snmp", [counter(RX, labels(interface="Ethernet2/1"), 5)], 0)
    store.ingest("dci1.site-a", "snmp", [counter(RX, labels(interface="Ethernet2/2"), 5)], 0)
    await clock.advance(20.0)
    store.ingest("dci1.site-a", "snmp", [counter(RX, labels(interface="Ethernet2/2"), 9)], 0)
    await clock.advance(20.0)
    store.expire()
    lines = [x for x in render(store).splitlines() if not x.startswith("#")]
    assert lines == [f'{RX}{{device="dci1.site-a",site="a",vendor="arista",interface="Ethernet2/2"}} 9']


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0"), (2**70, str(2**70)), (True, "1"), (1.0, "1.0"), (0.1, "0.1"), (1e21, "1e+21"),
     (-2.5e-12, "-2.5e-12"), (math.nan, "NaN"), (math.inf, "+Inf"), (-math.inf, "-Inf")],
)  # fmt: skip
def test_format_value(value: float, text: str) -> None:
    assert format_value(value) == text


def test_help_escaping() -> None:
    assert escape_help("a\\b\nc") == "a\\\\b\\nc"
