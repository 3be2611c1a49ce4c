"""Another sender in the job's traffic class: bytes on a link end that the whole job cannot have sent.

The job's class may carry more than the job: another tenant's flows marked into it, an incast of other
hosts. Where that traffic leaves no queue standing, no drop and no pause, no event rule sees it, yet the
class carried it. Conservation sees it: the job sends ``job_bytes_per_step`` each way per communicating
step across all its links together, and never runs faster than its fastest step. So a reading in which one
end of one link transmitted more of the job's class than the whole job could send in that reading's
interval, every step at its fastest and every step overlapping the interval whole (``interval / fastest
+ 2``: a step started before the interval and one ending after it), carried someone else's bytes. A queue
draining after a pause holds only the step in flight, since a synchronous job waits for each collective
before sending the next, and the two whole steps cover it. A job whose steps are all the same speed at
the link's full rate is never read as foreign: the bound is what the job could send, not what it did.
Bytes the job lost it sends again, and RDMA's go-back-N resends all that followed the loss, so a foreign
reading that a loss on its link overlaps is the job's own resending as likely as another sender's: no event.

The rule reads the class's transmitted bytes per link end (``analyzer.physics``: ``sent``), so it needs
the job class, the job's bytes per step and its step log. Runs of foreign readings of one end become one
``burst`` event (the congestion family: another sender in the job's class, as a surge that squeezed the
other classes is).
"""

from __future__ import annotations

import polars as pl

from analyzer import physics, schemas
from analyzer.attribution import episode
from analyzer.events import ONE_READING_SHARE
from analyzer.kinds import KINDS

OVERLAP = 2
"""Steps an interval can overlap beyond ``interval / fastest`` whole ones: one begun before it, one ending
after it."""
LOSSES = sorted({"drops"} | {k.name for k in KINDS.values() if k.family in ("optical", "down")})
"""Event kinds that lose the job's bytes (queue drops, frames a failing wave corrupts or drops), which the
job then sends again (``_unexplained``)."""


def fastest_step_seconds(steps: pl.DataFrame) -> float | None:
    """The shortest step of the log (an interval line's average per step), None without a positive, finite
    one (a NaN compares above every number in polars, and would leave the ceiling NaN)."""
    durations = steps["duration_seconds"]
    durations = durations.filter(durations.is_finite() & (durations > 0))
    return float(durations.min()) if len(durations) else None  # type: ignore[arg-type]


def foreign_events(
    readings: pl.DataFrame, job_bytes_per_step: float, fastest_seconds: float, job_class: str
) -> pl.DataFrame:
    """``burst`` events where a link end sent more of the job's class than the whole job can have sent.

    Args:
        readings: ``analyzer.physics.READINGS`` rows (only ``sent`` is read).
        job_bytes_per_step: the bytes the job sends each way per communicating step, over all its links.
        fastest_seconds: the job's fastest step (``fastest_step_seconds``).
        job_class: the job's traffic class, the events' queue.

    Returns:
        ``schemas.EVENTS`` rows (``event_id`` and ``interface`` null: the end's members are read together).
    """
    end = ["link", "device"]
    sent = readings.filter(pl.col("quantity") == "sent")
    # An end's members are read in one request, a few milliseconds apart: such readings are one round,
    # which covers the time since the end's previous round. Half a poll tells a round from the next, as it
    # tells a counter read twice in one poll from a new poll (``events.ONE_READING_SHARE``).
    gap = pl.col("time").diff().over(end).dt.total_microseconds() / 1e6
    rounds = (
        sent.lazy()
        .sort(*end, "time")
        .with_columns(
            round=(gap.is_null() | (gap > ONE_READING_SHARE * episode.poll_seconds(sent))).cum_sum()
        )
        .group_by(*end, "round")
        .agg(pl.col("time").max(), pl.col("amount").sum())
        .sort(*end, "time")
    )
    seconds = (pl.col("time") - pl.col("start")).dt.total_microseconds() / 1e6
    judged = (
        rounds.with_columns(start=pl.col("time").shift(1).over(end))
        .filter(pl.col("start").is_not_null())
        .with_columns(rate=pl.col("amount") / seconds)
        .with_columns(foreign=pl.col("amount") > job_bytes_per_step * (seconds / fastest_seconds + OVERLAP))
    )
    run = (pl.col("foreign") != pl.col("foreign").shift(1)).fill_null(True).cum_sum().over(end)
    runs = (
        judged.with_columns(run=run)
        .filter("foreign")
        .group_by(*end, "run")
        .agg(
            start_time=pl.col("start").min(),
            end_time=pl.col("time").max(),
            worst=pl.col("rate").max(),
            samples=pl.len().cast(pl.Int64),
        )
    )
    duration = (pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 1e6
    found = runs.with_columns(
        kind=pl.lit("burst"),
        queue=pl.lit(job_class),
        metrics=pl.lit(physics.SENT),
        duration_seconds=duration,
    )
    return schemas.conform_lazy(schemas.EVENTS, found).collect()


def with_foreign(
    events: pl.DataFrame,
    readings: pl.DataFrame,
    steps: pl.DataFrame,
    job_bytes_per_step: float | None,
    job_class: str | None,
) -> pl.DataFrame:
    """``events`` with the foreign-traffic ``burst`` events added (where the job's figures allow the rule),
    in the order and numbering of ``analyzer.network``: by start time, ``event_id`` from 0."""
    fastest = fastest_step_seconds(steps)
    if not job_bytes_per_step or job_class is None or fastest is None or readings.height == 0:
        return events
    found = _unexplained(foreign_events(readings, job_bytes_per_step, fastest, job_class), events)
    if found.height == 0:
        return events
    both = pl.concat([events, found.cast(events.schema)]).sort("start_time", "kind", "link", "device")
    return both.with_columns(event_id=pl.int_range(pl.len(), dtype=pl.Int64()))


def _unexplained(found: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """The ``found`` events that no loss on their link overlaps: a class that lost bytes sends them again
    (RDMA's go-back-N resends all that followed), so past the ceiling it may be carrying the job's own."""
    losing = events.filter(pl.col("kind").is_in(LOSSES)).select("link", lo="start_time", hi="end_time")
    overlapping = (
        found.with_row_index("found")
        .join(losing, on="link")
        .filter((pl.col("start_time") <= pl.col("hi")) & (pl.col("end_time") >= pl.col("lo")))
    )
    return found.with_row_index("found").join(overlapping, on="found", how="anti").drop("found")
