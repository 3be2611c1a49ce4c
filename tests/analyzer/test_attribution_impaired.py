"""Causality: a line's network time is at most how long one of its links was impaired inside it, plus a
poll (``analyzer.attribution.impaired``, step 8 of docs/method.md)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import polars as pl
import pytest
from attribution_support import judge_one_link, lines_frame
from synthetic_fabric import T0

from analyzer.attribution.impaired import impaired_seconds


def _grid(seconds: float, cell: float) -> pl.DataFrame:
    n = round(seconds / cell)
    return pl.DataFrame(
        {"window": list(range(n)), "time": [T0 + timedelta(seconds=(i + 0.5) * cell) for i in range(n)]}
    ).with_columns(pl.col("window").cast(pl.Int64))


def _cells(link: str, first: int, last: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "window": list(range(first, last + 1)),
            "link": [link] * (last - first + 1),
            "per_step": [0.01] * (last - first + 1),
            "per_second": [0.0] * (last - first + 1),
        }
    ).with_columns(pl.col("window").cast(pl.Int64))


def test_a_lines_links_are_impaired_for_as_long_as_their_cells_carry_a_cause() -> None:
    grid = _grid(20.0, 0.1)
    cells = pl.concat([_cells("a", 50, 59), _cells("b", 40, 69)])  # a: 1 s, b: 3 s of cause
    lines = pl.DataFrame(
        {
            "rank": [0, 0, 0],
            "step": [1, 2, 3],
            "n": [1, 1, 4],
            "duration": [8.0, 2.0, 1.0],
            "lo": [T0 + timedelta(seconds=2.0), T0 + timedelta(seconds=12.0), T0 + timedelta(seconds=15.0)],
        }
    )
    out = impaired_seconds(lines, cells, grid, skew=0.0).sort("step")
    # The longest-impaired link decides; a line where no link was impaired has none to give.
    assert out["impaired"].to_list() == pytest.approx([3.0, 0.0, 0.0], abs=0.11)
    # The host clock runs 3 s behind the switches': the first line spans 5-13 s on theirs, half of b's cause.
    shifted = impaired_seconds(lines, cells, grid, skew=-3.0).sort("step")
    assert shifted["impaired"].to_list() == pytest.approx([2.0, 0.0, 0.0], abs=0.11)


def test_a_stall_beside_a_short_burst_is_capped_at_the_bursts_time() -> None:
    # Seed 103414 of the random family: a job-wide stall of 8.3 s in the step where a 0.8 s burst on a lossy
    # link lost some of the job's frames. The burst's loss recovery reads a gain from that one step and would
    # take all 8.3 s; the link was impaired for a poll or two of it.
    rng = np.random.default_rng(4)
    per_step = list(0.4 + 0.004 * rng.standard_normal(60))
    per_step[30] += 8.3
    phys = [0.0] * 30 + [0.47, 0.24, 0.24] + [0.0] * 27
    free = judge_one_link(lines_frame(per_step, phys))
    assert free["network"][30] == pytest.approx(8.3, abs=0.05)  # without a ceiling
    ceiling = pl.Series([None] * 30 + [2.0] * 3 + [None] * 27, dtype=pl.Float64)  # 1 s impaired + a poll
    capped = judge_one_link(lines_frame(per_step, phys).with_columns(ceiling=ceiling))
    assert capped["network"][30] == pytest.approx(2.0)
    assert capped["unexplained"][30] == pytest.approx(6.3, abs=0.05)
