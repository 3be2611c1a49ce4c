"""The analysis over a sliding window, for ``spanwatch follow``: the recent steps and telemetry through the
post-run method itself (``network.analyse_telemetry``, ``foreign.with_foreign``, then ``blame.attribute``),
reduced to what is happening now.

The window keeps steps and readings younger than ``window_seconds`` before the newest time seen in either
(data time, not the wall clock, so a replayed archive is read the same way as a live one): memory follows
the window, never the run. The window must hold enough clean steps for each rank's baseline; the figures
are then read over the steps that ended in the last ``recent_seconds``, so an episode shows as soon as the
first slowed step and the telemetry of its time are in, not diluted over the whole window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import polars as pl

from analyzer import blame, foreign, network, physics, schemas
from analyzer.attribution import beat, pipeline
from analyzer.thresholds import Thresholds


@dataclass(frozen=True)
class Settings:
    """How the window is read.

    Attributes:
        window_seconds: steps and readings kept (the baseline is taken over them).
        recent_seconds: the figures are means over the steps that ended this long before the newest one.
        skew_seconds: a known host-minus-switch clock skew, or None to estimate it as the analysis does.
    """

    window_seconds: float = 60.0
    recent_seconds: float = 5.0
    skew_seconds: float | None = None


@dataclass
class Figures:
    """What the network did to the recent steps.

    Attributes:
        steps: (step, rank) rows read (``recent`` of them recent).
        recent: recent (step, rank) rows.
        step_seconds: mean seconds per step, recent steps.
        baseline_seconds: mean clean baseline of the recent steps' ranks.
        communication_seconds: the clean network's time per step (the slowest link's serialization and two
            round trips) plus what episodes added.
        unexplained_seconds: mean excess per recent step that no link's physics explains.
        network_seconds: link -> mean seconds per recent step attributed to the link (every link known).
        network_peak_seconds: link -> the most any one recent step lost on the link (mean over its ranks):
            an episode shorter than a step or two (a burst) shows here, diluted in the mean.
        steady: link -> (round trip, serialization) seconds.
        events: (link, kind) -> events of the window's telemetry overlapping the recent steps.
        skew_seconds: the host-minus-switch skew applied.
        newest: the newest step end, or None.
    """

    steps: int = 0
    recent: int = 0
    step_seconds: float | None = None
    baseline_seconds: float | None = None
    communication_seconds: float | None = None
    unexplained_seconds: float | None = None
    network_seconds: dict[str, float] = field(default_factory=dict)
    network_peak_seconds: dict[str, float] = field(default_factory=dict)
    steady: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    events: dict[tuple[str, str], int] = field(default_factory=dict)
    skew_seconds: float = 0.0
    newest: datetime | None = None


class Window:
    """Recent steps and readings, bounded by ``settings.window_seconds``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.steps = schemas.empty("steps")
        # The run's first steps, kept past the window: the job's own beat (a DiLoCo sync every N steps
        # seen through interval lines) needs more repeats than a window holds (``beat.STEPS_READ``).
        self.first_steps = schemas.empty("steps")
        self._beat: tuple[beat.Period, ...] = ()
        self._beat_rows = 0  # first_steps' rows the beat was read from: it is read again only as they grow
        self._readings: list[pl.DataFrame] = []
        self.newest: datetime | None = None
        self.unplaced = 0  # step rows without a wall clock: they cannot be placed in time, so are not kept

    def add_steps(self, rows: pl.DataFrame) -> None:
        """Keep new ``schemas.STEPS`` rows (rows without any time are counted, not kept)."""
        placed = rows.filter(pl.col("end_time").is_not_null() | pl.col("start_time").is_not_null())
        self.unplaced += rows.height - placed.height
        if placed.height:
            self.steps = pl.concat([self.steps, placed], how="vertical_relaxed")
            self._keep_first(placed)
            self._advance(placed.select(pl.coalesce("end_time", "start_time").max()).item())

    def _keep_first(self, placed: pl.DataFrame) -> None:
        first = self.first_steps["step"].min() if self.first_steps.height else placed["step"].min()
        if first is None:
            return
        early = placed.filter(pl.col("step") < first + beat.STEPS_READ)  # type: ignore[operator]
        if early.height:
            self.first_steps = pl.concat([self.first_steps, early], how="vertical_relaxed")

    def beat(self) -> tuple[beat.Period, ...]:
        """The job's own beat, read from the run's first steps (again only when more of them came)."""
        if self.first_steps.height != self._beat_rows:
            self._beat, self._beat_rows = pipeline.read_beat(self.first_steps), self.first_steps.height
        return self._beat

    def add_readings(self, rows: pl.DataFrame) -> None:
        """Keep new ``schemas.TELEMETRY`` rows."""
        if rows.height:
            self._readings.append(rows)
            self._advance(rows["time"].max())  # type: ignore[arg-type]

    def _advance(self, newest: datetime | None) -> None:
        if newest is not None and (self.newest is None or newest > self.newest):
            self.newest = newest
        self._prune()

    def cutoff(self) -> datetime | None:
        """The oldest time kept."""
        return None if self.newest is None else self.newest - timedelta(seconds=self.settings.window_seconds)

    def _prune(self) -> None:
        cutoff = self.cutoff()
        if cutoff is None:
            return
        self.steps = self.steps.filter(pl.coalesce("end_time", "start_time") >= cutoff)
        kept, states = [], []
        for frame in self._readings:
            if not frame.height:
                continue
            if frame["time"].min() < cutoff:  # type: ignore[operator]
                states.append(frame.filter((pl.col("time") < cutoff) & (pl.col("metric") == physics.UP)))
            if frame["time"].max() >= cutoff:  # type: ignore[operator]
                kept.append(frame.filter(pl.col("time") >= cutoff) if frame["time"].min() < cutoff else frame)  # type: ignore[operator]
        # A link state sent on change (gNMI ON_CHANGE oper-status) is not read again until it changes: the
        # last one read before the window is its state at the window's start.
        carried = pl.concat(states, how="vertical_relaxed") if states else pl.DataFrame()
        if carried.height:
            last = physics.last_states(carried)
            kept.insert(0, last.with_columns(time=pl.lit(cutoff).cast(carried.schema["time"])))
        self._readings = kept

    def readings(self) -> pl.DataFrame:
        """Every reading in the window."""
        if not self._readings:
            return pl.DataFrame(schema=schemas.TELEMETRY)
        self._readings = [pl.concat(self._readings, how="vertical_relaxed")]
        return self._readings[0]


def compute(window: Window, members: pl.DataFrame, job: blame.JobFigures, thresholds: Thresholds) -> Figures:
    """The analysis of the window, read over its recent steps.

    Args:
        window: the steps and readings.
        members: ``topology.link_members`` output (the links and their fibre).
        job: the job's figures (its traffic class decides which queue is read).
        thresholds: event detection levels.

    Returns:
        The figures (empty when the window holds no step).
    """
    links = sorted(set(members["link"].to_list()))
    if window.steps.is_empty():
        zeros = dict.fromkeys(links, 0.0)
        return Figures(network_seconds=zeros, network_peak_seconds=dict(zeros))
    net = network.analyse_telemetry(window.readings().lazy(), thresholds, members, job.traffic_class)
    # Another sender in the job's class, read as the post-run analysis reads it, against the fastest step
    # the window holds.
    events = foreign.with_foreign(
        net.events, net.physics, window.steps, job.bytes_per_step, job.traffic_class
    )
    blamed = blame.attribute(
        window.steps,
        net.physics,
        net.ends,
        net.round_trips,
        members,
        job,
        window.settings.skew_seconds,
        beat_periods=window.beat(),
    )
    return _read(blamed, events, links, window.settings.recent_seconds)


def _read(blamed: blame.Blame, events: pl.DataFrame, links: list[str], recent_seconds: float) -> Figures:
    steps = blamed.steps.filter(pl.col("end_time").is_not_null())
    out = Figures(steps=steps.height, skew_seconds=float(blamed.summary["skew_seconds"] or 0.0))  # type: ignore[arg-type]
    out.steady = {
        link: (rtt, serialization)
        for link, rtt, serialization in blamed.steady.select(
            "link", "round_trip_seconds", "serialization_seconds"
        ).iter_rows()
    }
    out.network_seconds = dict.fromkeys(sorted({*links, *out.steady}), 0.0)
    out.network_peak_seconds = dict(out.network_seconds)
    if steps.is_empty():
        return out
    newest: datetime = steps["end_time"].max()  # type: ignore[assignment]
    recent = steps.filter(pl.col("end_time") >= newest - timedelta(seconds=recent_seconds))
    out.newest, out.recent = newest, recent.height
    means = recent.select(
        pl.col("duration_seconds").mean(),
        pl.col("baseline_seconds").mean(),
        pl.col("unexplained_seconds").mean(),
        pl.col("steady_seconds").max(),
    ).row(0)
    out.step_seconds, out.baseline_seconds, out.unexplained_seconds = means[0], means[1], means[2]
    given = blamed.attribution.join(recent.select("step", "rank"), on=["step", "rank"])
    per_link = given.group_by("link").agg(pl.col("attributed_seconds").sum() / recent.height)
    for link, seconds in per_link.iter_rows():
        out.network_seconds[link] = float(seconds)
    ranks = recent.group_by("step").agg(ranks=pl.len())
    per_step = given.group_by("link", "step").agg(pl.col("attributed_seconds").sum()).join(ranks, on="step")
    peaks = per_step.group_by("link").agg((pl.col("attributed_seconds") / pl.col("ranks")).max())
    for link, seconds in peaks.iter_rows():
        out.network_peak_seconds[link] = float(seconds)
    out.communication_seconds = (means[3] or 0.0) + sum(out.network_seconds.values())
    # Events are on the switches' clock; the recent steps' span is moved onto it by the skew applied.
    lo = recent["start_time"].min() - timedelta(seconds=out.skew_seconds)  # type: ignore[operator]
    hi = newest - timedelta(seconds=out.skew_seconds)
    overlapping = events.filter(
        pl.col("link").is_not_null() & (pl.col("start_time") <= hi) & (pl.col("end_time") >= lo)
    )
    for link, kind, count in overlapping.group_by("link", "kind").len().iter_rows():
        out.events[(link, kind)] = int(count)
    return out
