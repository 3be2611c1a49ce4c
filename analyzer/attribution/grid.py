"""Step 3 on the grid, a few links at a time: each link end's amounts per grid cell (``physics.window_amounts``)
are cells x link ends rows (20,000 cells x 500 ends is 1e7 rows, about 1.2 GB, and several copies of it
while they are read), but what the method keeps of them is per end (``job_rates``) or a few cells (those
with a cause, and those of a link down). So the amounts are made and read one chunk of whole links at a
time, once (``read_amounts``): peak memory follows ``physics.CHUNK_ROWS``, not the number of link ends, with
the same results as reading them at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

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


@dataclass
class GridAmounts:
    """What the method keeps of the grid's amounts, read in one pass over the link chunks."""

    rates: pl.DataFrame
    """``steady.job_rates`` of every link end over the grid's cells."""
    causing: pl.DataFrame
    """The cells holding a cause (``episode.with_a_cause``' first part), of every link."""
    down: pl.DataFrame
    """The cells a link counts as down (its second part)."""


def read_amounts(grid: pl.DataFrame, totals: pl.DataFrame, ends: pl.DataFrame, poll: float) -> GridAmounts:
    """Each chunk's amounts made once: its ends' job rates, then its cells with a cause read against those
    rates (a cell is read against its own end's rate only, so a chunk of whole links needs no other's).

    Args:
        grid: ``episode.read_grid``'s grid.
        totals: its running totals.
        ends: ``physics.MEMBERS`` rows.
        poll: ``poll_seconds`` of the readings.
    """
    cell_seconds = float(grid["time"].dt.epoch("us").diff().median() or 1e6) / 1e6  # type: ignore[arg-type]
    ahead = round(poll / cell_seconds)
    rates, kept, down = [], [], []
    # An end whose totals never move reads nothing in every cell: one cell gives its job rates (none), and
    # it holds no cause and no cell down. Idle ends are most of a large fabric's.
    still = physics.still_ends(totals)
    if not still.is_empty():
        idle = totals.join(still, on=["link", "device"], how="semi")
        rates.append(job_rates(physics.window_amounts(idle.lazy(), grid.head(1).lazy()).collect()))
        totals = totals.join(still, on=["link", "device"], how="anti")
    for chunk in link_chunks(totals, grid.height):
        amounts = physics.window_amounts(chunk.lazy(), grid.lazy()).collect()
        rates.append(job_rates(amounts))
        causing, downed = with_a_cause(with_job_rates(amounts, rates[-1]), ends, ahead)
        kept.append(causing)
        down.append(downed)
    return GridAmounts(
        pl.concat(rates, how="vertical_relaxed"),
        pl.concat(kept, how="vertical_relaxed"),
        pl.concat(down, how="vertical_relaxed"),
    )


def grid_physics(
    grid: pl.DataFrame, amounts: GridAmounts, ends: pl.DataFrame, links: pl.DataFrame, sparse: bool
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each cell's physics per link (``episode.step_physics``), and the strongest link's per cell
    (``signal``: ``time``, ``physics``, for the skew search).

    A job that sends only now and then (DiLoCo's outer sync: ``steady.sends_sparsely``) is slowed by a link
    only while it exchanges over it (``exchanging``). Elsewhere a cause on the link (another tenant's
    congestion, a wave down) holds nothing of the job's.

    Args:
        grid: ``episode.read_grid``'s grid.
        amounts: ``read_amounts`` output.
        ends: ``physics.MEMBERS`` rows.
        links: ``steady.steady`` output.
        sparse: whether the job sends sparsely.
    """
    causing = exchanging(amounts.causing) if sparse else amounts.causing
    cells = physics_of(grid, causing, amounts.down, ends, links)
    strongest = floor(cells).group_by("window").agg(pl.col("physics").max())
    signal = grid.join(strongest, on="window", how="left").with_columns(pl.col("physics").fill_null(0.0))
    return cells, signal.select("time", "physics")


def exchanging(causing: pl.DataFrame) -> pl.DataFrame:
    """The cells with a cause in which a sparse sender was exchanging over the link: each run of a link's
    consecutive cells with a cause that holds a cell where its class crossed the link both ways within a
    poll (``exchanged``). An exchange the cause holds back goes on in that run after one way has finished
    (an all-reduce's phase waits for its slowest hop), so the whole run is its."""
    cells = (
        causing.select("link", "window", "exchanged")
        .group_by("link", "window")
        .agg(pl.col("exchanged").any())
    )
    gap = pl.col("window").diff().over("link").fill_null(1) != 1
    cells = (
        cells.sort("link", "window")
        .with_columns(gap=gap)
        .with_columns(run=pl.col("gap").cum_sum().over("link"))
    )
    held = cells.filter(pl.col("exchanged").any().over("link", "run")).select("link", "window")
    return causing.join(held, on=["link", "window"], how="semi")
