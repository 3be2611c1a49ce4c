"""Step 3 on the grid, a few links at a time: each link end's amounts per grid cell (``physics.window_amounts``)
are cells x link ends rows (20,000 cells x 500 ends is 1e7 rows, about 1.2 GB, and several copies of it
while they are read), but what the method keeps of them is per end (``job_rates``) or a few cells (those
with a cause, and those of a link down). So the amounts are made and read one chunk of whole links at a
time, twice (the job's rates first: the steady figures and every cause need them): peak memory follows
``physics.CHUNK_ROWS``, not the number of link ends, with the same results as reading them at once.
"""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from analyzer import physics
from analyzer.attribution.episode import floor, physics_of, with_a_cause, with_job_rates
from analyzer.attribution.steady import job_rates


def link_chunks(totals: pl.DataFrame, cells: int) -> Iterator[pl.DataFrame]:
    """``totals`` in chunks of whole links, in link order, each of at most ``physics.CHUNK_ROWS`` cells x ends
    (at least one chunk, empty when there is nothing)."""
    per_link = totals.select("link", "device").unique().group_by("link").len().sort("link")
    chunk: list[str] = []
    rows = 0
    for link, ends in per_link.iter_rows():
        if chunk and rows + ends * cells > physics.CHUNK_ROWS:
            yield totals.filter(pl.col("link").is_in(chunk))
            chunk, rows = [], 0
        chunk.append(link)
        rows += ends * cells
    yield totals.filter(pl.col("link").is_in(chunk))


def _amounts(totals: pl.DataFrame, grid: pl.DataFrame) -> pl.DataFrame:
    return physics.window_amounts(totals.lazy(), grid.lazy()).collect()


def end_rates(grid: pl.DataFrame, totals: pl.DataFrame) -> pl.DataFrame:
    """``steady.job_rates`` of every link end over the grid's cells.

    Args:
        grid: ``episode.read_grid``'s grid.
        totals: its running totals.
    """
    return pl.concat(
        [job_rates(_amounts(chunk, grid)) for chunk in link_chunks(totals, grid.height)],
        how="vertical_relaxed",
    )


def grid_physics(
    grid: pl.DataFrame,
    totals: pl.DataFrame,
    rates: pl.DataFrame,
    ends: pl.DataFrame,
    links: pl.DataFrame,
    poll: float,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each cell's physics per link (``episode.step_physics``), and the strongest link's per cell
    (``signal``: ``time``, ``physics``, for the skew search).

    Args:
        grid: ``episode.read_grid``'s grid.
        totals: its running totals.
        rates: ``end_rates`` output.
        ends: ``physics.MEMBERS`` rows.
        links: ``steady.steady`` output.
        poll: ``poll_seconds`` of the readings.
    """
    cell_seconds = float(grid["time"].dt.epoch("us").diff().median() or 1e6) / 1e6  # type: ignore[arg-type]
    ahead = round(poll / cell_seconds)
    kept, down = [], []
    for chunk in link_chunks(totals, grid.height):
        causing, downed = with_a_cause(with_job_rates(_amounts(chunk, grid), rates), ends, ahead)
        kept.append(causing)
        down.append(downed)
    cells = physics_of(
        grid, pl.concat(kept, how="vertical_relaxed"), pl.concat(down, how="vertical_relaxed"), ends, links
    )
    strongest = floor(cells).group_by("window").agg(pl.col("physics").max())
    signal = grid.join(strongest, on="window", how="left").with_columns(pl.col("physics").fill_null(0.0))
    return cells, signal.select("time", "physics")
