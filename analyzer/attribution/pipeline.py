"""The method's entry: one call per step of ``../shared/design/measurement.md``, in the order of
``docs/method.md`` (its formulas and every number are there):

1. ``lines``: each logged line (a step, or an interval of N steps weighted by N) and its measure (exposed
   communication where measured, else the step's duration);
2. ``steady``: the clean network's cost per link (round trips, serialization of the job's bytes);
3. ``episode``: what each link added, from the physics of the job's traffic class, on a regular grid;
4. ``skew``: the host-vs-switch clock skew, by cross-correlation;
5. ``step_windows``: each step's physics per link, over its collectives' windows;
6. ``beat``: the job's own periods (DiLoCo's sync, checkpoints) at the resolution of its log;
7. ``excess``: each line's excess over its clean baseline (of its cycle position and beat), and its noise;
8. ``reconcile``: each link's physics scaled by its own gain, shared as the airport game, weighed against
   the excess by their errors; the rest ``unexplained``;
9. ``placement``: an interval line's iterations placed where its network time fell (a job that sends only on
   its beat: on the beat's steps); then the tables.
"""

from __future__ import annotations

import polars as pl

from analyzer.attribution import beat
from analyzer.attribution.episode import floor, poll_seconds, read_grid
from analyzer.attribution.excess import judge
from analyzer.attribution.grid import end_rates, grid_physics
from analyzer.attribution.lines import expand, read_lines
from analyzer.attribution.placement import steps_placed
from analyzer.attribution.reconcile import network_time
from analyzer.attribution.skew import find_skew
from analyzer.attribution.steady import JobFigures, link_bytes, sends_sparsely, steady
from analyzer.attribution.step_windows import lines_with_physics, physics_per_step
from analyzer.attribution.tables import Blame, outputs


def attribute(
    parsed_steps: pl.DataFrame,
    readings: pl.DataFrame,
    ends: pl.DataFrame,
    round_trips: pl.DataFrame,
    members: pl.DataFrame,
    job: JobFigures,
    skew_seconds: float | None = None,
    evidence: pl.DataFrame | None = None,
    beat_periods: tuple[beat.Period, ...] | None = None,
) -> Blame:
    """The whole method: steps split, steady figures, physics, skew, reconciliation, placement.

    Args:
        parsed_steps: ``schemas.STEPS`` rows of every log.
        readings: ``physics.READINGS`` rows of the telemetry.
        ends: ``physics.MEMBERS`` rows.
        round_trips: ``link``, ``rtt_seconds`` (probes).
        members: ``topology.link_members`` output.
        job: the job's figures.
        skew_seconds: a known host-minus-switch skew, or None to estimate it.
        evidence: optional ``step``, ``rank``, ``communication`` (exposed communication per step from a
            profiler or NCCL timings): the step's measure instead of its duration; a step without it takes
            its log's own communication time where the log has one (``logged_communication_seconds``).
        beat_periods: the job's own beat where ``parsed_steps`` are too few to show it (a live window reads
            it from the run's first steps: ``read_beat``); None: found from ``parsed_steps``.

    Returns:
        The blame.
    """
    lines = read_lines(parsed_steps, evidence)
    steps = expand(lines.lazy()).collect()
    median_step = float(lines["duration"].median() or 0.0)  # type: ignore[arg-type]
    poll = poll_seconds(readings)
    # The amounts per grid cell and link end are read a few links at a time (``grid``: peak memory).
    grid, totals = read_grid(readings, median_step)
    rates = end_rates(grid, totals)
    links = steady(members, ends, round_trips, link_bytes(rates, job, median_step))
    cells, signal = grid_physics(grid, totals, rates, ends, links, poll)
    del totals
    correlation = None
    if skew_seconds is None:
        skew_seconds, correlation = find_skew(lines, signal)
    steps, caused = physics_per_step(steps, cells, grid, median_step, skew_seconds)
    lines = lines_with_physics(lines, steps, caused)
    judged, size, periods = judge(lines, beat_periods)
    around = max(1, round(poll / median_step)) if median_step > 0 else 1
    judged, gains, shares, steps = network_time(judged, caused, steps, around)
    steps, shares = steps_placed(steps, judged, shares, floor(cells), grid, gains, skew_seconds)
    if sends_sparsely(rates):
        steps, shares = beat.on_the_beat(steps, shares, periods)
    summary: dict[str, object] = {
        "skew_seconds": skew_seconds,
        "skew_correlation": correlation,
        "skew_estimated": correlation is not None,
        "communication_cycle_steps": size,
        "job_beat": [{"every_steps": every, "phase": phase} for every, phase in periods],
        "evidence": dict(lines.group_by("evidence").len().sort("evidence").iter_rows()),
        "interval_lines": int((lines["n"] > 1).sum()),
        "lines_not_placeable": int(lines["lo"].is_null().sum()),
    }
    return outputs(steps, judged, shares, links, summary)


def read_beat(parsed_steps: pl.DataFrame) -> tuple[beat.Period, ...]:
    """The job's own beat from ``schemas.STEPS`` rows (``beat.find`` over their lines)."""
    return tuple(beat.find(read_lines(parsed_steps, None)))
