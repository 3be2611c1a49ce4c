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

import tempfile
from pathlib import Path

import polars as pl

from analyzer import frames, physics, schemas
from analyzer.attribution import beat
from analyzer.attribution.episode import floor, poll_seconds, read_grid
from analyzer.attribution.excess import communication_cycle, judge, rhythm
from analyzer.attribution.grid import grid_physics, read_amounts
from analyzer.attribution.impaired import with_ceiling
from analyzer.attribution.lines import STEP as _STEP
from analyzer.attribution.lines import expand, read_lines
from analyzer.attribution.placement import steps_placed
from analyzer.attribution.reconcile import network_time
from analyzer.attribution.skew import Skew, find_skew
from analyzer.attribution.steady import JobFigures, link_bytes, sends_sparsely, slack, steady
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
    # The caller hands the parsed steps over: at thousands of ranks they are millions of rows, and from here
    # on the step side is worked a few ranks at a time (``by_ranks``), each frame let go once read.
    del parsed_steps, evidence
    median_step = float(lines["duration"].median() or 0.0)  # type: ignore[arg-type]
    median_line = float((lines["duration"] * lines["n"]).median() or 0.0)  # type: ignore[arg-type]
    poll = poll_seconds(readings)
    # The amounts per grid cell and link end are read a few links at a time (``grid``: peak memory).
    grid, totals = read_grid(readings, median_step)
    amounts = read_amounts(grid, totals, ends, poll)
    del totals
    links = steady(members, ends, round_trips, link_bytes(amounts.rates, job, median_step))
    sparse = sends_sparsely(amounts.rates)
    cells, signal = grid_physics(grid, amounts, ends, links, sparse)
    found = find_skew(lines, signal) if skew_seconds is None else Skew(skew_seconds, None)
    summary: dict[str, object] = found.summary(given=skew_seconds is not None)
    skew_seconds, correlation = found.seconds, found.correlation
    del signal
    read = lines_read(lines, poll, median_step)
    ranks = by_ranks(lines)
    del lines
    caused_parts = with_physics(ranks, cells, grid, median_step, skew_seconds)
    # The rhythm reads these of every rank's lines (``excess.rhythm``), not the lines' other columns.
    size, periods = rhythm(
        in_order([p.select("order", "step", "n", "per_step", "physics") for p in ranks]), beat_periods
    )
    size = communication_cycle(size, median_step, poll, sparse)
    syncs = periods if sparse else []  # a job that sends only on its beat: its syncs
    beats = [{"every_steps": every, "phase": phase} for every, phase in periods]
    summary.update(skew_estimated=correlation is not None, communication_cycle_steps=size, job_beat=beats)
    summary.update(read)
    around = max(1, round(poll / median_line)) if median_line > 0 else 1  # lines in one poll
    with StepParts(len(ranks)) as parts:
        while ranks:
            part, caused = ranks.pop(0), caused_parts.pop(0)
            steps = expand(part.lazy()).collect()
            judged = judged_of(part, periods, size, cells, grid, skew_seconds, poll)
            del part
            judged, gains, shares, steps = network_time(judged, caused, steps, around, slack(links), poll)
            del caused
            steps, shares = steps_placed(steps, judged, shares, floor(cells), grid, gains, skew_seconds, poll)
            steps, shares = beat.on_the_beat(steps, shares, syncs)
            parts.add(outputs(steps, judged, shares, links, summary))
            del judged, gains, shares, steps
        return parts.joined(links, summary)


def lines_read(lines: pl.DataFrame, poll: float, median_step: float) -> dict[str, object]:
    """The summary's account of the lines: by the evidence that judged them, how many average several
    iterations and how many have no wall clock, and what bounds placement inside an interval line (the
    report says it): the readings' interval against a typical iteration."""
    return {
        "evidence": dict(lines.group_by("evidence").len().sort("evidence").iter_rows()),
        "interval_lines": int((lines["n"] > 1).sum()),
        "lines_not_placeable": int(lines["lo"].is_null().sum()),
        "poll_seconds": poll,
        "typical_step_seconds": median_step,
    }


def with_physics(
    ranks: list[pl.DataFrame], cells: pl.DataFrame, grid: pl.DataFrame, median_step: float, skew: float
) -> list[pl.DataFrame]:
    """Each part's lines with their physics (``lines_with_physics``: the parts replaced in ``ranks`` as they
    go), and each part's caused steps, kept for the second pass (rows only where a link has physics; the
    steps are made again there, every rank's otherwise)."""
    caused_parts = []
    for k, part in enumerate(ranks):
        steps, caused = steps_of(part, cells, grid, median_step, skew)
        ranks[k] = lines_with_physics(part, steps, caused)
        caused_parts.append(caused)
    return caused_parts


def judged_of(
    part: pl.DataFrame,
    periods: tuple[beat.Period, ...],
    size: int,
    cells: pl.DataFrame,
    grid: pl.DataFrame,
    skew: float,
    poll: float,
) -> pl.DataFrame:
    """Some ranks' lines judged (``excess.judge``), each with its causal ceiling (``impaired.with_ceiling``)."""
    judged = judge(part.drop("order"), periods, (size, periods))[0]
    return with_ceiling(judged, part, cells, grid, skew, poll)


def by_ranks(lines: pl.DataFrame) -> list[pl.DataFrame]:
    """``lines`` in parts of whole ranks, in rank order, each of at most ``physics.STEP_CHUNK_ROWS`` step rows
    (a rank with more is a part alone), each line with its place in ``lines`` (``order``). Every step of the
    method after the skew reads a line with its own rank's lines only, or the whole job's rhythm
    (``excess.rhythm``)."""
    numbered = lines.with_row_index("order")
    per_rank = numbered.group_by("rank").agg(rows=pl.col("n").sum()).sort("rank")
    groups: list[list[int]] = [[]]
    rows = 0
    for rank, count in per_rank.iter_rows():
        if groups[-1] and rows + count > physics.STEP_CHUNK_ROWS:
            groups.append([])
            rows = 0
        groups[-1].append(rank)
        rows += count
    return [numbered.filter(pl.col("rank").is_in(group)) for group in groups]


def steps_of(
    lines: pl.DataFrame, cells: pl.DataFrame, grid: pl.DataFrame, median_step: float, skew: float
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Some ranks' steps and caused steps (``physics_per_step`` of their lines' steps)."""
    return physics_per_step(expand(lines.lazy()).collect(), cells, grid, median_step, skew)


def in_order(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """The parts' lines together, in the order they were read (``order``)."""
    return pl.concat(parts).sort("order").drop("order")


class StepParts:
    """The parts' blames, put together as one once every part is blamed (``joined``). With several parts,
    each part's steps wait on disk (Arrow IPC in a temporary folder, removed on exit): held in memory, the
    parts blamed so far and the lines still to blame would make the peak (4e6 steps: 0.4 GB of each)."""

    def __init__(self, count: int) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="spanwatch-steps-") if count > 1 else None
        self._steps: list[pl.DataFrame] = []  # one part: in memory
        self._files: list[Path] = []  # several: on disk
        self._attribution: list[pl.DataFrame] = []
        self._set: set[str] = set()  # the columns some step gives a value

    def __enter__(self) -> StepParts:
        return self

    def __exit__(self, *_: object) -> None:
        if self._folder is not None:
            self._folder.cleanup()

    def add(self, blame: Blame) -> None:
        """One part's blame (its steps in (step, rank) order, as ``outputs`` gives them)."""
        steps = blame.steps
        self._set |= {name for name in steps.columns if steps.get_column(name).null_count() < steps.height}
        if self._folder is not None:
            path = Path(self._folder.name) / f"{len(self._files):05d}.arrow"
            steps.write_ipc(path, compression="lz4")  # compressed: read back into memory, not mapped
            self._files.append(path)
        else:
            self._steps.append(steps)
        self._attribution.append(blame.attribution)

    def joined(self, links: pl.DataFrame, summary: dict[str, object]) -> Blame:
        """Every part's steps in (step, rank) order, as ``outputs`` gives them (``frames.sorted_by``); a
        column no step sets (a profiler's, the Inspector's, the top link where nothing was blamed) stays one
        null, not a null per step (0.5 GB at 4e6 steps)."""
        names = list(schemas.STEP_ANALYSIS)
        kept = [name for name in names if name in self._set or name in _STEP]  # the keys, even of no step
        unset = [pl.lit(None, schemas.STEP_ANALYSIS[name]).alias(name) for name in names if name not in kept]
        ordered = self._ordered(kept).with_columns(unset).select(names)
        attribution = pl.concat(self._attribution)
        self._attribution.clear()
        return Blame(ordered, attribution, links, summary)

    def _ordered(self, columns: list[str]) -> pl.DataFrame:
        """These columns of every part's steps in (step, rank) order (``frames.sorted_by``: held about once)."""
        if self._files:
            read = pl.scan_ipc(self._files).select(columns)  # every row's text, held once by ``shared_text``
            return frames.sorted_by(frames.shared_text(read.collect()), _STEP)
        if not self._steps:
            return pl.DataFrame(schema={name: schemas.STEP_ANALYSIS[name] for name in columns})
        return frames.sorted_by(self._taken(columns), _STEP)

    def _taken(self, columns: list[str]) -> pl.DataFrame:
        """The parts in memory as one frame of their chunks (not copied), no longer held here."""
        steps = pl.concat(self._steps, rechunk=False).select(columns)
        self._steps.clear()
        return steps


def read_beat(parsed_steps: pl.DataFrame) -> tuple[beat.Period, ...]:
    """The job's own beat from ``schemas.STEPS`` rows (``beat.find`` over their lines)."""
    return tuple(beat.find(read_lines(parsed_steps, None)))
