"""Never silently behind (issue 18): folding a backlog, and the lag, backlog and folding telemetry."""

from __future__ import annotations

import asyncio

from pygnmi.spec.v080 import gnmi_pb2

from collector.clock import FakeClock
from collector.coalesce import coalesce
from collector.config import GnmiConfig
from collector.model import counter, gauge, labels
from collector.sources.gnmi.client import make_path
from collector.sources.gnmi.source import GnmiSource, Queued
from collector.store import Histogram, Store

ET1 = labels(interface="Et1")
DS = (("device", "d"), ("source", "gnmi"))


def test_counters_keep_the_newest_gauges_the_min_max_and_newest() -> None:
    readings = [
        counter("dci_interface_receive_bytes_total", ET1, 100),
        gauge("dci_queue_watermark_bytes", ET1, 5.0),
        counter("dci_interface_receive_bytes_total", ET1, 200),
        gauge("dci_queue_watermark_bytes", ET1, 900.0),  # the burst a watermark must not lose
        gauge("dci_queue_watermark_bytes", ET1, 1.0),  # the dip
        gauge("dci_queue_watermark_bytes", ET1, 7.0),
        counter("dci_interface_receive_bytes_total", ET1, 300),
    ]
    kept, folded = coalesce(readings)
    assert [(s.metric, s.value) for s in kept] == [
        ("dci_queue_watermark_bytes", 900.0),
        ("dci_queue_watermark_bytes", 1.0),
        ("dci_queue_watermark_bytes", 7.0),
        ("dci_interface_receive_bytes_total", 300.0),
    ]
    assert folded == 3


def test_nothing_to_fold() -> None:
    readings = [counter("dci_interface_receive_bytes_total", ET1, 1), gauge("dci_interface_oper_up", ET1, 1)]
    assert coalesce(readings) == (readings, 0)


def _response(ts_s: float, octets: int) -> bytes:
    n = gnmi_pb2.Notification(timestamp=int(ts_s * 1e9), prefix=make_path("/interfaces/interface[name=Et1]"))
    n.update.add(path=make_path("state/counters/in-octets"), val=gnmi_pb2.TypedValue(uint_val=octets))
    return gnmi_pb2.SubscribeResponse(update=n).SerializeToString()


def _source(clock: FakeClock) -> GnmiSource:
    cfg = GnmiConfig(
        address="127.0.0.1:1", insecure=True, subscriptions=("interfaces",), sample_interval="1s"
    )  # type: ignore[arg-type]
    return GnmiSource("d", cfg, clock=clock, skew_warning=1e9)


def test_a_backlog_of_one_interval_or_more_is_folded_and_counted() -> None:
    clock = FakeClock()
    store, source = Store(clock), _source(clock)
    t0 = clock.time_ns() / 1e9
    # Three rounds queued, the oldest 3 s before now: folded to the newest reading.
    items: list[Queued] = [
        (_response(t0 - 3 + r, 1000 * (r + 1)), clock.monotonic() - 3 + r, clock.time_ns()) for r in range(3)
    ]
    source.ingest_batch(store, items)
    assert store.value("dci_interface_receive_bytes_total", (("device", "d"), ("interface", "Et1"))) == 3000
    assert store.value("spanwatch_coalesced_samples_total", DS) == 2
    assert store.value("spanwatch_ingest_backlog_seconds", DS) == 3.0
    lag = store.value("spanwatch_ingest_lag_seconds", DS)
    assert isinstance(lag, Histogram)
    assert lag.count == 3 and abs(lag.sum - (3 + 2 + 1)) < 1e-6


def test_a_stream_on_time_is_not_folded() -> None:
    clock = FakeClock()
    store, source = Store(clock), _source(clock)
    t0 = clock.time_ns() / 1e9
    source.ingest_batch(store, [(_response(t0 - 0.1, 10), clock.monotonic(), clock.time_ns())])
    assert store.value("spanwatch_coalesced_samples_total", DS) is None
    assert store.value("dci_interface_receive_bytes_total", (("device", "d"), ("interface", "Et1"))) == 10


def test_a_backlog_held_upstream_is_seen_and_older_counter_rounds_are_skipped_undecoded() -> None:
    """Responses read just now but stamped seconds ago waited in grpc or the device: that is a backlog."""
    clock = FakeClock()
    store, source = Store(clock), _source(clock)
    t0 = clock.time_ns() / 1e9
    source.ingest_batch(store, [(_response(t0 - 0.1, 10), clock.monotonic(), clock.time_ns())])  # on time
    assert store.value("spanwatch_coalesced_samples_total", DS) is None
    asyncio.run(clock.advance(5))
    t1 = clock.time_ns() / 1e9
    late = [(_response(t1 - 3 + 0.1 * r, 1000 + r), clock.monotonic(), clock.time_ns()) for r in range(3)]
    source.ingest_batch(store, late)
    assert store.value("dci_interface_receive_bytes_total", (("device", "d"), ("interface", "Et1"))) == 1002
    assert store.value("spanwatch_coalesced_samples_total", DS) == 2  # two rounds never decoded
    assert store.value("spanwatch_gnmi_updates_total", (("device", "d"),)) == 4  # yet counted as received
    backlog = store.value("spanwatch_ingest_backlog_seconds", DS)
    assert isinstance(backlog, float) and 2.8 < backlog < 3.0  # net of the 0.1 s the device stamps ahead
    lag = store.value("spanwatch_ingest_lag_seconds", DS)
    assert isinstance(lag, Histogram) and lag.count == 4  # the skipped ones show how late they were
    assert source.behind
