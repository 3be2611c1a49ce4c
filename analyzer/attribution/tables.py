"""The blame's tables: lines' network time down to steps (by their weight) and links (their shares)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analyzer.attribution.lines import STEP as _STEP
from analyzer.attribution.rules import SIGNIFICANT_SIGMAS
from analyzer.attribution.steady import steady_seconds


@dataclass
class Blame:
    """The blame of one analysis.

    Attributes:
        steps: ``schemas.STEP_ANALYSIS`` rows (one per step and rank; interval lines expanded).
        attribution: ``schemas.ATTRIBUTION`` rows (episode cost per step, rank and link).
        steady: ``steady`` output.
        summary: the JSON-ready figures (skew, correlation, cycle, evidence).
    """

    steps: pl.DataFrame
    attribution: pl.DataFrame
    steady: pl.DataFrame
    summary: dict[str, object]


def outputs(
    steps: pl.DataFrame,
    judged: pl.DataFrame,
    shares: pl.DataFrame,
    links: pl.DataFrame,
    summary: dict[str, object],
) -> Blame:
    """Lines' network time down to steps (by their ``weight``) and links (their Shapley shares)."""
    from analyzer import schemas

    rows = step_rows(steps, judged)
    attribution = attribution_rows(shares, rows)
    table = step_table(rows, attribution, steady_seconds(links))
    return Blame(
        schemas.conform_lazy(schemas.STEP_ANALYSIS, table.lazy()).collect(),
        schemas.conform_lazy(schemas.ATTRIBUTION, attribution.lazy()).collect(),
        links,
        summary,
    )


def step_rows(steps: pl.DataFrame, judged: pl.DataFrame) -> pl.DataFrame:
    """Each step with its line's figures: its ``network`` (the line's by the step's ``weight``), its
    inflation over the baseline and its share of the line's ``unexplained``."""
    line = judged.select(
        "rank",
        line="step",
        n="n",
        baseline_seconds="baseline",
        line_excess="excess",
        line_network="network",
        line_unexplained="unexplained",
        sigma="sigma",
        source_file="source_file",
    )
    rows = steps.join(line, on=["rank", "line"], how="left")
    return rows.with_columns(
        network=pl.col("line_network") * pl.col("weight"),
        inflation_seconds=(pl.col("per_step") - pl.col("baseline_seconds")).clip(lower_bound=0.0),
        unexplained_seconds=pl.col("line_unexplained") / pl.col("n"),
    )


def attribution_rows(shares: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """``schemas.ATTRIBUTION`` columns: each step's network time over its links by their shares."""
    given = shares.join(rows.select("step", "rank", "network"), on=_STEP)
    given = (
        given.filter(pl.col("share") > 0)
        .with_columns(share=pl.col("share") / pl.col("share").sum().over(_STEP))
        .with_columns(attributed_seconds=pl.col("network") * pl.col("share"))
        .filter(pl.col("attributed_seconds") > 0)
    )
    return given.select(
        "step",
        "rank",
        event_id=pl.lit(None, pl.Int64),
        link="link",
        device="device",
        interface=pl.lit(None, pl.String),
        kind="cause",
        overlap_seconds=pl.lit(None, pl.Float64),
        share="share",
        attributed_seconds="attributed_seconds",
    )


def step_table(rows: pl.DataFrame, attribution: pl.DataFrame, steady_s: float | None) -> pl.DataFrame:
    """``schemas.STEP_ANALYSIS`` columns: each step with its top link, kind and device."""
    top = (
        attribution.sort("attributed_seconds", descending=True)
        .group_by(_STEP)
        .agg(
            top_link=pl.col("link").first(),
            top_kind=pl.col("kind").first(),
            top_device=pl.col("device").first(),
            events=pl.len().cast(pl.Int64),
        )
    )
    return (
        rows.join(top, on=_STEP, how="left")
        .select(
            "step",
            "rank",
            start_time="lo",
            end_time="hi",
            duration_seconds="duration",
            baseline_seconds="baseline_seconds",
            inflation_seconds="inflation_seconds",
            inflated=pl.col("inflation_seconds") > SIGNIFICANT_SIGMAS * pl.col("sigma").fill_null(0.0),
            events=pl.col("events").fill_null(0),
            top_link="top_link",
            top_kind="top_kind",
            top_device="top_device",
            steady_seconds=pl.lit(steady_s, pl.Float64),
            unexplained_seconds="unexplained_seconds",
            source_file="source_file",
        )
        .sort(_STEP)
    )
