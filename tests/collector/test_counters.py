"""Counter semantics: monotonic export, Counter32 wraps, resets, exactness past 2^53."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from collector import counters
from collector.counters import WRAP32

# A device's life: increments between polls (less than one wrap each), with reboots now and then.
steps = st.lists(
    st.tuples(st.integers(min_value=0, max_value=WRAP32 - 1), st.booleans()), min_size=1, max_size=60
)


@given(start=st.integers(min_value=0, max_value=WRAP32 - 1), life=steps)
def test_counter32_total_equals_true_count_between_resets(start: int, life: list[tuple[int, bool]]) -> None:
    track = counters.start(start, epoch=0)
    true_total, raw, epoch = start, start, 0
    for increment, reboot in life:
        if reboot:
            epoch += 1
            raw = true_total = increment % WRAP32
            assert counters.advance(track, raw, 32, epoch, bound=WRAP32 - 1) is True
        else:
            raw = (raw + increment) % WRAP32
            true_total += increment
            # a link that can carry a whole wrap per interval: every decrease is a wrap
            assert counters.advance(track, raw, 32, epoch, bound=WRAP32 - 1) is False
        assert track.total == true_total


@given(values=st.lists(st.integers(min_value=0, max_value=2**64 - 1), min_size=2, max_size=50))
def test_counter64_never_goes_backwards_except_on_reset(values: list[int]) -> None:
    track = counters.start(values[0], epoch=None)
    for previous, raw in itertools.pairwise(values):
        before = track.total
        reset = counters.advance(track, raw, 64, None)
        assert reset == (raw < previous)
        assert track.total == (raw if reset else before + raw - previous)


def test_totals_stay_exact_past_2_to_the_53() -> None:
    big = 2**53 + 1
    track = counters.start(big, epoch=None)
    counters.advance(track, big + 1, 64, None)
    assert track.total == 2**53 + 2  # a float64 would have lost the odd unit


def test_epoch_change_is_a_reset_even_when_the_value_grew() -> None:
    track = counters.start(100, epoch=("boot", 1))
    assert counters.advance(track, 5_000, 64, ("boot", 2)) is True
    assert track.total == 5_000
