"""Step 1, the excess: each line's seconds over its clean baseline (per rank, cycle position and time), its
noise, and which lines may read a gain; the job's communication cycle."""

from __future__ import annotations

import polars as pl

from analyzer.attribution import beat
from analyzer.attribution.rules import (
    BASELINE_SECONDS,
    BASELINE_WINDOWS_PER_SPAN,
    CYCLE_MIN_REPEATS,
    CYCLE_NOISE_FLOOR_SECONDS,
    CYCLE_SLOW_LEVELS,
    CYCLE_SLOW_QUANTILE,
    CYCLE_STEPS,
    CYCLE_TOLD_POLLS,
    CYCLES,
    MAD_TO_SIGMA,
    SIGNIFICANT_SIGMAS,
)

# The step's formula (``docs/method.md``; the capitals are ``rules``).
FORMULA = """\
baseline = median(measure of clean lines: same rank, same cycle position, within +-BASELINE_SECONDS/2)
excess   = (measure - baseline) * n                         seconds over the line's n steps
sigma    = MAD_TO_SIGMA * median over clean lines(|measure - baseline| * sqrt(n))
noise    = sigma * sqrt(n)
cycle    = smallest N in CYCLES whose slow position's CYCLE_SLOW_QUANTILE exceeds the next position's
           median by CYCLE_SLOW_LEVELS * SIGNIFICANT_SIGMAS * noise, the others agreeing within it;
           1 where N steps span more than CYCLE_TOLD_POLLS polls and the job does not send sparsely
"""


def cycle(durations: pl.DataFrame) -> int:
    """The job's communication cycle: the smallest N for which exactly one position (step mod N) is slower
    than all the others by more than the clean steps' noise while the others agree within it (DiLoCo
    syncs once every N steps), else 1.

    Args:
        durations: ``step``, ``seconds`` of clean single steps.
    """
    if durations.height < CYCLE_MIN_REPEATS * max(CYCLES):
        return 1
    # A cycle repeats: a run's first CYCLE_STEPS clean steps show it as well as all of them.
    durations = durations.sort("step").head(CYCLE_STEPS)
    for size in CYCLES:
        groups = durations.group_by(position=pl.col("step") % size).agg(
            median=pl.col("seconds").median(),
            low=pl.col("seconds").quantile(CYCLE_SLOW_QUANTILE),
            mad=(pl.col("seconds") - pl.col("seconds").median()).abs().median(),
        )
        ordered = groups.sort("median", descending=True)
        rest = ordered["median"].to_list()[1:]
        noise = float(groups["mad"].median() or 0.0) * MAD_TO_SIGMA  # type: ignore[arg-type]
        level = SIGNIFICANT_SIGMAS * max(noise, CYCLE_NOISE_FLOOR_SECONDS)
        # Every step of the slow position is slow (a sync), not half of them (a checkpoint every 2N).
        if ordered["low"][0] - rest[0] > CYCLE_SLOW_LEVELS * level and rest[0] - rest[-1] <= level:
            return size
    return 1


def communication_cycle(size: int, step_seconds: float, poll: float, sparse: bool) -> int:
    """The cycle ``cycle`` found, as a communication cycle: its quiet positions send nothing (``baselines``).

    A slow position every N steps is a sync (DiLoCo) or a checkpoint (compute); step times cannot tell them
    apart, the job class's counters can: a cycle spanning more than ``CYCLE_TOLD_POLLS`` polls leaves most
    counter windows without the job's bytes if it syncs only then (``steady.sends_sparsely``). A job seen
    sending in most windows communicates every step: its slow position is compute (the beat keys its
    baseline: ``beat.find``), and its cycle is 1. A shorter cycle is read from the step times alone.

    Args:
        size: ``cycle``'s answer.
        step_seconds: the typical step.
        poll: the telemetry's usual interval.
        sparse: whether the job sends in fewer than half of the windows.
    """
    told = size * step_seconds > CYCLE_TOLD_POLLS * poll
    return 1 if told and not sparse else size


def baselines(lines: pl.LazyFrame, size: int, periods: tuple[beat.Period, ...] = ()) -> pl.LazyFrame:
    """Per rank, position in the cycle (for single steps) and hits of the job's own beat: the median and
    noise of clean lines' seconds per step (clean: no physical cause); all lines when none is clean. A line
    with a wall clock takes the median of the clean lines around it (``with_local_baselines``) where there are
    any.

    Args:
        lines: ``rank``, ``step``, ``n``, ``per_step``, ``physics`` (the line's summed estimate), and
            ``lo`` where known.
        size: the communication cycle (``cycle``).
        periods: the job's own beat (``beat.find``).
    """
    position = pl.when(pl.col("n") == 1).then(pl.col("step") % size).otherwise(-1)
    beats = beat.beat_columns(list(periods))
    keyed = lines.with_columns(*beats, position=position)
    key = ["rank", "position", *(column.meta.output_name() for column in beats)]
    clean = pl.col("physics") <= 0
    med = pl.coalesce(pl.col("per_step").filter(clean).median(), pl.col("per_step").median())
    # Columns over groups rather than grouped tables joined back: each line is one row throughout.
    keyed = keyed.with_columns(baseline=med.over(key))
    if "lo" in keyed.collect_schema().names():
        keyed = with_local_baselines(keyed, key)
        keyed = keyed.with_columns(baseline=pl.coalesce("local", "baseline")).drop("local")
    # A line's seconds per step average its n steps: its deviation times the root of n is one step's.
    deviation = (pl.col("per_step") - pl.col("baseline")).abs() * pl.col("n").sqrt()
    sigma = pl.coalesce(deviation.filter(clean).median(), deviation.median()) * MAD_TO_SIGMA
    # In a cycle (DiLoCo's outer sync every N steps) the positions far quicker than the slowest carry no
    # communication: no network time can be theirs.
    keyed = keyed.with_columns(sigma=sigma.over("rank")).with_columns(
        usual=pl.col("baseline").median().over("rank", "position")
    )
    quiet = (pl.col("position") >= 0) & (
        pl.col("usual") < pl.col("usual").max().over("rank") - SIGNIFICANT_SIGMAS * pl.col("sigma")
    )
    return keyed.with_columns(communicates=~quiet).drop(*key[1:], "usual")


def with_local_baselines(keyed: pl.LazyFrame, by: list[str]) -> pl.LazyFrame:
    """``keyed`` with ``local``: per line with a wall clock, the median seconds per step of the clean lines of
    its key (``by``: its rank, cycle position and beat) within +-``BASELINE_SECONDS`` / 2 (null where no
    clean line is near, or the line has no wall clock). Step times drift (a shared host, a data pipeline,
    thermal limits), and a run-wide median reads the drift as excess, or hides an episode under it.
    """
    every = round(BASELINE_SECONDS * 1e6) // BASELINE_WINDOWS_PER_SPAN
    # Windows of BASELINE_SECONDS every 1 / BASELINE_WINDOWS_PER_SPAN of that (a rolling median per line
    # costs a median of a window's lines per line). Window w spans (w -+ half) * every: a line lies in the
    # BASELINE_WINDOWS_PER_SPAN windows from its first on, and takes the one centred nearest to it (the
    # later of two as near).
    half = BASELINE_WINDOWS_PER_SPAN // 2
    ticks = pl.col("lo").dt.epoch("us")
    first = ticks // every - (half - 1)
    clean = pl.col("per_step").filter(pl.col("physics") <= 0)
    windows = (
        keyed.filter(pl.col("lo").is_not_null())
        .select(*by, "per_step", "physics", window=pl.int_ranges(first, first + BASELINE_WINDOWS_PER_SPAN))
        .explode("window")
        .group_by(*by, "window")
        .agg(local=clean.median())
    )
    nearest = keyed.with_columns(window=(ticks + every // 2) // every)
    joined = nearest.join(windows, on=[*by, "window"], how="left", nulls_equal=True, maintain_order="left")
    return joined.drop("window")


def reads_a_gain(*block: str) -> pl.Expr:
    """Whether a line's ratio of ``excess`` to ``physics`` measures the physics' gain in its ``block``: the
    line's excess is past the noise, and the physics shows in it, either on its own (past the line's noise)
    or as an excess past the noise in most of the block's other lines (physics whose size the counters miss,
    such as loss recovery, shows over its whole block). Physics within the noise of a block whose other
    lines mostly show nothing: one line past the noise there is something else's (a straggler's wait, a
    checkpoint, a stall), and its ratio would scale every line of the block by it; a line alone in its
    block has no other line to vouch for it."""
    past = pl.col("excess") > SIGNIFICANT_SIGMAS * pl.col("noise")
    visible = pl.col("physics") >= pl.col("noise")
    # A majority, not the median line's excess: the median of two lines is their mean, and one straggler's
    # line would carry the other. A majority of the other lines: a line cannot vouch for itself.
    mostly = (past.sum() - past.cast(pl.Int64) > (~past).sum()).over(*block)
    return past & (visible | mostly)


def measured(lines: pl.LazyFrame) -> pl.LazyFrame:
    """Each line's measured excess over its baseline, its noise, and the joint gain of its block.

    A block is a run of consecutive lines with a physical cause on any link; its joint gain is the measured
    excess per unit of (unscaled) physics over its lines that read a gain (``reads_a_gain``): the fallback
    for a link that is never the only cause in its own block.

    Args:
        lines: ``baselines`` output.

    Returns:
        ``lines`` with ``excess`` (seconds over the line's steps), ``noise``, ``joint_gain`` and
        ``block_measured`` (the block's mean excess is past its standard error).
    """
    excess = ((pl.col("per_step") - pl.col("baseline")) * pl.col("n")).alias("excess")
    caused = pl.col("physics") > 0
    ordered = lines.with_columns(excess, noise=pl.col("sigma") * pl.col("n").sqrt()).sort("rank", "step")
    block = (caused != caused.shift(1).over("rank")).fill_null(True).cum_sum().over("rank")
    ratio = (pl.col("excess") / pl.col("physics")).filter("reads")
    # A block whose mean excess lies within its standard error measured no cost: a line of it past the
    # noise by chance is still noise.
    block_noise = (pl.col("sigma") ** 2 * pl.col("n")).sum().sqrt() / pl.col("n").sum()
    block_measured = pl.col("excess").sum() / pl.col("n").sum() > SIGNIFICANT_SIGMAS * block_noise
    return (
        ordered.with_columns(block=block)
        .with_columns(reads=caused & reads_a_gain("rank", "block"))
        .with_columns(
            joint_gain=ratio.median().over("rank", "block"),
            block_measured=block_measured.over("rank", "block"),
        )
        .drop("block", "reads")
    )


def rhythm(
    lines: pl.DataFrame, periods: tuple[beat.Period, ...] | None = None
) -> tuple[int, tuple[beat.Period, ...]]:
    """The job's communication cycle (``cycle``, read from the clean single steps) and its own beat
    (``periods``, found from the lines when not given: ``beat.find``), read over every rank's lines."""
    singles = lines.filter((pl.col("n") == 1) & (pl.col("physics") <= 0)).select("step", seconds="per_step")
    return cycle(singles), tuple(beat.find(lines)) if periods is None else periods


def judge(
    lines: pl.DataFrame,
    periods: tuple[beat.Period, ...] | None = None,
    read: tuple[int, tuple[beat.Period, ...]] | None = None,
) -> tuple[pl.DataFrame, int, tuple[beat.Period, ...]]:
    """Each line's excess, noise and joint gain (``measured``) over its baseline (``baselines``) in the job's
    ``rhythm`` (``read`` over every rank's lines when ``lines`` are some ranks' only), that cycle and that
    beat."""
    size, periods = rhythm(lines, periods) if read is None else read
    return measured(baselines(lines.lazy(), size, periods)).collect(), size, periods
