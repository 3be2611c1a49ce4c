"""The retired overlap-and-weights method the analyzer bench keeps (``bench/overlap_method.py``)."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer import schemas

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)


def _load() -> object:
    spec = importlib.util.spec_from_file_location("overlap_method", ROOT / "bench" / "overlap_method.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


overlap_method = _load()


def test_skew_tolerance_widens_the_overlap() -> None:
    steps = pl.LazyFrame(
        {
            "step": [1],
            "rank": [0],
            "start_time": [T0],
            "end_time": [T0 + timedelta(seconds=1)],
            "duration_seconds": [1.0],
            "source_file": ["x"],
        }
    )
    events = pl.LazyFrame(
        {
            "event_id": [0],
            "link": ["l1"],
            "device": ["a1"],
            "interface": ["e1"],
            "kind": ["drops"],
            "start_time": [T0 + timedelta(seconds=1.03)],
            "end_time": [T0 + timedelta(seconds=2)],
        }
    )
    assert overlap_method.overlaps(steps, events, 0.0).collect().height == 0
    assert overlap_method.overlaps(steps, events, 0.05).collect().height == 1


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 10_000), st.integers(0, 3_000)), min_size=1, max_size=40
    ),
    evs=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3_000)), min_size=1, max_size=10),
)
def test_sweep_pairs_equals_the_general_inequality_join(
    steps: list[tuple[int, int, int]], evs: list[tuple[int, int]]
) -> None:
    timed = pl.DataFrame(
        {
            "step": list(range(len(steps))),
            "rank": [r for r, _, _ in steps],
            "start_time": [T0 + timedelta(milliseconds=s) for _, s, _ in steps],
            "end_time": [T0 + timedelta(milliseconds=s + d) for _, s, d in steps],
        }
    ).with_columns(pl.col("start_time", "end_time").cast(schemas.TIME))
    widened = pl.DataFrame(
        {
            "event_id": list(range(len(evs))),
            "link": "l",
            "device": "d",
            "interface": "i",
            "kind": "drops",
            "ev_start": [T0 + timedelta(milliseconds=s) for s, _ in evs],
            "ev_end": [T0 + timedelta(milliseconds=s + d) for s, d in evs],
        }
    ).with_columns(pl.col("ev_start", "ev_end").cast(schemas.TIME))
    expected = timed.join_where(
        widened, pl.col("start_time") <= pl.col("ev_end"), pl.col("end_time") >= pl.col("ev_start")
    )
    got = overlap_method.sweep_pairs(timed, widened)
    key = ["step", "event_id"]
    assert got.select(key).sort(key).to_dicts() == expected.select(key).sort(key).to_dicts()
