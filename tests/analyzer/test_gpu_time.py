"""Interval arithmetic behind compute, communication and exposed-communication time, against brute force."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer import gpu_time

Interval = tuple[int, int]
intervals = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 15)).map(lambda t: (t[0], t[0] + t[1])), max_size=12
)


def _frame(spans: list[Interval], group: int = 0) -> pl.LazyFrame:
    return pl.LazyFrame(
        {"g": [group] * len(spans), "start": [s for s, _ in spans], "end": [e for _, e in spans]},
        schema={"g": pl.Int64, "start": pl.Int64, "end": pl.Int64},
    )


def _covered(spans: list[Interval]) -> set[int]:
    """Brute force: the unit cells [t, t+1) covered by any interval."""
    return {t for start, end in spans for t in range(start, end)}


def _single(frame: pl.LazyFrame, column: str) -> int:
    values = frame.collect()[column].to_list()
    return values[0] if values else 0


@settings(max_examples=200, deadline=None)
@given(intervals)
def test_union_length_matches_brute_force(spans: list[Interval]) -> None:
    assert _single(gpu_time.union_length(_frame(spans), ["g"], "n"), "n") == len(_covered(spans))


@settings(max_examples=200, deadline=None)
@given(intervals, intervals)
def test_intersection_length_matches_brute_force(first: list[Interval], second: list[Interval]) -> None:
    expected = len(_covered(first) & _covered(second))
    got = _single(gpu_time.intersection_length(_frame(first), _frame(second), ["g"], "n"), "n")
    assert got == expected


def test_merge_intervals_keeps_groups_apart() -> None:
    frame = pl.concat([_frame([(0, 5), (3, 8), (8, 9)], group=0), _frame([(4, 6)], group=1)])
    merged = gpu_time.merge_intervals(frame, ["g"]).collect()
    assert merged.rows() == [(0, 0, 9), (1, 4, 6)]


def test_breakdown_classifies_both_nccl_kernel_generations() -> None:
    events = pl.LazyFrame(
        {
            "rank": [0] * 6,
            "name": [
                "sm90_gemm",
                "ncclKernel_AllReduce_RING_LL_Sum_float",
                "ncclDevKernel_SendRecv(x)",
                "Memcpy DtoH (Device -> Pinned)",
                "void at::native::elementwise",
                "cudaStreamSync",
            ],
            "start_ns": [0, 5_000, 30_000, 1_000, 28_000, 50_000],
            "end_ns": [10_000, 20_000, 40_000, 3_000, 35_000, 60_000],
        }
    )
    row = gpu_time.breakdown(events, ["rank"]).collect().row(0, named=True)
    assert row["kernels"] == 6
    assert row["communication_kernels"] == 2
    assert row["compute_seconds"] == pytest.approx(17e-6)  # [0,10] and [28,35] us
    assert row["communication_seconds"] == pytest.approx(25e-6)  # [5,20] and [30,40]
    assert row["overlapped_seconds"] == pytest.approx(10e-6)  # [5,10] and [30,35]
    assert row["exposed_communication_seconds"] == pytest.approx(15e-6)
    assert row["memory_seconds"] == pytest.approx(2e-6)


def test_breakdown_needs_a_group() -> None:
    with pytest.raises(ValueError, match="at least one column"):
        gpu_time.merge_intervals(_frame([(0, 1)]), [])
