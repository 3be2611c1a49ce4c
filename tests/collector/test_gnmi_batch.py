"""A gNMI batch is worked out once, not once per response: its readings go to the store in one call
(``Store.ingest_runs``) and its timing figures from one pass. These check that nothing a response used to
see is lost on the way: order against deletes, archive rows, the lag histogram, the clock offset."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

from collector.clock import FakeClock
from collector.config import GnmiConfig
from collector.exporters.prometheus import render
from collector.model import Sample, counter, gauge, labels
from collector.sources.gnmi.client import make_path
from collector.sources.gnmi.source import GnmiSource, Queued
from collector.store import Histogram, Store

DS = (("device", "d"), ("source", "gnmi"))


def _octets(clock: FakeClock, interface: str, value: int, ahead_s: float = 0.0) -> bytes:
    n = gnmi_pb2.Notification(
        timestamp=clock.time_ns() + int(ahead_s * 1e9),
        prefix=make_path(f"/interfaces/interface[name={interface}]"),
    )
    n.update.add(path=make_path("state/counters/in-octets"), val=gnmi_pb2.TypedValue(uint_val=value))
    return gnmi_pb2.SubscribeResponse(update=n).SerializeToString()


def _delete(clock: FakeClock, interface: str) -> bytes:
    n = gnmi_pb2.Notification(timestamp=clock.time_ns())
    n.delete.append(make_path(f"/interfaces/interface[name={interface}]"))
    return gnmi_pb2.SubscribeResponse(update=n).SerializeToString()


def _batch(clock: FakeClock, *responses: bytes) -> list[Queued]:
    return [(r, clock.monotonic(), clock.time_ns()) for r in responses]


def _source(clock: FakeClock, skew_warning: float = 1e9) -> GnmiSource:
    cfg = GnmiConfig(
        address="127.0.0.1:1", insecure=True, subscriptions=("interfaces",), sample_interval="1s"
    )  # type: ignore[arg-type]
    return GnmiSource("d", cfg, clock=clock, skew_warning=skew_warning)


def _octets_of(store: Store, interface: str) -> Any:
    return store.value("dci_interface_receive_bytes_total", (("device", "d"), ("interface", interface)))


def test_a_delete_in_a_batch_removes_what_came_before_it_not_what_came_after() -> None:
    clock = FakeClock()
    store, source = Store(clock), _source(clock)
    source.ingest_batch(
        store,
        _batch(clock, _octets(clock, "Et1", 5), _octets(clock, "Et2", 7), _delete(clock, "Et1")),
    )
    assert _octets_of(store, "Et1") is None  # ingested before the delete, then deleted
    assert _octets_of(store, "Et2") == 7
    source.ingest_batch(store, _batch(clock, _delete(clock, "Et2"), _octets(clock, "Et2", 9)))
    assert _octets_of(store, "Et2") == 9  # the reading after the delete starts the series again


def test_the_lag_histogram_counts_every_notification_of_a_batch() -> None:
    clock = FakeClock()
    store, source = Store(clock), _source(clock)
    sync = gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString()
    source.ingest_batch(store, _batch(clock, sync))
    assert store.value("spanwatch_ingest_lag_seconds", DS) is None  # no notification, no observation
    late = [_octets(clock, "Et1", 1, ahead_s=-0.25), _octets(clock, "Et1", 2, ahead_s=-0.5), sync]
    source.ingest_batch(store, _batch(clock, *late))
    lag = store.value("spanwatch_ingest_lag_seconds", DS)
    assert isinstance(lag, Histogram)
    assert lag.count == 2 and abs(lag.sum - 0.75) < 1e-9
    assert store.value("spanwatch_gnmi_updates_total", (("device", "d"),)) == 2


def test_a_skewed_device_clock_is_exported_and_logged_once(caplog: Any) -> None:
    clock = FakeClock()
    store, source = Store(clock), _source(clock, skew_warning=1.0)
    with caplog.at_level(logging.WARNING, logger="collector.sources.gnmi.source"):
        for value in (1, 2, 3):
            source.ingest_batch(store, _batch(clock, _octets(clock, "Et1", value, ahead_s=5.0)))
    assert store.value("spanwatch_gnmi_clock_offset_seconds", (("device", "d"),)) == 5.0
    assert sum("device clock is +5.000s off" in r.getMessage() for r in caplog.records) == 1
    # the offset is net of it: a stream on time by its device's clock shows no backlog
    assert store.value("spanwatch_ingest_backlog_seconds", DS) == 0.0


async def test_the_shedder_sees_how_late_values_landed_not_only_how_far_behind_a_batch_was() -> None:
    clock = FakeClock()
    store, source = Store(clock), _source(clock)
    source.ingest_batch(store, _batch(clock, _octets(clock, "Et1", 1)))  # on time: the clock offset is 0
    source.shed_load()
    late = _batch(clock, _octets(clock, "Et1", 2, ahead_s=-0.2))  # read 0.2 s after its timestamp
    await clock.advance(0.3)  # then queued 0.3 s
    source.ingest_batch(store, late)
    # the backlog is the longer of the two delays; the value landed after both
    assert store.value("spanwatch_ingest_backlog_seconds", DS) == pytest.approx(0.3)
    assert source.shed_load().lag == pytest.approx(0.5)
    assert source.shed_load().lag == 0.0  # a new period


async def test_a_device_clock_behind_the_collectors_does_not_make_its_values_look_late() -> None:
    clock = FakeClock()
    store, source = Store(clock), _source(clock)
    for value in (1, 2):  # stamped 5 s back by the device's clock, and read at once
        source.ingest_batch(store, _batch(clock, _octets(clock, "Et1", value, ahead_s=-5.0)))
    assert source.shed_load().lag == pytest.approx(0.0)  # not 5 s: the offset is the device's clock
    queued = _batch(clock, _octets(clock, "Et1", 3, ahead_s=-5.0))
    await clock.advance(0.3)
    source.ingest_batch(store, queued)
    assert source.shed_load().lag == pytest.approx(0.3)


class _Rows:
    """An archive that keeps its rows."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def add(self, row: tuple[Any, ...]) -> None:
        self.rows.append(row)


_INTERFACES = st.sampled_from([labels(interface=f"Et{i}") for i in range(3)])
_READING = st.one_of(
    st.builds(
        counter,
        st.sampled_from(["dci_interface_receive_bytes_total", "dci_interface_transmit_bytes_total"]),
        _INTERFACES,
        st.integers(0, 2**64 - 1),
        st.sampled_from([32, 64]),
        st.sampled_from([None, 1, 2]),
    ),
    st.builds(gauge, st.just("dci_queue_watermark_bytes"), _INTERFACES, st.floats(allow_nan=True)),
)
_RUNS = st.lists(st.tuples(st.lists(_READING, max_size=6), st.integers(0, 2**62)), max_size=6)


@settings(max_examples=200, deadline=None)
@given(_RUNS)
def test_ingest_runs_is_ingest_once_per_run(runs: list[tuple[list[Sample], int]]) -> None:
    """One call for the runs leaves the store and the archive as one call per run does."""
    stores = []
    for batched in (True, False):
        archive = _Rows()
        store = Store(FakeClock(), archive=archive)
        if batched:
            count = store.ingest_runs("d", "gnmi", runs)
        else:
            count = sum(store.ingest("d", "gnmi", samples, received) for samples, received in runs)
        stores.append((count, archive.rows, render(store)))
    assert stores[0] == stores[1]


@given(st.lists(st.floats(allow_nan=False) | st.just(float("nan")), max_size=30))
# on a bound, past the last, below the first, none
@example([0.005, 0.01, 1.0, 10.0, 10.000001, -1.0, float("nan")])
def test_a_histogram_buckets_a_value_under_the_first_bound_at_or_above_it(values: list[float]) -> None:
    bounds = (0.005, 0.01, 0.1, 1.0, 10.0)
    histogram = Histogram(bounds)
    for value in values:
        histogram.observe(value)
    expected = [sum(1 for v in values if v <= bound) for bound in bounds]
    assert histogram.cumulative() == expected
    assert histogram.count == len(values)
