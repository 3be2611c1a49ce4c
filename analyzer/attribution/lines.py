"""Step 1, the lines: each logged line (a step, or an interval of N steps) timed, and the evidence it carries
(a step's communication time where a profiler, NCCL or the log itself measured it)."""

from __future__ import annotations

import polars as pl

# The step's formula (``docs/method.md``; the capitals are ``rules``).
FORMULA = """\
per_step = (hi - lo) / n                      a line of n steps (n = 1 for a single step)
measure  = exposed communication where a profiler, NCCL or the log timed it (single steps), else per_step
"""

STEP = ["step", "rank"]  # the keys of one step of one rank


def intervals(steps: pl.DataFrame) -> pl.LazyFrame:
    """One row per logged line (a step, or an interval of N steps), timed, deduplicated per (step, rank).

    Args:
        steps: ``schemas.STEPS`` rows.

    Returns:
        ``rank``, ``step`` (the last of the interval), ``n``, ``lo``, ``hi`` (host clock, null when the log
        has no wall clock), ``duration`` (seconds per step), ``per_step`` (the measure judged: the duration,
        or the step's communication where ``attribute`` is given it), ``source_file``.
    """
    n = (
        pl.when(pl.col("interval_average").fill_null(False))
        .then(pl.col("interval_steps").fill_null(1))
        .otherwise(1)
        .clip(lower_bound=1)
    )
    span_s = pl.coalesce(
        (pl.col("end_time") - pl.col("start_time")).dt.total_nanoseconds() / 1e9,
        pl.col("duration_seconds") * pl.col("n"),
    )
    span = pl.duration(microseconds=(pl.col("span") * 1e6).round().cast(pl.Int64))
    rows = steps.lazy().with_columns(pl.col("rank").fill_null(0), n=n)
    rows = rows.with_columns(span=span_s).filter(pl.col("step").is_not_null() & pl.col("span").is_not_null())
    rows = rows.with_columns(
        lo=pl.coalesce(pl.col("start_time"), pl.col("end_time") - span),
        hi=pl.coalesce(pl.col("end_time"), pl.col("start_time") + span),
    )
    unique = rows.unique(STEP, keep="first", maintain_order=True)
    per_step = pl.col("span") / pl.col("n")
    return unique.select(
        "rank", "step", "n", "lo", "hi", duration=per_step, per_step=per_step, source_file="source_file"
    )


def expand(lines: pl.LazyFrame) -> pl.LazyFrame:
    """Every step of every interval, its window spaced evenly inside the interval (host clock).

    Returns:
        ``rank``, ``line`` (the interval's last step), ``step``, ``lo``, ``hi``, ``duration``, ``per_step``.
    """
    per = pl.duration(microseconds=(pl.col("duration") * 1e6).round().cast(pl.Int64))
    steps = lines.with_columns(i=pl.int_ranges(0, pl.col("n"))).explode("i")
    return steps.select(
        "rank",
        line="step",
        step=pl.col("step") - pl.col("n") + 1 + pl.col("i"),
        lo=pl.col("lo") + per * pl.col("i"),
        hi=pl.col("lo") + per * (pl.col("i") + 1),
        duration="duration",
        per_step="per_step",
    )


def with_logged(evidence: pl.DataFrame | None, parsed_steps: pl.DataFrame) -> pl.DataFrame | None:
    """The given evidence, then each single step's communication time as its own log timed it."""
    if "logged_communication_seconds" not in parsed_steps.columns:  # a frame not read through a parser
        return evidence
    logged = parsed_steps.filter(
        pl.col("logged_communication_seconds").is_not_null() & ~pl.col("interval_average").fill_null(False)
    ).select("step", pl.col("rank").fill_null(0), communication="logged_communication_seconds")
    parts = [part for part in (evidence, logged) if part is not None and part.height]
    if not parts:
        return None
    return pl.concat(parts, how="vertical_relaxed").unique(STEP, keep="first", maintain_order=True)


def read_lines(parsed_steps: pl.DataFrame, evidence: pl.DataFrame | None) -> pl.DataFrame:
    """The logged lines (``intervals``), each single step's measure its exposed communication where some
    evidence measured it (``with_logged``), and which measure each line carries (``evidence``)."""
    lines = intervals(parsed_steps).collect()
    evidence = with_logged(evidence, parsed_steps)
    if evidence is None or not evidence.height:
        return lines.with_columns(evidence=pl.lit("step_time"))
    return (
        lines.join(evidence, on=STEP, how="left")
        .with_columns(
            per_step=pl.when(pl.col("n") == 1)
            .then(pl.coalesce("communication", "per_step"))
            .otherwise("per_step"),
            evidence=pl.when(pl.col("communication").is_not_null())
            .then(pl.lit("communication"))
            .otherwise(pl.lit("step_time")),
        )
        .drop("communication")
    )
