"""Compare the analysis with the simulated fabric's ground truth (definitions in ``analyzer.truth``)."""

from __future__ import annotations

from typing import Any

import polars as pl

from analyzer.truth import FAMILIES

_KIND_FAMILY = {kind: name for name, kinds in FAMILIES.items() for kind in kinds}


def _matches(truth: pl.DataFrame, events: pl.DataFrame, tolerance_seconds: float) -> pl.DataFrame:
    """(truth index, event id) pairs that meet in time, place and kind."""
    tol = pl.duration(microseconds=int(tolerance_seconds * 1e6))
    t = truth.with_row_index("truth_id").select(
        "truth_id",
        "family",
        t_start=pl.col("start_time") - tol,
        t_end=pl.col("end_time") + tol,
        t_link="link",
        t_device="device",
        t_interface="interface",
    )
    e = events.select(
        "event_id",
        "start_time",
        "end_time",
        "link",
        "device",
        "interface",
        e_family=pl.col("kind").replace_strict(_KIND_FAMILY, default=None, return_dtype=pl.String()),
    )
    pairs = t.join_where(e, pl.col("t_start") <= pl.col("end_time"), pl.col("t_end") >= pl.col("start_time"))
    same_link = pl.col("t_link").is_not_null() & (pl.col("t_link") == pl.col("link"))
    same_port = (pl.col("t_device") == pl.col("device")) & (
        pl.col("t_interface").is_null() | (pl.col("t_interface") == pl.col("interface"))
    )
    place = same_link | (pl.col("t_link").is_null() & same_port.fill_null(False))
    # A wave going down also shows as drops and FCS errors on its link; an optical fault as FCS errors
    # and drops; an unknown truth kind matches any detection.
    kind = (
        pl.col("family").is_null()
        | (pl.col("family") == "down")
        | (pl.col("family") == pl.col("e_family"))
        | ((pl.col("family") == "optical") & (pl.col("e_family") == "congestion"))
    )
    return pairs.filter(place.fill_null(False) & kind.fill_null(False)).select("truth_id", "event_id")


def event_scores(truth: pl.DataFrame, events: pl.DataFrame, tolerance_seconds: float) -> dict[str, Any]:
    """Recall and precision of event detection.

    Args:
        truth: episodes from ``read_truth``.
        events: ``schemas.EVENTS`` rows.
        tolerance_seconds: how far apart in time a truth episode and an event may be and still meet.

    Returns:
        ``event_recall``, ``event_precision`` (None when undefined), and the counts.
    """
    pairs = _matches(truth, events, tolerance_seconds)
    found = pairs["truth_id"].n_unique()
    right = pairs["event_id"].n_unique()
    return {
        "event_recall": found / truth.height if truth.height else None,
        "event_precision": right / events.height if events.height else None,
        "truth_episodes": truth.height,
        "detected_events": events.height,
    }


def _cause_links(truth_steps: pl.DataFrame, episodes: pl.DataFrame, links: list[str]) -> pl.DataFrame:
    """Each step's true causes as link names (a wave or interface is mapped through the episodes)."""
    lookup = (
        pl.concat(
            [
                episodes.select(cause="wave", cause_link="link"),
                episodes.select(cause="interface", cause_link="link"),
                pl.DataFrame({"cause": links, "cause_link": links}),
            ],
            how="vertical_relaxed",
        )
        .drop_nulls()
        .unique("cause", keep="first")
    )
    exploded = truth_steps.explode("causes").rename({"causes": "cause"})
    return exploded.join(lookup, on="cause", how="left").with_columns(
        cause_link=pl.coalesce("cause_link", "cause")
    )


def exposure_error(
    truth_steps: pl.DataFrame, episodes: pl.DataFrame, link_exposure: pl.DataFrame
) -> dict[str, Any]:
    """Relative error of the total exposed seconds per link.

    Args:
        truth_steps: steps from ``read_truth``.
        episodes: episodes from ``read_truth``.
        link_exposure: ``schemas.LINK_EXPOSURE`` rows.

    Returns:
        ``exposed_latency_relative_error`` (the largest over links with true exposure) and ``per_link``
        with the true and estimated totals.
    """
    causes = _cause_links(truth_steps, episodes, link_exposure["link"].to_list())
    per_rank = causes.filter(pl.col("cause_link").is_not_null()).with_columns(
        share=pl.col("exposed_seconds") / pl.len().over("step", "rank")
    )
    ranks = truth_steps.group_by("step").agg(ranks=pl.len())
    truth_link = (
        per_rank.join(ranks, on="step")
        .group_by(link="cause_link")
        .agg(true_seconds=(pl.col("share") / pl.col("ranks")).sum())
    )
    joined = truth_link.join(
        link_exposure.select("link", estimated_seconds="exposed_total_seconds"),
        on="link",
        how="full",
        coalesce=True,
    ).with_columns(pl.col("true_seconds", "estimated_seconds").fill_null(0.0))
    joined = joined.with_columns(
        relative_error=pl.when(pl.col("true_seconds") > 0).then(
            (pl.col("estimated_seconds") - pl.col("true_seconds")).abs() / pl.col("true_seconds")
        )
    ).sort("link")
    worst = joined["relative_error"].max()
    return {
        "exposed_latency_relative_error": None if worst is None else float(worst),  # type: ignore[arg-type]
        "per_link": joined.to_dicts(),
    }


def attribution_accuracy(
    truth_steps: pl.DataFrame, episodes: pl.DataFrame, steps: pl.DataFrame, links: list[str]
) -> float | None:
    """Share of truly inflated steps whose most-attributed link is one of the true causes.

    Args:
        truth_steps: steps from ``read_truth``.
        episodes: episodes from ``read_truth``.
        steps: ``schemas.STEP_ANALYSIS`` rows.
        links: known link names.

    Returns:
        The share, or None when the truth has no inflated step with a cause.
    """
    causes = _cause_links(truth_steps.filter(pl.col("exposed_seconds") > 0), episodes, links)
    truth = causes.group_by("step").agg(
        true_links=pl.col("cause_link").drop_nulls().unique(), true_causes=pl.col("cause").drop_nulls()
    )
    truth = truth.filter(pl.col("true_links").list.len() > 0)
    if truth.height == 0:
        return None
    # The step's link: the one most ranks name (ranks of one synchronous step agree but for noise).
    ours = (
        steps.filter(pl.col("top_link").is_not_null())
        .group_by("step")
        .agg(
            top_link=pl.col("top_link").mode().first(),
            top_interface=pl.col("top_interface").mode().first(),
        )
    )
    joined = truth.join(ours, on="step", how="left")
    # Right when the top link is a true cause, or the top interface is (a truth that blames waves).
    right = pl.col("true_links").list.contains(pl.col("top_link")) | pl.col("true_causes").list.contains(
        pl.col("top_interface")
    )
    return float(joined.select(right.fill_null(False).sum()).item()) / truth.height
