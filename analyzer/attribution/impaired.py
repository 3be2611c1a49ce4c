"""How long each line's links were impaired: the time the network can have held its steps (causality).

A link holds a step only while it is impaired: while its cells carry a cause (queueing, loss recovery,
pause, lost capacity); a collective needs all its links, so the network can hold a step while any one of
them is impaired, and no longer. The cells come from readings one poll apart, so an impairment is known to
within a poll: a line's network time is at most the time some link was impaired inside the line's span,
plus one poll (``reconcile``). A straggler's or a stall's wait that coincides with a short burst is then
not the burst's: the burst impaired the link for a poll or two, not for the whole stall; impairments of
several links one after another (a degradation, then a wave down on another link) hold a step for as long
as they last together.
"""

from __future__ import annotations

import polars as pl

from analyzer.attribution.step_windows import cell_of, cell_seconds, span_sums


def impaired_seconds(
    lines: pl.DataFrame, cells: pl.DataFrame, grid: pl.DataFrame, skew: float
) -> pl.DataFrame:
    """Per line (``rank``, ``step``): ``impaired``, the seconds inside the line's span (switch clock) in which
    some link carried a cause (the union over the links, not the longest of them)."""
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
        .select(cell="window", link=pl.lit("some link"))
        .unique()
        .with_columns(on=pl.lit(1, pl.Int64))
    )
    impaired = span_sums(spans, causing, grid, ["on"])
    return impaired.select("rank", "step", impaired=pl.col("on") * cell_seconds(grid))


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
