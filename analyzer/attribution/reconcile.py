"""Step 3, reconciliation: each link's physics scaled by its measured gain, shared between a step's links
(the airport game), and weighed against the measured excess by their errors."""

from __future__ import annotations

import polars as pl

from analyzer.attribution.excess import reads_a_gain
from analyzer.attribution.lines import STEP as _STEP
from analyzer.attribution.rules import (
    AGREE_SIGMAS,
    ALLOWANCE_SIGMAS,
    ALONE_SHARE,
    GATE_SIGMAS,
    MAD_TO_SIGMA,
    MIN_ERROR_LINES,
    PHYSICS_ERROR,
    PHYSICS_ERROR_FLOOR,
    SIGNIFICANT_SIGMAS,
)

# The step's formula (``docs/method.md``; the capitals are ``rules``).
FORMULA = """\
gain(link, block) = median(g) over lines where the link holds >= ALONE_SHARE of the physics, has a cause in
                    every step of the line, and the excess is past SIGNIFICANT_SIGMAS * noise, with
                    the physics past the noise or most of the block's other lines past it too
                    (else the block's joint gain, else 1)
scaled            = sum over steps of the airport-game (Shapley) split of max over links of
                    max(gain * physics - slack(link), 0)   (steady.slack: a phase ends with its slowest link)
g(line, link)     = the gain at which the link's steps cost the line its excess: sum over them of
                    max(g * physics - slack, 0) = excess   (excess / physics where the link has no slack)
network           = 0 unless excess > GATE_SIGMAS * noise and the block's mean excess is measured;
                    w * excess + (1 - w) * scaled   where |excess - scaled| <= AGREE_SIGMAS * sqrt(vp + vn),
                    min(scaled, excess + ALLOWANCE_SIGMAS * noise) elsewhere
network           = min(network, impaired + poll)   (causality: impaired, the most seconds one link of the
                    line carried a cause inside its span, known to a poll: analyzer.attribution.impaired)
vp = (err * scaled)^2 + (spread / 2)^2,  vn = noise^2,  w = vp / (vp + vn)
spread = (max - min of min(scaled, excess + ALLOWANCE_SIGMAS * noise) over the lines within a poll) *
         min(1, poll / the line's span)            (what reading the physics a poll off could change)
err = the MAD of (excess - scaled) / scaled beyond the timing noise, in [PHYSICS_ERROR_FLOOR, PHYSICS_ERROR]
      (PHYSICS_ERROR with fewer than MIN_ERROR_LINES lines)
unexplained = max(excess, 0) - network
"""


def shapley(per_link: pl.LazyFrame, keys: list[str]) -> pl.LazyFrame:
    """Split a step's physical extra time (the largest link's: a phase ends with its slowest link) over its
    links: each increment of lateness equally among the links at least that late (the airport game).

    Args:
        per_link: ``keys``, ``link``, ``physics``.
        keys: the columns naming one step.

    Returns:
        ``per_link`` with ``share`` (summing to the largest ``physics`` of the step).
    """
    ordered = per_link.sort([*keys, "physics"])
    k = pl.int_range(pl.len()).over(keys)
    n = pl.len().over(keys)
    layer = (pl.col("physics") - pl.col("physics").shift(1).over(keys).fill_null(0.0)) / (n - k)
    return ordered.with_columns(share=layer.cum_sum().over(keys))


def line_ratios(lines: pl.DataFrame, cells: pl.DataFrame, slack: pl.DataFrame | None) -> pl.DataFrame:
    """Per (rank, line, link): the gain ``g`` at which the link's steps would cost the line its excess,
    each step ``max(g * physics - slack, 0)`` (``network_time``): the excess over the physics where the
    link has no slack; with slack, the steps whose scaled physics passes it are the largest ``k``, and
    ``g = (excess + k * slack) / (their physics)`` for the ``k`` consistent with that.

    Args:
        lines: ``measured`` output.
        cells: ``rank``, ``line``, ``link``, ``physics`` (unscaled, per step of the line).
        slack: ``link``, ``slack`` (None: none).

    Returns:
        ``rank``, ``line``, ``link``, ``physics`` (the line's), ``ratio``, ``caused_steps`` (the line's
        steps where the link has physics).
    """
    group = ["rank", "line", "link"]
    steps = cells.select(*group, "physics")
    if slack is None:
        steps = steps.with_columns(slack=pl.lit(0.0))
    else:
        steps = steps.join(slack, on="link", how="left").with_columns(pl.col("slack").fill_null(0.0))
    excess = lines.select("rank", "excess", line="step")
    ranked = (
        steps.join(excess, on=["rank", "line"])
        .sort([*group, "physics"], descending=[False, False, False, True])
        .with_columns(
            k=pl.int_range(1, pl.len() + 1).over(group),
            top=pl.col("physics").cum_sum().over(group),
            after=pl.col("physics").shift(-1).over(group),
        )
        .with_columns(g=(pl.col("excess") + pl.col("k") * pl.col("slack")) / pl.col("top"))
    )
    passes = pl.col("g") * pl.col("physics") >= pl.col("slack")
    stops = pl.col("after").is_null() | (pl.col("g") * pl.col("after") < pl.col("slack"))
    consistent = pl.col("g").filter(passes & stops).first()
    return ranked.group_by(group).agg(
        pl.col("physics").sum(),
        ratio=pl.coalesce(consistent, pl.col("g").last()),
        caused_steps=(pl.col("physics") > 0).sum(),
    )


def link_gains(lines: pl.DataFrame, cells: pl.DataFrame, slack: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per (rank, line, link): the measured excess per unit of the link's own physics.

    Loss recovery and congestion-control cuts have no magnitude in 1 s counters, but their timing and their
    link do, and each cause on each link is off by its own factor: the gain is read per link, over each run
    of consecutive lines where the link has a cause (its block), from the lines where it is the only cause
    (``ALONE_SHARE`` of the line's physics), in every step of the line, and which read a gain
    (``reads_a_gain``). A link never alone takes its line's joint gain (``measured``), else 1. A line's
    ratio is ``line_ratios``' (a link with slack costs a step only past it).

    Args:
        lines: ``measured`` output.
        cells: ``rank``, ``line``, ``link``, ``physics`` (unscaled, per step of the line).
        slack: ``steady.slack`` (None: none).

    Returns:
        ``rank``, ``line``, ``link``, ``gain``.
    """
    per_line = line_ratios(lines, cells, slack)
    order = (
        lines.select("rank", "n", "excess", "noise", "joint_gain", line="step")
        .sort("rank", "line")
        .with_columns(no=pl.int_range(pl.len()).over("rank"))
    )
    rows = per_line.join(order, on=["rank", "line"]).sort("rank", "link", "no")
    block = ((pl.col("no") - pl.col("no").shift(1).over("rank", "link")) != 1).fill_null(True)
    # Columns first: a window inside another window's group would see only that group.
    alone = pl.col("physics") >= ALONE_SHARE * pl.col("physics").sum().over("rank", "line")
    rows = rows.with_columns(block=block.cum_sum().over("rank", "link"))
    # A line the cause only enters or leaves holds steps without it, and whatever slowed those (a
    # checkpoint, a straggler, a clock off by a poll) would read as the gain of the whole block.
    spans = pl.col("caused_steps") >= pl.col("n")
    rows = rows.with_columns(readable=alone & spans & reads_a_gain("rank", "link", "block"))
    own = pl.col("ratio").filter("readable").median().over("rank", "link", "block")
    return rows.select("rank", "line", "link", gain=pl.coalesce(own, pl.col("joint_gain"), pl.lit(1.0)))


def timing_spread(lines: pl.LazyFrame, around: int, poll: float) -> pl.LazyFrame:
    """``spread``: how much a line's scaled physics could change were it read one poll interval earlier or
    later: a reading covers its whole interval, so physics that rises or falls within one is known only
    that well in time (an episode's first and last steps). Within ``around`` lines of it (one poll each
    way); a line longer than a poll moves only ``poll`` of its span into its neighbours' physics."""
    size = 2 * around + 1
    # What a line's step log did not show did not happen there: a line's physics past its excess (and
    # the allowance) is no physics a shift of a poll could bring into its neighbour.
    shown = pl.col("excess").clip(lower_bound=0.0) + ALLOWANCE_SIGMAS * pl.col("noise")
    scaled = pl.min_horizontal("scaled", shown)
    high = scaled.rolling_max(size, min_samples=1, center=True).over("rank", order_by="step")
    low = scaled.rolling_min(size, min_samples=1, center=True).over("rank", order_by="step")
    span = pl.col("n") * pl.col("duration")
    moved = pl.when(span > poll).then(poll / span).otherwise(1.0)
    return lines.with_columns(spread=(high - low) * moved)


def physics_error() -> pl.Expr:
    """The relative error of the rank's scaled physics, read from the lines where both measures saw a
    cost: what their differences spread beyond the timing noise, relative to the physics (robust: MAD),
    between ``PHYSICS_ERROR_FLOOR`` and ``PHYSICS_ERROR`` (the bound when too few lines tell)."""
    both = (pl.col("scaled") > 0) & (pl.col("excess") > SIGNIFICANT_SIGMAS * pl.col("noise"))
    residual = ((pl.col("excess") - pl.col("scaled")) / pl.col("scaled")).filter(both)
    spread = MAD_TO_SIGMA * (residual - residual.median()).abs().median()
    relative_noise = (pl.col("noise") / pl.col("scaled")).filter(both).median()
    beyond = (spread**2 - relative_noise**2).clip(lower_bound=0.0).sqrt()
    told = both.sum() >= MIN_ERROR_LINES
    error = pl.when(told).then(beyond.clip(PHYSICS_ERROR_FLOOR, PHYSICS_ERROR)).otherwise(PHYSICS_ERROR)
    return error.over("rank")


def reconcile(lines: pl.LazyFrame) -> pl.LazyFrame:
    """Each line's network time: its scaled physics, never more than the measured excess allows.

    A line whose excess is past ``GATE_SIGMAS`` of its noise may be blamed its scaled physics up to the
    excess plus ``ALLOWANCE_SIGMAS`` of noise (the physics is steadier than one line's timing); a line
    within the noise is blamed nothing (the physics smeared over a poll reaches its neighbours; a cost
    below the noise cannot be told from it). A checkpoint or a stall inside an episode keeps its compute
    time as compute (``unexplained``). The quiet steps of a communication cycle are never blamed.

    Args:
        lines: ``measured`` output with ``scaled`` (the line's physics, each link's scaled by its gain) and
            ``spread`` (``timing_spread``).

    Returns:
        ``lines`` with ``network`` and ``unexplained`` (seconds over the line's steps).
    """
    above = pl.col("excess") > GATE_SIGMAS * pl.col("noise")
    # Two measures of one quantity: the line's excess (off by its timing noise) and its scaled physics
    # (off by ``physics_error`` of itself, and by half its change within a poll: ``timing_spread``).
    # Where they agree within their errors, the estimate weighs each by the inverse of its variance; where
    # the excess is far above the physics the rest is compute (a checkpoint, a stall), and the scaled
    # physics stands, capped.
    physics_var = (physics_error() * pl.col("scaled")) ** 2 + (pl.col("spread") / 2) ** 2
    noise_var = pl.col("noise") ** 2
    weight = physics_var / (physics_var + noise_var)
    agree = (pl.col("excess") - pl.col("scaled")).abs() <= AGREE_SIGMAS * (physics_var + noise_var).sqrt()
    blended = weight * pl.col("excess") + (1 - weight) * pl.col("scaled")
    capped = pl.col("scaled").clip(upper_bound=pl.col("excess") + ALLOWANCE_SIGMAS * pl.col("noise"))
    network = (
        pl.when(~pl.col("communicates") | ~pl.col("block_measured") | ~above | (pl.col("scaled") <= 0))
        .then(0.0)
        .when(agree)
        .then(blended)
        .otherwise(capped)
    )
    # Causality: no more than one of the line's links was impaired inside it, to a poll (``with_ceiling``).
    if "ceiling" in lines.collect_schema().names():
        network = pl.min_horizontal(network, pl.col("ceiling").fill_null(float("inf")))
    out = lines.with_columns(network=network)
    return out.with_columns(unexplained=pl.col("excess").clip(lower_bound=0.0) - pl.col("network"))


def network_time(
    judged: pl.DataFrame,
    caused: pl.DataFrame,
    steps: pl.DataFrame,
    around: int,
    slack: pl.DataFrame,
    poll: float,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Each line's network time: its links' physics scaled by their gains (``link_gains``), shared per step
    (``shapley``), summed over the line and weighed against its excess (``reconcile``).

    Args:
        judged: ``excess.judge`` output.
        caused: ``step_windows.physics_per_step``' caused steps.
        steps: ``step_windows.physics_per_step``' steps.
        around: lines in one poll interval (``timing_spread``).
        slack: ``steady.slack``: a link's physics counts only past it.
        poll: the telemetry's poll interval, seconds (``timing_spread``).

    Returns:
        (the judged lines with ``network`` and ``unexplained``, the gains, the steps' link shares, the steps
        with their scaled physics ``step_physics``).
    """
    gains = link_gains(judged, caused, slack)
    beyond = (pl.col("physics") * pl.col("gain") - pl.col("slack").fill_null(0.0)).clip(lower_bound=0.0)
    scaled = (
        caused.join(gains, on=["rank", "line", "link"])
        .join(slack, on="link", how="left")
        .with_columns(physics=beyond)
        .drop("slack")
    )
    shares = shapley(scaled.lazy(), _STEP).collect()
    step_total = shares.group_by(_STEP).agg(step_physics=pl.col("physics").max())
    steps = steps.join(step_total, on=_STEP, how="left").with_columns(pl.col("step_physics").fill_null(0.0))
    # Only the steps with physics: a line without any scales to nothing (filled below).
    line_scaled = (
        steps.select("rank", "line", "step")
        .join(step_total, on=_STEP)
        .group_by("rank", "line")
        .agg(scaled=pl.col("step_physics").sum())
    )
    scaled_lines = judged.lazy().join(line_scaled.lazy().rename({"line": "step"}), on=_STEP, how="left")
    scaled_lines = scaled_lines.with_columns(pl.col("scaled").fill_null(0.0))
    return reconcile(timing_spread(scaled_lines, around, poll)).collect(), gains, shares, steps
