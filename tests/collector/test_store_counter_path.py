"""The store's inline path for a counter that rose in the same epoch (issue 33) must fold readings exactly as
``counters.advance`` does: totals, peaks and discontinuities, over any sequence of readings, with and
without an interface speed to bound them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from collector import counters
from collector.model import counter, gauge, labels
from collector.store import BOUND_SLACK_SECONDS, SPEED_METRIC, Store

METRIC = "dci_interface_receive_bytes_total"
LBLS = labels(interface="Ethernet1/1")


class Steps:
    """Monotonic time moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time_ns(self) -> int:
        return int(self.now * 1e9)


readings = st.lists(
    st.tuples(
        st.integers(0, 2**33),  # raw: rises, falls, past 2^32
        st.sampled_from([None, 1, 2]),  # epoch: mostly unchanged
        st.sampled_from([0.0, 0.5, 1.0, 10.0]),  # seconds since the last reading
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(readings, st.sampled_from([32, 64]), st.sampled_from([None, 1e3, 1e9]))
def test_store_folds_counters_as_counters_advance_does(
    seq: list[tuple[int, object, float]], width: int, speed: float | None
) -> None:
    clock = Steps()
    store = Store(clock=clock)  # type: ignore[arg-type]
    if speed is not None:
        store.ingest("d", "gnmi", [gauge(SPEED_METRIC, LBLS, speed)], 0)
    track: counters.CounterTrack | None = None
    resets = 0
    for raw, epoch, dt in seq:
        clock.now += dt
        store.ingest("d", "gnmi", [counter(METRIC, LBLS, raw, width, epoch)], 0)
        if track is None:
            track = counters.start(raw, epoch, clock.now)
            continue
        elapsed = clock.now - track.seen
        track.seen = clock.now
        bound = (
            None if speed is None else speed * (elapsed + BOUND_SLACK_SECONDS)
        )  # ``Store._bound`` for bytes
        resets += counters.advance(track, raw, width, epoch, bound, elapsed)
    assert track is not None
    assert store.value(METRIC, (("device", "d"), *LBLS)) == track.total
    kept = store.track("gnmi", "d", METRIC, LBLS)
    assert kept is not None
    assert (kept.total, kept.last_raw, kept.peak, kept.epoch) == (
        track.total,
        track.last_raw,
        track.peak,
        track.epoch,
    )
    discontinuities = store.value("dci_counter_discontinuities_total", (("device", "d"), ("metric", METRIC)))
    assert (discontinuities or 0) == resets
