"""Step 3, on the steps: each step window's physics per link, read from the grid's cells over the window
where its collectives may have run."""

from __future__ import annotations

import polars as pl

from analyzer.attribution.episode import floor
from analyzer.attribution.rules import MIN_STRIDE_SECONDS, TYPICAL_WINDOW_STRIDE

# The step's formula (``docs/method.md``; the capitals are ``rules``).
FORMULA = """\
physics(step, link) = max over windows w of (mean per-step part + mean per-second part * |w|)
windows: a typical step long, ending at the step's end and every TYPICAL_WINDOW_STRIDE typical steps before
"""


def on_steps(cells: pl.DataFrame, grid: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Each step window's estimate per link from the grid's cells it covers: the mean per-step part plus
    the mean per-second part times the step's length (cumulative sums: two lookups per step and link).

    Args:
        cells: ``step_physics`` over the grid (``window`` is the cell).
        grid: ``window``, ``time`` (the cells' centres, regular).
        windows: ``window``, ``lo``, ``hi`` (switch clock), ``seconds_step``.

    Returns:
        ``window``, ``link``, ``device``, ``physics``, ``cause``.
    """
    if cells.is_empty() or grid.height < 2:
        return pl.DataFrame(
            schema={
                "window": pl.Int64(),
                "link": pl.String(),
                "device": pl.String(),
                "physics": pl.Float64(),
                "cause": pl.String(),
            }
        )
    index = [cell_of(pl.col(c).dt.epoch("us"), grid) for c in ("lo", "hi")]
    spans = windows.select("window", "seconds_step", i0=index[0], i1=index[1])
    summed = span_sums(
        spans, cells.rename({"window": "cell"}), grid, ["per_step", "per_second"], ["device", "cause"]
    )
    n = pl.col("i1") - pl.col("i0") + 1
    estimate = (pl.col("per_step") + pl.col("per_second") * pl.col("seconds_step")) / n
    # The place and cause of the step's last cell, else of the cell before its first.
    out = summed.select(
        "window",
        "link",
        device=pl.coalesce("device", "device0"),
        physics=estimate.clip(lower_bound=0.0),
        cause=pl.coalesce("cause", "cause0", pl.lit("unclassified")),
    )
    return floor(out)


def cell_of(micros: pl.Expr, grid: pl.DataFrame) -> pl.Expr:
    """The grid cell whose centre is nearest a time (epoch microseconds, switch clock), clipped to the grid."""
    first = grid["time"].dt.epoch("us").min()
    width = grid["time"].dt.epoch("us").diff().median()
    return ((micros - first) / width).round().clip(0, grid.height - 1).cast(pl.Int64)


def cell_seconds(grid: pl.DataFrame) -> float:
    """The grid's cell width in seconds."""
    return float(grid["time"].dt.epoch("us").diff().median()) / 1e6  # type: ignore[arg-type]


def span_sums(
    spans: pl.DataFrame,
    per_cell: pl.DataFrame,
    grid: pl.DataFrame,
    sums: list[str],
    ends: list[str] | None = None,
) -> pl.DataFrame:
    """Per span (``i0``, ``i1``: its first and last grid cell) and link of ``per_cell``: the sums of the
    ``sums`` columns over the span's cells, from running totals over the whole grid (two lookups per span and
    link, however long the span), with the ``ends`` columns of its last cell and, suffixed ``0``, of the cell
    before its first.

    Args:
        spans: ``i0``, ``i1`` and any keys.
        per_cell: ``cell`` (the grid's ``window``), ``link``, the ``sums`` and ``ends`` columns.
        grid: ``window`` (the cells, regular).
    """
    ends = ends or []
    links = per_cell.select("link").unique()
    running = (
        grid.select(cell="window")
        .join(links, how="cross")
        .join(per_cell.select("cell", "link", *sums, *ends), on=["cell", "link"], how="left")
        .sort("link", "cell")
        .with_columns(pl.col(sums).fill_null(0).cum_sum().over("link"))
    )
    high = running.select("link", *sums, *ends, i1="cell")
    low = running.select("link", *(pl.col(c).alias(f"{c}0") for c in [*sums, *ends]), i0=pl.col("cell") + 1)
    joined = spans.join(links, how="cross").join(high, on=["link", "i1"], how="left")
    joined = joined.join(low, on=["link", "i0"], how="left")
    return joined.with_columns(pl.col(c) - pl.col(f"{c}0").fill_null(0) for c in sums).drop(
        f"{c}0" for c in sums
    )


def collective_windows(windows: pl.DataFrame, typical_seconds: float, skew_seconds: float) -> pl.DataFrame:
    """Where each step's collectives may have run, on the switch clock: a typical step's length of time.

    A step under one and a half typical steps is read over its last typical step's worth of time. A longer
    one (a checkpoint, a stall, or its collective slowed) gets every typical-length window inside it, half
    a typical step apart, ending with its last: a checkpoint's collectives ran at its end, where the
    network cost as much as anywhere in it; a collective the network held ran from where it began to the
    step's end, and the window where it began (the worst, an episode's onset) is what the physics must
    read.

    Args:
        windows: ``window``, ``lo``, ``hi`` (host clock).
        typical_seconds: the typical step's length.
        skew_seconds: host minus switch clock.

    Returns:
        ``window`` (repeated for a long step), ``lo``, ``hi``, ``seconds_step``.
    """
    typical = pl.duration(microseconds=round(typical_seconds * 1e6))
    stride = max(typical_seconds * TYPICAL_WINDOW_STRIDE, MIN_STRIDE_SECONDS)
    seconds = (pl.col("hi") - pl.col("lo")).dt.total_nanoseconds() / 1e9
    back = pl.int_ranges(0, ((seconds - typical_seconds) / stride).floor().clip(lower_bound=0) + 1)
    ends = windows.with_columns(j=back).explode("j")
    hi = pl.col("hi") - pl.duration(microseconds=(pl.col("j") * stride * 1e6).round().cast(pl.Int64))
    lo = pl.max_horizontal(pl.col("lo"), pl.col("hi_j") - typical)
    skew = pl.duration(microseconds=round(skew_seconds * 1e6))
    return ends.with_columns(hi_j=hi).select(
        "window",
        lo=lo - skew,
        hi=pl.col("hi_j") - skew,
        seconds_step=(pl.col("hi_j") - lo).dt.total_nanoseconds() / 1e9,
    )


def physics_per_step(
    steps: pl.DataFrame, cells: pl.DataFrame, grid: pl.DataFrame, median_step: float, skew_seconds: float
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each step's physics per link, the worst of its typical-length windows (``collective_windows``).

    Args:
        steps: ``lines.expand`` output.
        cells: ``episode.step_physics`` over the grid.
        grid: ``window``, ``time`` (the cells' centres, regular).
        median_step: the typical step's length.
        skew_seconds: host minus switch clock.

    Returns:
        ``steps`` with its ``window``, and the caused steps: ``rank``, ``line``, ``step``, ``window``,
        ``link``, ``device``, ``physics`` (over 0), ``cause``.
    """
    # One window per distinct (lo, hi): ranks whose steps end together share theirs. Numbered in place (a
    # dense rank), not by a unique table joined back: most windows of a run are one rank's alone.
    placed = pl.col("lo").is_not_null()
    steps = steps.with_columns(
        window=pl.when(placed).then(pl.struct("lo", "hi").rank("dense").cast(pl.Int64))
    )
    windows = steps.filter(placed).select("window", "lo", "hi").unique("window", keep="any")
    per_link = on_steps(cells, grid, collective_windows(windows, median_step, skew_seconds))
    per_link = per_link.sort("physics", descending=True).group_by("window", "link").first()
    per_link = per_link.filter(pl.col("physics") > 0)
    caused = steps.select("rank", "line", "step", "window").join(per_link, on="window")
    return steps, caused


def lines_with_physics(lines: pl.DataFrame, steps: pl.DataFrame, caused: pl.DataFrame) -> pl.DataFrame:
    """Each line with its summed unscaled physics (``physics``: per step the strongest link's)."""
    raw = caused.group_by("rank", "step").agg(raw=pl.col("physics").max())
    # Only the steps with physics: a line without any sums to nothing (filled below).
    line_raw = steps.join(raw, on=["step", "rank"]).group_by("rank", "line").agg(physics=pl.col("raw").sum())
    return lines.join(line_raw.rename({"line": "step"}), on=["step", "rank"], how="left").with_columns(
        pl.col("physics").fill_null(0.0)
    )
