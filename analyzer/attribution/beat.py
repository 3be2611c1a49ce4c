"""Step 6, the job's own beat: the periods of its own that slow some of its lines (DiLoCo's outer sync every
N steps, a checkpoint every M), found at the resolution of its log. A line holding one is then judged
against the lines holding as many (``excess.baselines``), so that the job's own rhythm is read neither as
network excess nor as noise."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl

from analyzer.attribution.rules import (
    BEAT_LONGEST_STEPS,
    BEAT_PERIODS,
    CYCLE_MIN_REPEATS,
    CYCLE_NOISE_FLOOR_SECONDS,
    CYCLE_SLOW_QUANTILE,
    MAD_TO_SIGMA,
    SIGNIFICANT_SIGMAS,
)

# The step's formula (``docs/method.md``; the capitals are ``rules``).
FORMULA = """\
hits(line; P, p) = how many of the line's n steps s have s mod P = p
heavy lines      = the lines with more hits than the fewest (every line of the job's usual length)
beat             = the smallest P <= BEAT_LONGEST_STEPS (at its likeliest phase p) whose heavy lines'
                   CYCLE_SLOW_QUANTILE of excess stands SIGNIFICANT_SIGMAS * noise over the other lines'
                   median (noise: their MAD; at least CYCLE_MIN_REPEATS lines of each), the other lines'
                   upper quantile within that level, and its slow heavy lines (past that level) unlikely
                   by chance: hypergeometric tail * periods and phases tried < one-sided tail of
                   SIGNIFICANT_SIGMAS; then, on what that period leaves, the next, up to BEAT_PERIODS
on the beat      : a job that sends only on its beat (no typical rate on any link end: steady.sends_sparsely)
                   has network time only on its beat's steps: a line holding any gives them all of its own
                   (by their placed weights, evenly where placement gave them none), with the line's link mix
"""
Period = tuple[int, int]  # (P steps, phase p)
# The steps read from a run's first: twice the repeats the longest period needs.
STEPS_READ = 2 * CYCLE_MIN_REPEATS * BEAT_LONGEST_STEPS


def hits(last: np.ndarray, n: int | np.ndarray, period: Period) -> np.ndarray:
    """How many steps of each line (its ``last`` step and its ``n`` steps) fall on the period's phase."""
    size, phase = period
    counts: np.ndarray = (last - phase) // size - (last - n - phase) // size
    return counts


def find(lines: pl.DataFrame) -> list[Period]:
    """The job's own periods, from its lines of its usual length.

    Every line, not only those without a physical cause: the physics cannot tell the job's own traffic
    from an episode's (a sync's burst fills the queue as congestion does), and the quantiles of
    ``stands_out`` hold through the lines an episode slows (a minority of a run). One time per line for
    the whole job, the median over its ranks: a beat is the job's, a straggler one rank's. Periods up to
    ``BEAT_LONGEST_STEPS``, read over the first ``STEPS_READ`` steps: a period repeats, the first ones show
    it (and the search costs the square of the steps read).

    Args:
        lines: ``step`` (a line's last), ``n``, ``per_step``.
    """
    if lines.is_empty():
        return []
    read = lines.filter(pl.col("step") < pl.col("step").min() + STEPS_READ)
    job = read.group_by("step").agg(pl.col("n").first(), pl.col("per_step").median())
    n = int(job["n"].mode().min())  # type: ignore[arg-type]
    job = job.filter(pl.col("n") == n).sort("step")
    last = job["step"].to_numpy()
    excess = (job["per_step"].to_numpy() - float(np.median(job["per_step"].to_numpy()))) * n
    periods: list[Period] = []
    while len(periods) < BEAT_PERIODS:
        period = _first_period(last, n, excess)
        if period is None:
            break
        periods.append(period)
        excess = _left_by(excess, hits(last, n, period))
    return periods


def _first_period(last: np.ndarray, n: int, excess: np.ndarray) -> Period | None:
    """The smallest period that passes ``stands_out``, each period tried at its likeliest phase."""
    if last.size < 2 * CYCLE_MIN_REPEATS:
        return None
    first = int(last[0]) - n + 1
    # Each step of the span, its line's excess (nan: a step of no line read here).
    by_step = np.full(int(last[-1]) - first + 1, np.nan)
    for k in range(n):
        by_step[last - k - first] = excess
    longest = min(by_step.size // CYCLE_MIN_REPEATS, BEAT_LONGEST_STEPS)
    # Every (period, phase) looked at: the family a chance match hides in.
    tried = longest * (longest + 1) // 2
    for size in range(2, longest + 1):
        phase = _likeliest_phase(last, n, excess, size, by_step, first)
        if phase is not None and stands_out(excess, hits(last, n, (size, phase)), tried):
            return size, phase
    return None


def _likeliest_phase(
    last: np.ndarray, n: int, excess: np.ndarray, size: int, by_step: np.ndarray, first: int
) -> int | None:
    """The phase whose heavy lines' low quantile of excess is the highest (a screen; ``stands_out`` judges).

    A period of at least a line's length puts at most one hit in a line: the steps, laid out ``size`` to a
    row from a step of phase 0, give each phase's hit lines as a column (one pass over the steps per
    period). A shorter period hits every line: each phase's hits are counted line by line.
    """
    if size >= n:
        pad = first % size
        laid = np.full(-(-(pad + by_step.size) // size) * size, np.nan)
        laid[pad : pad + by_step.size] = by_step
        values = laid.reshape(-1, size)
    else:
        counts = hits(last[:, None], n, (size, np.arange(size)[None, :]))  # type: ignore[arg-type]
        values = np.where(counts > counts.min(axis=0), excess[:, None], np.nan)
    # A step of no line refutes nothing (inf); the screen's quantile is taken over every row.
    rank = int(CYCLE_SLOW_QUANTILE * (values.shape[0] - 1))
    low = np.partition(np.where(np.isnan(values), np.inf, values), rank, axis=0)[rank]
    best = int(np.argmax(low))
    return best if np.isfinite(low[best]) else None


def stands_out(excess: np.ndarray, counts: np.ndarray, tried: int = 1) -> bool:
    """Whether the lines with more hits are all slower than the others by more than the others' noise, as
    a sync slows every step it falls in, while the others agree within it (the single-step cycle's rule,
    ``excess.cycle``, on lines: a period whose light lines still hold two kinds, such as half of the sync
    lines of twice the period, is not the beat), and not by chance among the ``tried`` periods and phases:
    episodes and stalls slow lines too, and a few hits of one of many periods can all fall on them.

    One significance level, the test every line's excess passes: the chance test over every period and
    phase tried is what guards against a false beat (``excess.cycle``, which has none, asks for
    ``CYCLE_SLOW_LEVELS``). A sync at 4-6 sigma of the line noise is a beat all the same.
    """
    heavy = counts > counts.min()
    if heavy.sum() < CYCLE_MIN_REPEATS or (~heavy).sum() < CYCLE_MIN_REPEATS:
        return False
    light = excess[~heavy]
    usual = float(np.median(light))
    noise = float(np.median(np.abs(light - usual))) * MAD_TO_SIGMA
    level = SIGNIFICANT_SIGMAS * max(noise, CYCLE_NOISE_FLOOR_SECONDS)
    agree = float(np.quantile(light, 1 - CYCLE_SLOW_QUANTILE)) - usual <= level
    slow = excess - usual > level
    if not agree or float(np.quantile(excess[heavy], CYCLE_SLOW_QUANTILE)) - usual <= level:
        return False
    chance = _chance(int(excess.size), int(slow.sum()), int(heavy.sum()), int(slow[heavy].sum()))
    # The test every step uses (SIGNIFICANT_SIGMAS, one-sided), over the whole family tried (Bonferroni).
    return chance * tried < math.erfc(SIGNIFICANT_SIGMAS / math.sqrt(2)) / 2


def _chance(lines: int, slow: int, heavy: int, heavy_slow: int) -> float:
    """The chance that ``heavy`` lines drawn at random from ``lines``, of which ``slow`` are slow, hold at
    least ``heavy_slow`` slow ones (the hypergeometric tail: Fisher's exact test, one-sided)."""

    def log_choose(a: int, b: int) -> float:
        return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)

    total = log_choose(lines, heavy)
    top = min(heavy, slow)
    return sum(
        math.exp(log_choose(slow, x) + log_choose(lines - slow, heavy - x) - total)
        for x in range(heavy_slow, top + 1)
        if heavy - x <= lines - slow
    )


def _left_by(excess: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The excess a period leaves: each line's, less the median of the lines with as many hits."""
    out = excess.copy()
    for count in np.unique(counts):
        out[counts == count] -= np.median(excess[counts == count])
    return out


def beat_columns(periods: list[Period]) -> list[pl.Expr]:
    """Per line, its hits of each period (``beat_0``, ...): part of its baseline's key."""
    before = pl.col("step") - pl.col("n")  # the step before the line's first
    return [
        ((pl.col("step") - phase) // size - (before - phase) // size).alias(f"beat_{k}")
        for k, (size, phase) in enumerate(periods)
    ]


def on_the_beat(
    steps: pl.DataFrame, shares: pl.DataFrame, periods: Sequence[Period]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A job that sends only on its beat (DiLoCo's sync: ``steady.sends_sparsely``) is held by the network
    only on the beat's steps, so an interval line holding any gives them all of its network time: by their
    placed weights, evenly where placement gave them none (a stall read a poll early lands on the step
    before the sync), each with the line's mix of links.

    Args:
        steps: ``placement.steps_placed``' steps (``rank``, ``line``, ``step``, ``weight``).
        shares: its link shares (``rank``, ``step``, ``link``, ``device``, ``cause``, ``share``).
        periods: the beat (``find``); every period's steps may sync (a checkpoint's cannot be told apart).

    Returns:
        (the steps with their weights moved, the link shares of every step).
    """
    if not periods:
        return steps, shares
    line = ["rank", "line"]
    beat = pl.any_horizontal([(pl.col("step") - phase) % size == 0 for size, phase in periods])
    marked = steps.with_columns(on_beat=beat & (pl.len().over(line) > 1))
    moving = marked.filter(pl.col("on_beat").any().over(line))
    if moving.is_empty():
        return steps, shares
    kept = pl.when("on_beat").then(pl.col("weight")).otherwise(0.0)
    even = pl.when("on_beat").then(1.0 / pl.col("on_beat").sum().over(line)).otherwise(0.0)
    weight = pl.when(kept.sum().over(line) > 0).then(kept / kept.sum().over(line)).otherwise(even)
    moved = moving.with_columns(weight=weight)
    # The line's link mix: each step's normalised shares by its old weight, given to its beat steps.
    old = moving.select("rank", "line", "step", "weight")
    mix = (
        shares.select("rank", "step", "link", "device", "cause", "share")
        .join(old, on=["rank", "step"])
        .filter(pl.col("share") > 0)
        .with_columns(share=pl.col("share") / pl.col("share").sum().over("rank", "step") * pl.col("weight"))
        .sort("share", descending=True)
        .group_by(*line, "link")
        .agg(pl.col("device", "cause").first(), pl.col("share").sum())
    )
    given = moved.filter("on_beat").select(*line, "step").join(mix, on=line)  # the columns the tables read
    steps = pl.concat([marked.join(moving, on=["rank", "step"], how="anti"), moved]).drop("on_beat")
    shares = pl.concat([shares.join(old, on=["rank", "step"], how="anti"), given], how="diagonal_relaxed")
    return steps, shares
