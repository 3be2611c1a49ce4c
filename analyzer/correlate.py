"""Steps as the analysis reads them, and what was attributed to each link summed over the run.

* ``prepare_steps``: one row per (step, rank), times filled in (the steps the analysis places);
* ``exposure_per_step``: the exposed seconds per step and link (or device, or label), zeros included;
* ``link_exposure``: per link the exposed latency per step, summarised as total, p50, p99, share of run time
  and GPU-hours lost.

The attribution itself is ``analyzer.attribution``; the retired overlap-and-weights method lives on in
``bench/overlap_method.py`` for the analyzer bench.
"""

from __future__ import annotations

import polars as pl

from analyzer import schemas

_STEP = ["step", "rank"]


def _seconds(delta: pl.Expr) -> pl.Expr:
    return delta.dt.total_nanoseconds() / 1e9


def prepare_steps(steps: pl.DataFrame) -> pl.LazyFrame:
    """Normalise the ingest ``steps`` table for correlation: one row per (step, rank), times filled in.

    A missing start is end minus duration (and the other way round); a missing rank is rank 0; a missing
    duration is end minus start. Rows without a step number or duration cannot be analysed and are dropped.

    Args:
        steps: ``schemas.STEPS`` rows from any log format.

    Returns:
        Columns ``step``, ``rank``, ``start_time``, ``end_time``, ``duration_seconds``, ``source_file``.
    """
    duration = pl.coalesce(
        pl.col("duration_seconds"), _seconds(pl.col("end_time") - pl.col("start_time"))
    ).alias("duration_seconds")
    span = pl.duration(microseconds=(pl.col("duration_seconds") * 1e6).round().cast(pl.Int64))
    frame = steps.lazy().with_columns(duration, pl.col("rank").fill_null(0))
    frame = frame.with_columns(
        start_time=pl.coalesce(pl.col("start_time"), pl.col("end_time") - span),
        end_time=pl.coalesce(pl.col("end_time"), pl.col("start_time") + span),
    )
    frame = frame.filter(pl.col("step").is_not_null() & pl.col("duration_seconds").is_not_null())
    # Two files may log the same (step, rank) (e.g. a trace and a step log): keep the first.
    unique = frame.unique(_STEP, keep="first", maintain_order=True).select(
        "step", "rank", "start_time", "end_time", "duration_seconds", "source_file"
    )
    # Collected once: every later stage reads the steps, and a lazy plan would redo the dedupe each time.
    return unique.collect().lazy()


def exposure_per_step(attribution: pl.LazyFrame, steps: pl.LazyFrame, key: str) -> pl.LazyFrame:
    """Exposed seconds per (step, key): mean over the step's ranks of what is attributed to the key.

    Every step appears for every key (zeros where nothing was attributed), so quantiles are over the run.

    Args:
        attribution: ``schemas.ATTRIBUTION`` rows, possibly with extra key columns (e.g. ``vendor``).
        steps: ``schemas.STEP_ANALYSIS`` rows.
        key: the grouping column of ``attribution`` (``link``, ``device``, a label).

    Returns:
        Columns ``step``, ``key``, ``exposed_seconds``.
    """
    ranks = steps.group_by("step").agg(ranks=pl.len())
    sums = (
        attribution.filter(pl.col(key).is_not_null())
        .group_by("step", key)
        .agg(pl.col("attributed_seconds").sum())
    )
    keys = attribution.select(pl.col(key).drop_nulls().unique())
    grid = ranks.join(keys, how="cross")
    # In (step, key) order: the run's sums over it are then taken in one order, whatever the engine.
    return (
        grid.join(sums, on=["step", key], how="left")
        .select("step", key, exposed_seconds=pl.col("attributed_seconds").fill_null(0.0) / pl.col("ranks"))
        .sort("step", key)
    )


def link_exposure(attribution: pl.LazyFrame, steps: pl.LazyFrame, gpus: int | None) -> pl.LazyFrame:
    """Per link: exposed latency total, p50, p99 over all steps, share of run time, GPU-hours lost.

    Args:
        attribution: ``schemas.ATTRIBUTION`` rows.
        steps: ``schemas.STEP_ANALYSIS`` rows.
        gpus: the job's GPU count, or None (then ``gpu_hours_lost`` is null).

    Returns:
        ``schemas.LINK_EXPOSURE`` rows.
    """
    per_step = exposure_per_step(attribution, steps, "link")
    run = steps.select(
        run_seconds=pl.coalesce(
            _seconds(pl.col("end_time").max() - pl.col("start_time").min()),
            pl.col("duration_seconds").sum() / pl.col("rank").n_unique(),
        )
    )
    stats = per_step.group_by("link").agg(
        steps_affected=(pl.col("exposed_seconds") > 0).sum().cast(pl.Int64),
        exposed_total_seconds=pl.col("exposed_seconds").sum(),
        exposed_p50_seconds=pl.col("exposed_seconds").quantile(0.5, "linear"),
        exposed_p99_seconds=pl.col("exposed_seconds").quantile(0.99, "linear"),
    )
    gpu_hours = pl.col("exposed_total_seconds") * gpus / 3600 if gpus else pl.lit(None, pl.Float64())
    table = stats.join(run, how="cross").with_columns(
        share_of_run=pl.col("exposed_total_seconds") / pl.col("run_seconds"), gpu_hours_lost=gpu_hours
    )
    return schemas.conform_lazy(schemas.LINK_EXPOSURE, table.sort("link"))
