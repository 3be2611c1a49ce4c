"""``analyzer.frames``: the memory idioms give the same rows as the plain operations."""

from __future__ import annotations

import random

import polars as pl
from polars.testing import assert_frame_equal

from analyzer import frames


def _frame(rows: int, seed: int) -> pl.DataFrame:
    pick = random.Random(seed)
    keys = pick.sample(range(rows * 4), rows)  # unique (step, rank) pairs, in no order
    return pl.DataFrame(
        {
            "step": [k // 4 for k in keys],
            "rank": [k % 4 for k in keys],
            "seconds": [pick.random() for _ in keys],
            "source_file": [None if pick.random() < 0.2 else f"/logs/rank-{k % 4:05d}.jsonl" for k in keys],
        }
    )


def test_sorted_a_column_at_a_time_is_sorted() -> None:
    for seed in range(5):
        frame = _frame(200, seed)
        assert_frame_equal(frames.sorted_by(frame.clone(), ["step", "rank"]), frame.sort("step", "rank"))


def test_sorting_nothing_keeps_the_columns() -> None:
    empty = _frame(0, 0)
    assert_frame_equal(frames.sorted_by(empty, ["step", "rank"]), empty)


def test_shared_text_is_the_same_text() -> None:
    parts = [_frame(50, seed) for seed in range(4)]  # four distinct paths and nulls: held once each
    joined = pl.concat(parts, rechunk=True)
    distinct = joined.with_columns(source_file=pl.format("/logs/{}.jsonl", pl.col("seconds")))  # copied
    odd = pl.DataFrame(
        {"none": pl.Series([None] * 6, dtype=pl.String), "empty": ["", "", "x", None, "", "x"]}
    )
    for frame in (joined, distinct, _frame(0, 0), odd):
        shared = frames.shared_text(frame)
        assert_frame_equal(shared, frame)
        assert shared.schema == frame.schema
