"""A counter reading through a series handle (``CounterReading``) is a ``Sample`` the store takes by a
shorter way (issue 33): whatever happens to its series in between (resets, new epochs, totals past 2^64,
a second source, deletes, expiry, slots reused, another store), the store must end exactly where the same
readings as ``Sample``s leave it: exposition, archive rows, counter state and the worker's change log."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from collector.exporters.prometheus import render
from collector.model import CounterReading, SeriesHandle, labels, sample_of
from collector.store import Store, TargetLabels

SERIES = [
    (metric, labels(interface=f"Et{i}"))
    for metric in ("dci_interface_receive_bytes_total", "dci_interface_transmit_packets_total")
    for i in (1, 2)
]
MAX64 = 2**64 - 1

_read = st.tuples(
    st.just("read"),
    st.integers(0, len(SERIES) - 1),
    # added to the source's last raw, or "top": just under 2^64, so that a total crosses 2^64 by increases
    st.one_of(st.integers(0, 1000), st.integers(-1000, -1), st.integers(0, MAX64), st.just("top")),
    st.sampled_from([None, None, None, 1, 2]),  # the epoch: mostly unchanged
    st.sampled_from([0.0, 0.5, 1.0, 30.0]),  # seconds since the last operation (30: past the TTL)
    st.sampled_from(["gnmi", "gnmi", "gnmi", "snmp"]),  # snmp: a second source of the same series
    st.sampled_from([None, 1_700_000_000_000_000_000]),  # the device's time
)
_other = st.one_of(
    st.tuples(st.just("forget"), st.integers(0, len(SERIES) - 1)),
    st.tuples(st.just("expire")),
    st.tuples(st.just("relay")),  # a worker's relay frame: released slots become free for reuse
    st.tuples(st.just("retarget")),  # new target labels: every series of the device goes
)
PROGRAM = st.lists(st.one_of(_read, _read, _read, _other), min_size=1, max_size=60)


class _Clock:
    """Time moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time_ns(self) -> int:
        return 1_764_000_000 * 10**9 + int(self.now * 1e9)


class _Rows:
    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def add(self, row: tuple[Any, ...]) -> None:
        self.rows.append(row)


def _changes(store: Store) -> Any:
    """The store's change log, its health ``Series`` (compared by identity) by their labels and value."""

    def ref(r: Any) -> Any:
        return r if isinstance(r, int) else (r.labelset.full, r.value)

    new, dirty, gone = store.take_changes()
    return [(ref(r), m, full) for r, m, full in new], {ref(r) for r in dirty}, [ref(r) for r in gone]


def _store(worker: bool) -> tuple[Store, _Clock, _Rows]:
    clock, rows = _Clock(), _Rows()
    store = Store(clock, archive=rows, rendered=not worker)  # type: ignore[arg-type]
    store.set_target("d", TargetLabels(ttl=20.0))
    if worker:
        store.log_changes()
    return store, clock, rows


def _g(step: int | str, dt: float = 1.0, source: str = "gnmi") -> tuple[Any, ...]:
    return ("read", 0, step, None, dt, source, None)


@settings(max_examples=300, deadline=None)
@given(PROGRAM, st.booleans())
# cases random programs rarely reach: a second source's columns (the first source went stale, the other took
# the series over), the other source exporting while this one reads, a total crossing 2^64 by an increase
@example([_g(5, source="snmp"), _g(100, dt=30.0), _g(10), _g(10)], False)
@example([_g(0), _g(5), _g(7, dt=30.0, source="snmp"), _g(5), _g(5, dt=30.0)], True)
# (a total held through a drop, an increase at dt 0 that sets no rate, then one to the top)
@example([_g(0, dt=0.0), _g(100), _g(10**12 - 100, dt=0.0), _g(10**6 - 10**12), _g("top", dt=0.0)], False)
def test_readings_through_handles_leave_the_store_as_samples_do(program: list[Any], worker: bool) -> None:
    by_sample, sample_clock, sample_rows = _store(worker)
    by_handle, handle_clock, handle_rows = _store(worker)
    handles = [SeriesHandle(metric, lbls) for metric, lbls in SERIES]  # as a decoder keeps them
    last = {(source, i): 0 for source in ("gnmi", "snmp") for i in range(len(SERIES))}  # their own readings
    relayed: list[Any] = []
    targets = 0
    for op in program:
        if op[0] == "read":
            _, i, step, epoch, dt, source, time_ns = op
            sample_clock.now += dt
            handle_clock.now += dt
            raw = last[source, i] = MAX64 - 3 if step == "top" else (last[source, i] + step) % (MAX64 + 1)
            reading: CounterReading = (handles[i], raw, epoch, time_ns)
            by_sample.ingest("d", source, [sample_of(reading)], 7)
            # a second source reads through Samples, as SNMP does
            by_handle.ingest("d", source, [reading if source == "gnmi" else sample_of(reading)], 7)
        elif op[0] == "forget":
            for store in (by_sample, by_handle):
                store.forget("d", *SERIES[op[1]])
        elif op[0] == "expire":
            assert by_sample.expire() == by_handle.expire()
        elif op[0] == "relay":
            if worker:
                relayed.append((_changes(by_sample), _changes(by_handle)))
        else:
            targets += 1
            static = (("site", f"s{targets}"),)
            for store in (by_sample, by_handle):
                store.set_target("d", TargetLabels(static=static, ttl=20.0))
    assert handle_rows.rows == sample_rows.rows
    assert render(by_handle) == render(by_sample)
    for metric, lbls in SERIES:
        for source in ("gnmi", "snmp"):
            assert by_handle.track(source, "d", metric, lbls) == by_sample.track(source, "d", metric, lbls)
    if worker:
        relayed.append((_changes(by_sample), _changes(by_handle)))
        for sample_changes, handle_changes in relayed:
            assert handle_changes == sample_changes


def test_a_handle_remembered_by_one_store_is_not_trusted_by_another() -> None:
    """A handle names its series, not a slot: another store (or this one after the slot was released and
    reused) finds the series again."""
    rx, tx = SERIES[0], SERIES[2]
    handle = SeriesHandle(*rx)
    first, second = Store(_Clock()), Store(_Clock())  # type: ignore[arg-type]
    first.ingest("d", "gnmi", [(handle, 10, None, None)], 0)
    first.ingest("d", "gnmi", [(handle, 15, None, None)], 0)  # through the remembered slot
    second.ingest("d", "gnmi", [sample_of((SeriesHandle(*tx), 1000, None, None))], 0)  # slot 0 is tx here
    second.ingest("d", "gnmi", [(handle, 20, None, None)], 0)
    second.ingest("d", "gnmi", [(handle, 25, None, None)], 0)
    assert first.value(rx[0], (("device", "d"), *rx[1])) == 15
    assert second.value(rx[0], (("device", "d"), *rx[1])) == 25
    assert second.value(tx[0], (("device", "d"), *tx[1])) == 1000


def test_a_released_slot_reused_by_another_series_is_not_written_through_an_old_handle() -> None:
    rx, tx = SERIES[0], SERIES[2]
    handle = SeriesHandle(*rx)
    store = Store(_Clock())  # type: ignore[arg-type]
    store.ingest("d", "gnmi", [(handle, 10, None, None)], 0)
    store.forget("d", *rx)
    store.ingest("d", "gnmi", [sample_of((SeriesHandle(*tx), 1000, None, None))], 0)  # takes rx's slot
    store.ingest("d", "gnmi", [(handle, 2000, None, None)], 0)  # rx again (as an increase of tx's 1000)
    assert store.value(tx[0], (("device", "d"), *tx[1])) == 1000
    assert store.value(rx[0], (("device", "d"), *rx[1])) == 2000


def test_a_handle_read_under_another_device_names_that_device_series() -> None:
    rx = SERIES[0]
    handle = SeriesHandle(*rx)
    store = Store(_Clock())  # type: ignore[arg-type]
    for device, raw in (("d", 10), ("d", 15), ("e", 100), ("e", 120), ("d", 20)):
        store.ingest(device, "gnmi", [(handle, raw, None, None)], 0)
    assert store.value(rx[0], (("device", "d"), *rx[1])) == 20
    assert store.value(rx[0], (("device", "e"), *rx[1])) == 120
