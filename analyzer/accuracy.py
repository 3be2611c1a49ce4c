"""Compare the analysis with the simulated fabric's ground truth (definitions in ``analyzer.truth``)."""

from __future__ import annotations

from datetime import datetime
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
        t_peer="peer",
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
    # An event on a series with no link (a device-level optics component) is placed by its device.
    unlinked = pl.col("link").is_null() & (
        (pl.col("t_device") == pl.col("device")) | (pl.col("t_peer") == pl.col("device")).fill_null(False)
    )
    place = same_link | (pl.col("t_link").is_null() & same_port.fill_null(False)) | unlinked
    # A wave going down also shows as drops and FCS errors on its link; an optical fault as FCS errors
    # and drops; an unknown truth kind matches any detection.
    kind = (
        pl.col("family").is_null()
        | (pl.col("family") == "down")
        | (pl.col("family") == pl.col("e_family"))
        | ((pl.col("family") == "optical") & (pl.col("e_family") == "congestion"))
    )
    return pairs.filter(place.fill_null(False) & kind.fill_null(False)).select("truth_id", "event_id")


def event_scores(
    truth: pl.DataFrame,
    events: pl.DataFrame,
    tolerance_seconds: float,
    window: tuple[datetime, datetime] | None = None,
) -> dict[str, Any]:
    """Recall and precision of event detection.

    Args:
        truth: episodes from ``read_truth``.
        events: ``schemas.EVENTS`` rows.
        tolerance_seconds: how far apart in time a truth episode and an event may be and still meet.
        window: only events meeting this time range are judged (the run the truth describes; an archive
            may hold other runs), or None for all.

    Returns:
        ``event_recall``, ``event_precision`` (None when undefined), and the counts.
    """
    if window is not None:
        events = events.filter(pl.col("end_time") >= window[0], pl.col("start_time") <= window[1])
    pairs = _matches(truth, events, tolerance_seconds)
    found = pairs["truth_id"].n_unique()
    right = pairs["event_id"].n_unique()
    return {
        "event_recall": found / truth.height if truth.height else None,
        "event_precision": right / events.height if events.height else None,
        "truth_episodes": truth.height,
        "detected_events": events.height,
    }


def places(members: pl.DataFrame, links: list[str]) -> pl.DataFrame:
    """What a truth cause may name, mapped to its link: link names and link member ``device/interface``.

    Args:
        members: ``topology.link_members`` output.
        links: link names.

    Returns:
        Columns ``cause`` and ``cause_link``.
    """
    ports = members.select(cause=pl.col("device") + "/" + pl.col("interface"), cause_link="link")
    return pl.concat([ports, pl.DataFrame({"cause": links, "cause_link": links})], how="vertical_relaxed")


def _cause_links(truth_steps: pl.DataFrame, episodes: pl.DataFrame, known: pl.DataFrame) -> pl.DataFrame:
    """Each step's true causes as link names (through ``known`` places, else the episodes)."""
    lookup = (
        pl.concat(
            [
                episodes.select(cause="wave", cause_link="link"),
                episodes.select(cause="interface", cause_link="link"),
                episodes.select(cause=pl.col("device") + "/" + pl.col("interface"), cause_link="link"),
                known,
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
    truth_steps: pl.DataFrame, episodes: pl.DataFrame, link_exposure: pl.DataFrame, known: pl.DataFrame
) -> dict[str, Any]:
    """Relative error of the total exposed seconds per link.

    Args:
        truth_steps: steps from ``read_truth``.
        episodes: episodes from ``read_truth``.
        link_exposure: ``schemas.LINK_EXPOSURE`` rows.
        known: ``places`` output.

    Returns:
        ``exposed_latency_relative_error`` (the largest over links with true exposure) and ``per_link``
        with the true and estimated totals.
    """
    causes = _cause_links(truth_steps, episodes, known)
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
    truth_steps: pl.DataFrame,
    episodes: pl.DataFrame,
    steps: pl.DataFrame,
    known: pl.DataFrame,
    min_exposed_seconds: float = 0.0,
) -> dict[str, float | int | None]:
    """Share of truly inflated steps whose most-attributed place is a true cause.

    Args:
        truth_steps: steps from ``read_truth``.
        episodes: episodes from ``read_truth``.
        steps: ``schemas.STEP_ANALYSIS`` rows.
        known: ``places`` output.
        min_exposed_seconds: a step is truly inflated when the truth says it exposed more than this (the
            analysis's own criterion: ``inflated_min_ratio`` x the baseline step time).

    Returns:
        ``attribution_accuracy`` (the top link is a true cause's link), ``attribution_accuracy_wave`` (the
        top interface is a true culprit's, where the truth names device/interface culprits) and
        ``inflated_steps``; None when undefined.
    """
    inflated = truth_steps.filter(pl.col("exposed_seconds") > min_exposed_seconds)
    causes = _cause_links(inflated, episodes, known)
    truth = causes.group_by("step").agg(
        true_links=pl.col("cause_link").drop_nulls().unique(),
        # the wave: the interface of a culprit "device/interface" (both ends of a wave share its name)
        true_waves=pl.col("cause").drop_nulls().str.split("/").list.slice(1).list.join("/"),
    )
    truth = truth.filter(pl.col("true_links").list.len() > 0)
    if truth.height == 0:
        return {"attribution_accuracy": None, "attribution_accuracy_wave": None, "inflated_steps": 0}
    # The step's place: the one most ranks name (ranks of one synchronous step agree but for noise).
    ours = (
        steps.filter(pl.col("top_link").is_not_null())
        .group_by("step")
        .agg(top_link=pl.col("top_link").mode().first(), top_interface=pl.col("top_interface").mode().first())
    )
    joined = truth.join(ours, on="step", how="left")
    link_right = pl.col("true_links").list.contains(pl.col("top_link")).fill_null(False)
    wave_right = pl.col("true_waves").list.contains(pl.col("top_interface")).fill_null(False)
    waves = joined.filter(pl.col("true_waves").list.eval(pl.element() != "").list.any())
    return {
        "attribution_accuracy": float(joined.select(link_right.sum()).item()) / truth.height,
        "attribution_accuracy_wave": (
            float(waves.select(wave_right.sum()).item()) / waves.height if waves.height else None
        ),
        "inflated_steps": truth.height,
    }
