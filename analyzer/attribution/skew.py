"""Step 4, time: the host-vs-switch clock skew, by cross-correlating each logged line's excess with the
physics integrated over its window."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import polars as pl

from analyzer.attribution.rules import (
    MAX_SKEW_SECONDS,
    SKEW_MAX_LINES,
    SKEW_MIN_CORRELATION,
    SKEW_MIN_GAIN,
    SKEW_MIN_LINES,
    SKEW_PROXY_QUANTILE,
    SKEW_RANGE_STANDARD_ERRORS,
    SKEW_RESOLUTION_SECONDS,
)

# The step's formula (``docs/method.md``; the capitals are ``rules``).
FORMULA = """\
skew = argmax over |s| <= MAX_SKEW_SECONDS, step SKEW_RESOLUTION_SECONDS, of
       corr(excess_i, integral of physics over [lo_i - s, hi_i - s])
kept when corr >= SKEW_MIN_CORRELATION and corr - corr(0) >= SKEW_MIN_GAIN, else 0
(excess here: over the rank's median line, clipped at its SKEW_PROXY_QUANTILE)
range = the skews s with corr(s) >= corr(best) - SKEW_RANGE_STANDARD_ERRORS * (1 - corr(best)^2) / sqrt(n - 1)
"""


class Skew(NamedTuple):
    """The host-minus-switch clock skew applied, and what the logs said of it."""

    seconds: float
    correlation: float | None  # the best correlation; None: nothing to correlate
    low: float | None = None  # the skews the logs fit as well as the best (SKEW_RANGE_STANDARD_ERRORS)
    high: float | None = None

    def summary(self, given: bool) -> dict[str, object]:
        """The analysis summary's clock: the skew applied, whether it was given, the best correlation, and
        the skews the logs fit as well (``skew_range_seconds``; None when given or nothing correlated)."""
        return {
            "skew_seconds": self.seconds,
            "skew_correlation": self.correlation,
            "skew_given": given,
            "skew_range_seconds": None if self.low is None else [self.low, self.high],
        }


def estimate_skew(lines: pl.DataFrame, signal: pl.DataFrame) -> Skew:
    """The host-minus-switch clock skew that best lines the logged lines' excess up with the physics.

    Each candidate skew within +-``MAX_SKEW_SECONDS`` (every ``SKEW_RESOLUTION_SECONDS``) places every
    line's window on the switch clock and integrates the physics over it (a line of N steps sums N steps'
    worth, so interval averages are read over their whole interval, never as a point); the candidate with
    the largest Pearson correlation between the lines' excess and their integrated physics wins if it
    reaches ``SKEW_MIN_CORRELATION``. A line's edges cut through an episode differently for each skew,
    which resolves the skew finer than the lines are long; a line that holds a whole episode under many
    skews does not, and the skews that fit within ``SKEW_RANGE_STANDARD_ERRORS`` standard errors of the
    best are the range the logs allow.

    Args:
        lines: ``lo``, ``hi`` (host clock), ``excess`` (seconds over the line above baseline; outliers
            clipped).
        signal: ``time`` (switch clock, a regular grid), ``physics`` (per typical step).

    Returns:
        The skew (0 when the search found none), the best correlation and the range.
    """
    if lines.height < SKEW_MIN_LINES or signal.height < SKEW_MIN_LINES:
        return Skew(0.0, None)
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
    fits = correlations(
        seconds(lines["lo"]), seconds(lines["hi"]), lines["excess"].to_numpy(), edges, integral
    )
    if not fits:
        return Skew(0.0, None)
    best = max(fits, key=lambda skew: fits[skew][0])
    best_r, n = fits[best]
    error = SKEW_RANGE_STANDARD_ERRORS * (1 - best_r**2) / np.sqrt(max(n - 1, 1))
    # A fit as good as the best's up to rounding is as good (a perfect fit has no standard error).
    allowed = [skew for skew, (r, _) in fits.items() if r >= best_r - error or np.isclose(r, best_r)]
    at_zero = fits.get(0.0, (None, 0))[0]
    if best_r < SKEW_MIN_CORRELATION:
        return Skew(0.0, best_r)
    if at_zero is not None and best_r - at_zero < SKEW_MIN_GAIN:
        # A flat correlation is no evidence against synchronised clocks.
        return Skew(0.0, at_zero, min(*allowed, 0.0), max(*allowed, 0.0))
    return Skew(best, best_r, min(allowed), max(allowed))


def correlations(
    los: np.ndarray, his: np.ndarray, excess: np.ndarray, edges: np.ndarray, integral: np.ndarray
) -> dict[float, tuple[float, int]]:
    """Per candidate skew, the correlation of the lines' excess with the physics over their windows read on
    the switch clock, and how many lines lay inside the physics' grid (``integral`` at its ``edges``)."""
    shift = round(MAX_SKEW_SECONDS / SKEW_RESOLUTION_SECONDS)
    fits: dict[float, tuple[float, int]] = {}
    for k in range(-shift, shift + 1):
        skew = k * SKEW_RESOLUTION_SECONDS
        lo, hi = los - skew, his - skew  # the switch clock reads host time - skew
        inside = (lo >= edges[0]) & (hi <= edges[-1])
        if inside.sum() < SKEW_MIN_LINES:
            continue
        physics = np.interp(hi[inside], edges, integral) - np.interp(lo[inside], edges, integral)
        r = _correlation(excess[inside], physics)
        if r is not None:
            fits[skew] = (r, int(inside.sum()))
    return fits


def _correlation(a: np.ndarray, b: np.ndarray) -> float | None:
    sa, sb = a.std(), b.std()
    if sa == 0 or sb == 0:
        return None
    return float(((a - a.mean()) * (b - b.mean())).mean() / (sa * sb))


def find_skew(lines: pl.DataFrame, signal: pl.DataFrame) -> Skew:
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
