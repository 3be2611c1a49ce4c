"""How long each line's links were impaired: the time the network can have held its steps (causality).

A link holds a step only while it is impaired: while its cells carry a cause (queueing, loss recovery,
pause, lost capacity). The cells come from readings one poll apart, so an impairment is known to within a
poll: a line's network time is at most the longest time one of its links was impaired inside the line's
span, plus one poll (``reconcile``). A straggler's or a stall's wait that coincides with a short burst is
then not the burst's: the burst impaired the link for a poll or two, not for the whole stall.
"""

from __future__ import annotations

import polars as pl

from analyzer.attribution.step_windows import cell_of, cell_seconds, span_sums


def impaired_seconds(
    lines: pl.DataFrame, cells: pl.DataFrame, grid: pl.DataFrame, skew: float
) -> pl.DataFrame:
    """Per line (``rank``, ``step``): ``impaired``, the most seconds any one link carried a cause inside
    the line's span (switch clock)."""
    empty = pl.DataFrame(schema={"rank": pl.Int64(), "step": pl.Int64(), "impaired": pl.Float64()})
    if cells.is_empty() or grid.height < 2:
        return empty
    shift = round(skew * 1e6)
    lo = pl.col("lo").dt.epoch("us") - shift
    hi = lo + (pl.col("duration") * pl.col("n") * 1e6).round().cast(pl.Int64)
    spans = lines.filter(pl.col("lo").is_not_null()).select(
        "rank", "step", i0=cell_of(lo, grid), i1=cell_of(hi, grid)
    )
    causing = (
        cells.filter((pl.col("per_step") > 0) | (pl.col("per_second") > 0))
        .select(cell="window", link="link")
        .unique()
        .with_columns(on=pl.lit(1, pl.Int64))
    )
    per_link = span_sums(spans, causing, grid, ["on"])
    return per_link.group_by("rank", "step").agg(impaired=pl.col("on").max() * cell_seconds(grid))


def with_ceiling(
    judged: pl.DataFrame,
    lines: pl.DataFrame,
    cells: pl.DataFrame,
    grid: pl.DataFrame,
    skew: float,
    poll: float,
) -> pl.DataFrame:
    """``judged`` with ``ceiling``: the most network time each line can hold, its ``impaired_seconds`` plus a
    poll (null where the line has no place in time: no ceiling)."""
    ceiling = impaired_seconds(lines, cells, grid, skew).select(
        "rank", "step", ceiling=pl.col("impaired") + poll
    )
    return judged.join(ceiling, on=["rank", "step"], how="left")
