"""Step 4, time: the host-vs-switch clock skew, by cross-correlating each logged line's excess with the
physics integrated over its window."""

from __future__ import annotations

import numpy as np
import polars as pl

from analyzer.attribution.rules import (
    MAX_SKEW_SECONDS,
    SKEW_MAX_LINES,
    SKEW_MIN_CORRELATION,
    SKEW_MIN_GAIN,
    SKEW_MIN_LINES,
    SKEW_PROXY_QUANTILE,
    SKEW_RESOLUTION_SECONDS,
)

# The step's formula (``docs/method.md``; the capitals are ``rules``).
FORMULA = """\
skew = argmax over |s| <= MAX_SKEW_SECONDS, step SKEW_RESOLUTION_SECONDS, of
       corr(excess_i, integral of physics over [lo_i - s, hi_i - s])
kept when corr >= SKEW_MIN_CORRELATION and corr - corr(0) >= SKEW_MIN_GAIN, else 0
(excess here: over the rank's median line, clipped at its SKEW_PROXY_QUANTILE)
"""


def estimate_skew(lines: pl.DataFrame, signal: pl.DataFrame) -> tuple[float, float | None]:
    """The host-minus-switch clock skew that best lines the logged lines' excess up with the physics.

    Each candidate skew within +-``MAX_SKEW_SECONDS`` (every ``SKEW_RESOLUTION_SECONDS``) places every
    line's window on the switch clock and integrates the physics over it (a line of N steps sums N steps'
    worth, so interval averages are read over their whole interval, never as a point); the candidate with
    the largest Pearson correlation between the lines' excess and their integrated physics wins if it
    reaches ``SKEW_MIN_CORRELATION``. A line's edges cut through an episode differently for each skew,
    which resolves the skew finer than the lines are long.

    Args:
        lines: ``lo``, ``hi`` (host clock), ``excess`` (seconds over the line above baseline; outliers
            clipped).
        signal: ``time`` (switch clock, a regular grid), ``physics`` (per typical step).

    Returns:
        (skew seconds, the best correlation, or None when there was nothing to correlate).
    """
    if lines.height < SKEW_MIN_LINES or signal.height < SKEW_MIN_LINES:
        return 0.0, None
    if lines.height > SKEW_MAX_LINES:  # a regular sample keeps the search's cost bounded
        lines = lines.sort("lo").gather_every(lines.height // SKEW_MAX_LINES + 1)
    origin = signal["time"].dt.epoch("ns").min()

    def seconds(times: pl.Series) -> np.ndarray:
        return np.asarray((times.dt.epoch("ns") - origin).to_numpy() / 1e9, dtype=np.float64)

    grid = seconds(signal["time"])
    cell = float(np.median(np.diff(grid)))
    # The running integral of the physics density (per second of time) at each cell's end.
    integral = np.concatenate([[0.0], np.cumsum(signal["physics"].to_numpy() * cell)])
    edges = np.concatenate([[grid[0] - cell / 2], grid + cell / 2])
    los, his = seconds(lines["lo"]), seconds(lines["hi"])
    excess = lines["excess"].to_numpy()
    shift = round(MAX_SKEW_SECONDS / SKEW_RESOLUTION_SECONDS)
    best, best_r, at_zero = 0.0, None, None
    for k in range(-shift, shift + 1):
        skew = k * SKEW_RESOLUTION_SECONDS
        lo, hi = los - skew, his - skew  # the switch clock reads host time - skew
        inside = (lo >= edges[0]) & (hi <= edges[-1])
        if inside.sum() < SKEW_MIN_LINES:
            continue
        physics = np.interp(hi[inside], edges, integral) - np.interp(lo[inside], edges, integral)
        r = _correlation(excess[inside], physics)
        if k == 0:
            at_zero = r
        if r is not None and (best_r is None or r > best_r):
            best, best_r = skew, r
    if best_r is None or best_r < SKEW_MIN_CORRELATION:
        return 0.0, best_r
    if at_zero is not None and best_r - at_zero < SKEW_MIN_GAIN:
        return 0.0, at_zero  # a flat correlation is no evidence against synchronised clocks
    return best, best_r


def _correlation(a: np.ndarray, b: np.ndarray) -> float | None:
    sa, sb = a.std(), b.std()
    if sa == 0 or sb == 0:
        return None
    return float(((a - a.mean()) * (b - b.mean())).mean() / (sa * sb))


def find_skew(lines: pl.DataFrame, signal: pl.DataFrame) -> tuple[float, float | None]:
    """``estimate_skew`` on the lines with a wall clock, each read as its excess over its rank's typical
    line (no baseline yet: the baselines need the physics the skew places), clipped at the
    ``SKEW_PROXY_QUANTILE`` so that no outlier line decides the correlation.

    Args:
        lines: ``lines.read_lines`` output.
        signal: ``episode.grid_physics``' signal.
    """
    placed = lines.filter(pl.col("lo").is_not_null())
    typical = pl.col("per_step").median().over("rank")
    over = ((pl.col("per_step") - typical) * pl.col("n")).clip(lower_bound=0.0)
    proxy = placed.select("lo", "hi", excess=over)
    top = proxy["excess"].quantile(SKEW_PROXY_QUANTILE) or 0.0
    proxy = proxy.with_columns(pl.col("excess").clip(upper_bound=top))
    return estimate_skew(proxy, signal)
