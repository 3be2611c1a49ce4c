"""Helpers of the attribution tests: lines and their reconciliation on one link."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import polars as pl
from synthetic_fabric import T0

from analyzer.attribution import excess, reconcile


def lines_frame(per_step: list[float], physics_s: list[float], n: int = 1) -> pl.LazyFrame:
    return pl.LazyFrame(
        {
            "rank": [0] * len(per_step),
            "step": [(i + 1) * n for i in range(len(per_step))],
            "n": [n] * len(per_step),
            "per_step": per_step,
            "duration": per_step,
            "physics": physics_s,
            "source_file": ["x"] * len(per_step),
        }
    )


def judge_one_link(lines: pl.LazyFrame, around: int = 1, poll: float = 1.0) -> pl.DataFrame:
    """The reconciliation of one-link lines: each line's physics scaled by the link's gain."""
    judged = excess.measured(excess.baselines(lines, 1)).collect()
    cells = judged.filter(pl.col("physics") > 0).select("rank", "physics", line="step", link=pl.lit("l"))
    gains = reconcile.link_gains(judged, cells)
    scaled = cells.join(gains, on=["rank", "line", "link"]).select(
        "rank", step="line", scaled=pl.col("physics") * pl.col("gain")
    )
    with_scaled = judged.join(scaled, on=["rank", "step"], how="left").with_columns(
        pl.col("scaled").fill_null(0.0)
    )
    spread = reconcile.timing_spread(with_scaled.lazy(), around, poll)
    return reconcile.reconcile(spread).collect().sort("step")


def timed_lines(per_step: list[float], physics_s: list[float]) -> pl.LazyFrame:
    """Single-step lines one after the other from T0."""
    starts = np.concatenate([[0.0], np.cumsum(per_step)[:-1]])
    return lines_frame(per_step, physics_s).with_columns(
        lo=pl.Series([T0 + timedelta(seconds=float(s)) for s in starts])
    )
