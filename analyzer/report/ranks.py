"""The ranks at a glance: a job of thousands of ranks is summed up in a few lines, the worst ranks named,
never one row per rank.

A rank's figures: its mean step time, how much slower that is than the median rank's, and the step time
the analysis attributed to the network (summed over its steps). The worst are the slowest ranks (a
straggler the network does not explain shows as a slow rank with no network time beside it).
"""

from __future__ import annotations

import polars as pl

from analyzer.report.model import RankRow, Ranks

WORST_RANKS = 10
"""Ranks named in the report (the slowest): past a dozen rows a table stops being read."""


def ranks(steps: pl.DataFrame, attribution: pl.DataFrame) -> Ranks:
    """Per-rank roll-up of the steps and the attribution.

    Args:
        steps: ``schemas.STEP_ANALYSIS`` rows.
        attribution: ``schemas.ATTRIBUTION`` rows.

    Returns:
        How many ranks, the spread of their mean step times, and the ``WORST_RANKS`` slowest.
    """
    per_rank = steps.group_by("rank").agg(steps=pl.len(), mean=pl.col("duration_seconds").mean())
    if per_rank.is_empty():
        return Ranks(0, None, None, [])
    network = attribution.group_by("rank").agg(network=pl.col("attributed_seconds").sum())
    median = float(per_rank["mean"].median())  # type: ignore[arg-type]
    worst = (
        per_rank.join(network, on="rank", how="left")
        .with_columns(pl.col("network").fill_null(0.0))
        .sort(["mean", "rank"], descending=[True, False])
        .head(WORST_RANKS)
    )
    rows = [
        RankRow(
            int(r["rank"]), int(r["steps"]), float(r["mean"]), float(r["mean"]) - median, float(r["network"])
        )
        for r in worst.iter_rows(named=True)
    ]
    return Ranks(per_rank.height, median, float(per_rank["mean"].max()), rows)  # type: ignore[arg-type]
