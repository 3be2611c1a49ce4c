"""Blame from evidence: what each link cost each step, from the steps' measured excess and the physics of
the job's queue (``../shared/design/measurement.md``).

1. Split each step: with step durations only (the strongest evidence the shipped logs carry), a step's
   *excess* is its duration above the clean baseline of its rank around it (clean: no physical cause on
   any link), compared within the job's communication cycle (DiLoCo syncs every N steps, and its quiet
   steps are never blamed); a log line that averages N iterations is one interval of N steps, weighted by
   N, never read as one step; its network time goes to the iterations where the physics says it fell
   (``place``).
2. Steady cost per link (``steady``): the probed round trip (else the fibre's) and the serialization of the
   job's bytes per step at the link's capacity, reported as their own figures.
3. Episode cost per link from physics (``step_physics``), for the job's traffic class only: other traffic
   in the class takes capacity, a queue stands in the class's egress, or the far end holds the class in its
   ingress queue (queueing: occupancy over drain rate), a wave
   down or a port's lower speed shrinks it (lost capacity), the job's bytes a downed link moved onto the
   others load them (the downed link's reroute, ``rerouted``),
   PFC pauses stop it for a share of the time, lost bytes (drops, FCS errors) are sent again after a round
   trip. A step over one and a half typical ones is read over every typical-length window in it, the
   worst deciding (``collective_windows``): a checkpoint costs no more than its neighbours, a collective
   the network held is read where the episode began.
4. Reconciliation: each link's physics is scaled by its own gain, the measured excess per unit of that
   link's physics where it was the only cause (``link_gains``); a step's links share its scaled physics
   as the airport game shares a runway (``shapley``: a phase ends with its slowest link); a line is blamed
   its scaled physics weighed against its excess by their errors (``reconcile``), never more than the
   excess allows and nothing within the noise; what physics cannot explain stays ``unexplained``.
5. Time: the host-vs-switch clock skew is estimated by correlating each line's excess with the physics
   integrated over its window (``estimate_skew``) and applied; logs without a wall clock are not placed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import polars.selectors as cs

from analyzer import physics

_STEP = ["step", "rank"]
MAD_TO_SIGMA = 1.4826  # the MAD of a normal distribution times this is its standard deviation
# Past saturation the job's share of its queue is set by its congestion control, not by the counters: a
# floor of 5% of the capacity keeps the estimate finite; the measured excess then sets the amount.
MIN_SHARE = 0.05
FRAME_BYTES = 4096.0  # a RoCE frame at the usual 4 KiB MTU: the bytes an FCS error loses
OTHER_SHARE = 0.01  # other traffic in the job's class under this share of the capacity is no cause
RATE_NOISE_SIGMAS = 3.0  # ... nor under this many deviations of the job's own rate (``job_rates``)
NOISE_SHARE = 0.1  # ... up to this share of the capacity (episodes over half the run inflate the deviation)
# A job link carries at least this share of the job's cross-site bytes (ECMP over its links); below it a
# link's job-class traffic is someone else's.
JOB_LINK_SHARE = 0.01
# A physical estimate under a millisecond per step is no cause: step times resolve no less (their noise is
# milliseconds), and the scorer calls a step with less than that clean.
PHYSICS_FLOOR_SECONDS = 1e-3
SIGNIFICANT_SIGMAS = 3.0  # an excess past this many noise deviations is measured, not noise
GATE_SIGMAS = 1.0  # a line's excess past this many noise deviations lets its scaled physics stand
PHYSICS_ERROR = 0.25  # the largest relative error of a line's scaled physics (1 s counters, step timing)
PHYSICS_ERROR_FLOOR = 0.1  # ... and the least: the physics is never taken as exact
MIN_ERROR_LINES = 10  # lines with both measures needed to read the physics' error from the data
AGREE_SIGMAS = 5.0  # excess and scaled physics within this many combined deviations measure the same thing
EDGE_SHARE = 0.5  # a run's ramp is what comes before (after) its first (last) level of this share of its peak
STALL_SHARE = 0.5  # a run of an interval's time the network took at least this much of is one stall
ALONE_SHARE = 0.8  # a link with this share of a line's physics is its only cause (its gain is readable)
BASELINE_SECONDS = 60.0  # a line's clean baseline: the median of the clean lines within this window around it
ALLOWANCE_SIGMAS = 2.0  # the cap keeps this much step-time noise above the physics (never cut a real step)
# Clock skew searched over +-MAX_SKEW: NTP keeps hosts within milliseconds; a misconfigured host may be off
# by seconds. Beyond this the log is not placed by the search (the control run's shift is never "found").
MAX_SKEW_SECONDS = 2.5
SKEW_RESOLUTION_SECONDS = 0.1
SKEW_MIN_CORRELATION = 0.3  # below it the cross-correlation found nothing: the skew stays 0
SKEW_MAX_LINES = 50_000  # lines the skew search reads at most (every rank logs the same windows)
SKEW_MIN_GAIN = 0.1  # ... and a skew must correlate this much better than none to be believed
CYCLES = (2, 3, 4, 5, 6, 8, 10, 12, 16)  # communication cycles tried (DiLoCo sync_every, accumulation)
CYCLE_STEPS = 20_000  # clean single steps read to find the cycle


@dataclass(frozen=True)
class JobFigures:
    """What the analysis knows of the job.

    Attributes:
        bytes_per_step: the job's cross-site bytes per step and direction, all links (None: measured).
        traffic_class: the job's traffic class (None: no queue can be read).
    """

    bytes_per_step: float | None = None
    traffic_class: str | None = None


def intervals(steps: pl.DataFrame) -> pl.LazyFrame:
    """One row per logged line (a step, or an interval of N steps), timed, deduplicated per (step, rank).

    Args:
        steps: ``schemas.STEPS`` rows.

    Returns:
        ``rank``, ``step`` (the last of the interval), ``n``, ``lo``, ``hi`` (host clock, null when the log
        has no wall clock), ``duration`` (seconds per step), ``per_step`` (the measure judged: the duration,
        or the step's communication where ``attribute`` is given it), ``source_file``.
    """
    n = (
        pl.when(pl.col("interval_average").fill_null(False))
        .then(pl.col("interval_steps").fill_null(1))
        .otherwise(1)
        .clip(lower_bound=1)
    )
    span_s = pl.coalesce(
        (pl.col("end_time") - pl.col("start_time")).dt.total_nanoseconds() / 1e9,
        pl.col("duration_seconds") * pl.col("n"),
    )
    span = pl.duration(microseconds=(pl.col("span") * 1e6).round().cast(pl.Int64))
    rows = steps.lazy().with_columns(pl.col("rank").fill_null(0), n=n)
    rows = rows.with_columns(span=span_s).filter(pl.col("step").is_not_null() & pl.col("span").is_not_null())
    rows = rows.with_columns(
        lo=pl.coalesce(pl.col("start_time"), pl.col("end_time") - span),
        hi=pl.coalesce(pl.col("end_time"), pl.col("start_time") + span),
    )
    unique = rows.unique(_STEP, keep="first", maintain_order=True)
    per_step = pl.col("span") / pl.col("n")
    return unique.select(
        "rank", "step", "n", "lo", "hi", duration=per_step, per_step=per_step, source_file="source_file"
    )


def expand(lines: pl.LazyFrame) -> pl.LazyFrame:
    """Every step of every interval, its window spaced evenly inside the interval (host clock).

    Returns:
        ``rank``, ``line`` (the interval's last step), ``step``, ``lo``, ``hi``, ``duration``, ``per_step``.
    """
    per = pl.duration(microseconds=(pl.col("duration") * 1e6).round().cast(pl.Int64))
    steps = lines.with_columns(i=pl.int_ranges(0, pl.col("n"))).explode("i")
    return steps.select(
        "rank",
        line="step",
        step=pl.col("step") - pl.col("n") + 1 + pl.col("i"),
        lo=pl.col("lo") + per * pl.col("i"),
        hi=pl.col("lo") + per * (pl.col("i") + 1),
        duration="duration",
        per_step="per_step",
    )


def edges(pieces: pl.DataFrame, line: list[str]) -> pl.DataFrame:
    """An episode's first and last readings, sharpened: a counter read over an interval the episode began
    (or ended) in spreads its part of that interval evenly over all of it. In a run of network time, what
    comes before its first level of at least half its peak (the ramp up) is that level over the ramp's
    last seconds, as many as hold the ramp's network time, and nothing before; likewise the ramp down.

    Args:
        pieces: ``line`` keys, ``k``, ``a``, ``b`` (seconds), ``g``, sorted by ``k`` within each line.
        line: the columns naming one line.
    """
    run = [*line, "region"]
    frame = pieces.with_columns(region=(pl.col("g") > 0).rle_id().over(line))
    big = pl.col("g") >= EDGE_SHARE * pl.col("g").max().over(run)
    k_big = pl.when(big).then(pl.col("k"))
    frame = frame.with_columns(first_k=k_big.min().over(run), last_k=k_big.max().over(run))
    at = pl.col("g").filter(pl.col("k") == pl.col("first_k")).first().over(run)
    at_end = pl.col("g").filter(pl.col("k") == pl.col("last_k")).first().over(run)
    frame = frame.with_columns(up_level=at, down_level=at_end)
    up = (pl.col("g") > 0) & (pl.col("k") < pl.col("first_k"))
    down = (pl.col("g") > 0) & (pl.col("k") > pl.col("last_k"))
    mass = pl.col("g") * (pl.col("b") - pl.col("a"))
    frame = frame.with_columns(
        up_mass=mass.filter(up).sum().over(run),
        up_end=pl.col("b").filter(up).max().over(run),
        down_mass=mass.filter(down).sum().over(run),
        down_start=pl.col("a").filter(down).min().over(run),
    )
    middle = (pl.col("a") + pl.col("b")) / 2
    opens = pl.col("up_end") - pl.col("up_mass") / pl.col("up_level")
    closes = pl.col("down_start") + pl.col("down_mass") / pl.col("down_level")
    g = (
        pl.when(up)
        .then(pl.when(middle >= opens).then(pl.col("up_level")).otherwise(0.0))
        .when(down)
        .then(pl.when(middle < closes).then(pl.col("down_level")).otherwise(0.0))
        .otherwise(pl.col("g"))
    )
    return frame.with_columns(g=g).select(pieces.columns)


def stalls(pieces: pl.DataFrame, line: list[str]) -> pl.DataFrame:
    """A stall, sharpened: a run of pieces with network time (``g`` > 0) where the network took at least
    ``STALL_SHARE`` of the time is one stall (a wave's loss, a pause storm) that a poll's counters smeared
    over their interval; it becomes one block of ``g`` = 1 as long as its network time, centred where the
    run's network time is, in whole pieces (``held``), so the iteration it caught takes all of it, as a
    collective held by the network does. Slower, longer runs (congestion) keep their density.

    Args:
        pieces: ``line`` keys, ``k``, ``a``, ``b`` (seconds), ``g``, sorted by ``k`` within each line.
        line: the columns naming one line.
    """
    seconds = pl.col("b") - pl.col("a")
    run = (pl.col("g") > 0).rle_id().over(line)
    spent = (pl.col("g") * seconds).sum().over(*line, "run")
    length = seconds.sum().over(*line, "run")
    centre = (pl.col("g") * seconds * (pl.col("a") + pl.col("b")) / 2).sum().over(*line, "run") / spent
    lo = pl.max_horizontal(centre - spent / 2, pl.col("a").min().over(*line, "run"))
    hi = pl.min_horizontal(lo + spent, pl.col("b").max().over(*line, "run"))
    # Whole pieces (those whose middle it covers): a piece half stalled would let an iteration end or
    # begin inside the stall, where the held collective ends only with it.
    middle = (pl.col("a") + pl.col("b")) / 2
    inside = ((middle >= lo) & (middle < hi)).cast(pl.Float64)
    stall = (pl.col("g") > 0) & (spent >= STALL_SHARE * length)
    return (
        pieces.with_columns(run=run)
        .with_columns(held=stall & (inside > 0))
        .with_columns(g=pl.when(stall).then(inside).otherwise(pl.col("g")))
        .drop("run")
    )


def held_by_the_ending_iteration(bounds: pl.DataFrame, pieces: pl.DataFrame, line: list[str]) -> pl.DataFrame:
    """Iteration starts (``u``) moved past a stall block that opens within a quarter iteration after them.

    The network holds a collective, which ends its iteration's work, so the time a stall adds runs from
    where that work ended to where the stall ended. The block (``stalls``) is centred on the readings,
    which saw the stall from where it began: anywhere in the iteration, a fraction f in. So it opens
    (1 + f) / 2 of an iteration into the iteration it held, three quarters on average; centred on that,
    within half an iteration either way of a reading's error, the iteration a block belongs to is the one
    it opens at least a quarter into, or the one whose work ended less than a quarter before it.

    Args:
        bounds: ``line`` keys, ``j``, ``u`` (seconds, switch clock), ``all_work``, ``n``.
        pieces: ``stalls`` output, with ``line`` keys, ``k``, ``a``, ``b`` and ``held``.
        line: the columns naming one line.

    Returns:
        ``line`` keys, ``j``, ``u``.
    """
    block = (pl.col("held") != pl.col("held").shift(1)).fill_null(True).cum_sum().over(line)
    blocks = (
        pieces.sort(*line, "k")
        .with_columns(block=block)
        .filter("held")
        .group_by(*line, "block")
        .agg(opens=pl.col("a").min(), closes=pl.col("b").max())
        .drop("block")
        .sort("opens")
    )
    after = bounds.sort("u").join_asof(
        blocks, left_on="u", right_on="opens", by=line, strategy="forward", check_sortedness=False
    )
    soon = (pl.col("j") > 0) & (pl.col("opens") - pl.col("u") < pl.col("all_work") / pl.col("n") / 4)
    return after.select(*line, "j", u=pl.when(soon).then("closes").otherwise("u"))


def place(
    lines: pl.DataFrame, cells: pl.DataFrame, grid: pl.DataFrame, gains: pl.DataFrame, skew_seconds: float
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Where each iteration of an interval line lay, and what of the line's network time was its.

    A line says its N iterations took ``hi - lo`` and ended at ``hi``; the physics (each link's cells scaled
    by the line's gain for it, the slowest link deciding) says when in that span the network added time.
    The line's network time is spread over its span as a density in proportion to the physics (never more
    than all of the time: a stall stops progress, it cannot undo it); the rest of the span is the
    iterations' own work, equal for each. An iteration ends when its share of that work is done, so a slow
    iteration pushes the later ones later, and an iteration's network time is the density integrated over
    its span. With no physics in the span the iterations are even and share the network time equally.

    Args:
        lines: interval lines with a wall clock: ``rank``, ``step`` (the line's last), ``n``, ``lo``,
            ``hi`` (host clock), ``network`` (seconds), ``joint_gain``.
        cells: ``floor``-ed ``step_physics`` over the grid (``window`` is the cell).
        grid: ``window``, ``time`` (the cells' centres, regular).
        gains: ``link_gains`` output.
        skew_seconds: host minus switch clock.

    Returns:
        Iterations (``rank``, ``line``, ``step``, ``lo``, ``hi`` on the host clock, ``weight``: the
        iteration's share of the line's network time) and each link's part of their physics (``rank``,
        ``step``, ``link``, ``device``, ``cause``, ``share``: its ``shapley`` share integrated over the
        iteration).
    """
    line = ["rank", "line"]
    iterations = pl.DataFrame(
        schema={
            "rank": pl.Int64(),
            "line": pl.Int64(),
            "step": pl.Int64(),
            "lo": physics.READINGS["time"],
            "hi": physics.READINGS["time"],
            "weight": pl.Float64(),
        }
    )
    per_link = pl.DataFrame(
        schema={
            "rank": pl.Int64(),
            "step": pl.Int64(),
            "link": pl.String(),
            "device": pl.String(),
            "cause": pl.String(),
            "share": pl.Float64(),
        }
    )
    if lines.is_empty() or grid.height < 2:
        return iterations, per_link
    # Seconds on the switch clock from the grid's first cell edge: cell k is [k, k + 1) x width.
    centres = grid["time"].dt.epoch("us")
    width_us = int(centres.diff().median())  # type: ignore[arg-type]
    origin_us = int(centres.min()) - width_us / 2  # type: ignore[arg-type]
    width = width_us / 1e6

    def switch(column: str) -> pl.Expr:
        return (pl.col(column).dt.epoch("us") - round(skew_seconds * 1e6) - origin_us) / 1e6

    spans = lines.select(
        "rank", "n", "network", "joint_gain", "lo", line="step", t0=switch("lo"), t1=switch("hi")
    )
    # The line's span cut at the cells' edges: piece k is the part of the span in cell k.
    pieces = (
        spans.with_columns(
            k=pl.int_ranges(
                (pl.col("t0") / width).floor(), (pl.col("t1") / width).floor() + 1, dtype=pl.Int64
            )
        )
        .explode("k")
        .with_columns(
            a=pl.max_horizontal("t0", pl.col("k") * width),
            b=pl.min_horizontal("t1", (pl.col("k") + 1) * width),
        )
    )
    gained = (
        pieces.select(*line, "k", "joint_gain")
        .join(cells.filter(pl.col("physics") > 0).rename({"window": "k"}), on="k")
        .join(gains, on=[*line, "link"], how="left")
        .select(
            *line,
            "k",
            "link",
            "device",
            "cause",
            physics=pl.col("physics") * pl.coalesce("gain", "joint_gain", pl.lit(1.0)),
        )
    )
    # At each moment the slowest link decides; the links share that as the airport game (``shapley``).
    gained = shapley(gained.lazy(), [*line, "k"]).collect()
    density = gained.group_by(*line, "k").agg(d=pl.col("share").sum())
    pieces = pieces.join(density, on=[*line, "k"], how="left").with_columns(pl.col("d").fill_null(0.0))
    # The share of the time the network took (``g``), scaled to the line's network time; what is left
    # (``work``) is the iterations' own.
    total = (pl.col("d") * (pl.col("b") - pl.col("a"))).sum().over(line)
    g = pl.when(total > 0).then(pl.col("d") * pl.col("network") / total).otherwise(0.0).clip(0.0, 1.0)
    pieces = (
        stalls(edges(pieces.with_columns(g=g).sort(*line, "k"), line), line)
        .with_columns(work=(pl.col("b") - pl.col("a")) * (1 - pl.col("g")))
        .sort(*line, "k")
        .with_columns(done=pl.col("work").cum_sum().over(line))
    )
    # Iteration j starts when j / n of the line's work is done (the first at the line's start).
    starts = (
        pieces.group_by(line)
        .agg(n=pl.col("n").first(), all_work=pl.col("work").sum())
        .with_columns(j=pl.int_ranges(0, pl.col("n")))
        .explode("j")
        .with_columns(target=pl.col("j") * pl.col("all_work") / pl.col("n"))
        .sort("target")
    )
    found = starts.join_asof(
        pieces.select(*line, "k", "a", "g", "done", "work").sort("done", "k"),
        left_on="target",
        right_on="done",
        by=line,
        strategy="forward",
        check_sortedness=False,
    )
    rate = 1 - pl.col("g")
    into = pl.when(rate > 0).then((pl.col("target") - pl.col("done") + pl.col("work")) / rate).otherwise(0.0)
    # The first iteration starts with the line, whatever stalls open it.
    u = pl.when(pl.col("j") == 0).then(pl.col("t0")).otherwise(pl.col("a") + into.clip(lower_bound=0.0))
    bounds = found.join(spans.select(*line, "t0"), on=line).select(*line, "j", "all_work", "n", u=u)
    bounds = held_by_the_ending_iteration(bounds, pieces, line)
    # Sub-pieces: the pieces cut again at the iterations' starts, each in one cell (the last piece begun
    # by then: a start computed a rounding past a cell's edge stays in the right cell) and one iteration.
    cuts = (
        pl.concat(
            [pieces.select(*line, "k", j=pl.lit(None, pl.Int64), u="a"), bounds], how="diagonal_relaxed"
        )
        .sort(*line, "u", pl.col("j").is_null())
        .with_columns(pl.col("k", "j").forward_fill().over(line))
        .join(pieces.select(*line, "k", "g"), on=[*line, "k"], how="left")
        .join(spans.select(*line, "t1", "n", "lo"), on=line)
        .with_columns(v=pl.col("u").shift(-1).over(line).fill_null(pl.col("t1")))
        .with_columns(seconds=(pl.col("v") - pl.col("u")).clip(lower_bound=0.0))
    )
    spent = cuts.group_by(*line, "j").agg(
        first=pl.col("u").min(),
        extra=(pl.col("g") * pl.col("seconds")).sum(),
        n=pl.col("n").first(),
        lo=pl.col("lo").first(),
    )
    t0 = spans.select(*line, "t0")
    offset = pl.duration(microseconds=((pl.col("first") - pl.col("t0")) * 1e6).round().cast(pl.Int64))
    placed = (
        spent.join(t0, on=line)
        .with_columns(start=pl.col("lo") + offset)
        .sort(*line, "j")
        .with_columns(
            end=pl.col("start").shift(-1).over(line),
            weight=pl.when(pl.col("extra").sum().over(line) > 0)
            .then(pl.col("extra") / pl.col("extra").sum().over(line))
            .otherwise(1 / pl.col("n")),
        )
    )
    ends = lines.select("rank", line="step", last="hi")
    iterations = placed.join(ends, on=line).select(
        "rank",
        "line",
        step=pl.col("line") - pl.col("n") + 1 + pl.col("j"),
        lo="start",
        hi=pl.coalesce("end", "last"),
        weight="weight",
    )
    linked = cuts.select(*line, "k", "j", "seconds").join(gained, on=[*line, "k"])
    per_link = (
        linked.sort("physics", descending=True)
        .group_by(*line, "j", "link")
        .agg(
            pl.col("device", "cause").first(),
            share=(pl.col("share") * pl.col("seconds")).sum(),
        )
        .join(spent.select(*line, "j", "n"), on=[*line, "j"])
        .select(
            "rank",
            step=pl.col("line") - pl.col("n") + 1 + pl.col("j"),
            link="link",
            device="device",
            cause="cause",
            share="share",
        )
    )
    return iterations, per_link


def steady(
    members: pl.DataFrame,
    ends: pl.DataFrame,
    round_trips: pl.DataFrame,
    bytes_per_step: pl.DataFrame,
) -> pl.DataFrame:
    """Per link the clean network's cost: round trip (probes, else fibre) and serialization of the job's
    bytes per step at the link's capacity (the smaller end's summed member speeds).

    Args:
        members: ``topology.link_members`` output (``rtt_seconds`` from the fibre).
        ends: ``physics.MEMBERS`` rows.
        round_trips: ``link``, ``rtt_seconds`` from the probes.
        bytes_per_step: ``link``, ``bytes`` (the job's bytes per step and direction on the link).

    Returns:
        ``link``, ``round_trip_seconds``, ``serialization_seconds``, ``capacity``, ``bytes``.
    """
    fibre = members.group_by("link").agg(fibre=pl.col("rtt_seconds").first())
    capacity = ends.group_by("link").agg(capacity=pl.col("capacity").min())
    probes = round_trips.select("link", probe="rtt_seconds")
    links = pl.concat([fibre.select("link"), capacity.select("link")]).unique()
    table = (
        links.join(fibre, on="link", how="left")
        .join(probes, on="link", how="left")
        .join(capacity, on="link", how="left")
        .join(bytes_per_step, on="link", how="left")
    )
    # No job-class counters anywhere and no declared bytes: the job's bytes per link are unknown (null),
    # and every link may be the job's; with some known, a link without any carries none of them.
    known = bytes_per_step.height > 0
    amount = pl.col("bytes").fill_null(0.0) if known else pl.col("bytes")
    serialization = pl.when(pl.col("capacity") > 0).then(amount / pl.col("capacity"))
    return table.select(
        "link",
        round_trip_seconds=pl.coalesce("probe", "fibre"),
        serialization_seconds=serialization,
        capacity="capacity",
        bytes=amount,
    ).sort("link")


def job_rates(amounts: pl.DataFrame) -> pl.DataFrame:
    """Per link end the job class's typical transmit rate (median over the steps' windows): the job's own
    traffic, since other traffic in its class comes in episodes; and how much that rate varies from window
    to window (``rate_noise``: the MAD as a standard deviation), as step times drift and windows cut steps
    unevenly."""
    rate = pl.col("sent") / pl.col("seconds")
    noise = (rate - rate.median()).abs().median() * MAD_TO_SIGMA
    return amounts.group_by("link", "device").agg(base_rate=rate.median(), rate_noise=noise)


def link_bytes(rates: pl.DataFrame, job: JobFigures, step_seconds: float) -> pl.DataFrame:
    """The job's bytes per step and direction per link: its total spread as the job class's typical rates
    spread (ECMP by flow), or, without a declared total, the rate times the median step."""
    per_link = rates.group_by("link").agg(rate=pl.col("base_rate").mean())
    if not float(per_link["rate"].sum()) > 0:  # no job-class counters: the spread is unknown
        return per_link.clear().select("link", bytes=pl.col("rate"))
    share = pl.col("rate") / pl.col("rate").sum()
    total = pl.lit(job.bytes_per_step) * share if job.bytes_per_step else pl.col("rate") * step_seconds
    out = per_link.with_columns(share=share).select(
        "link", bytes=pl.when(share >= JOB_LINK_SHARE).then(total)
    )
    return out.with_columns(pl.col("bytes").fill_null(0.0))


def step_physics(
    windows: pl.DataFrame, amounts: pl.DataFrame, ends: pl.DataFrame, links: pl.DataFrame, ahead: int = 0
) -> pl.DataFrame:
    """The physical estimate of what each link added to each step window, by cause.

    Args:
        windows: ``window``, ``seconds_step`` (the step's own length).
        amounts: ``physics.window_amounts`` over the widened windows, with ``job_rates`` joined.
        ends: ``physics.MEMBERS`` rows.
        links: ``steady`` output (``bytes``, null when unknown; ``round_trip_seconds``).
        ahead: windows in one poll interval (``rerouted``).

    Returns:
        ``window``, ``link``, ``device`` (the end that decided), ``physics`` (seconds), ``cause``.
    """
    # Most windows of most ends hold nothing: only those with a cause go on (other traffic past 1 % of
    # the capacity adds under 1 % of the serialization, below any step's noise). Other traffic is also only
    # what lies beyond the job's own rate noise: where the job's rate is a large share of the capacity (the
    # lab's links), its window-to-window variation is several % of the capacity and is not other traffic.
    with_capacity = amounts.join(ends.select("link", "device", "capacity"), on=["link", "device"])
    other_rate = pl.col("sent") / pl.col("seconds") - pl.col("base_rate")
    active = (
        (
            other_rate
            > pl.max_horizontal(
                OTHER_SHARE * pl.col("capacity"),
                pl.min_horizontal(RATE_NOISE_SIGMAS * pl.col("rate_noise"), NOISE_SHARE * pl.col("capacity")),
            )
        )
        | (pl.col("down") + pl.col("slow") + pl.col("ingress") + pl.col("queued") > 0)
        | (
            pl.col("paused")
            + pl.col("pausing")
            + pl.col("dropped")
            + pl.col("dropped_frames")
            + pl.col("fcs")
            > 0
        )
    )
    amounts = with_capacity.filter(active.fill_null(False)).drop("capacity")
    # Pauses this end sent are to its own hosts (they hold the job's bytes back) and over the wave (the
    # far end's "paused"): what it sent less what the far end received is what its hosts were held.
    far = pl.col("paused").sum().over("window", "link") - pl.col("paused")
    amounts = amounts.with_columns(held=(pl.col("pausing") - far).clip(lower_bound=0.0))
    rows = (
        amounts.join(ends, on=["link", "device"], how="inner")
        .join(links.select("link", "bytes", rtt="round_trip_seconds"), on="link")
        .join(windows.select("window", "seconds_step"), on="window")
        .filter(pl.col("bytes").is_null() | (pl.col("bytes") > 0))
        .with_columns(known=pl.col("bytes").is_not_null(), bytes=pl.col("bytes").fill_null(0.0))
    )
    slots = pl.col("interfaces") * pl.col("seconds")
    observed = pl.col("interfaces") * pl.col("covered")
    # A member down may also read speed 0: the larger of the two losses, not their sum.
    lost_slots = pl.max_horizontal("down", "slow")
    up = pl.when(observed > 0).then((1 - lost_slots / observed).clip(0.0, 1.0)).otherwise(1.0)
    cap_up = (pl.col("capacity") * up).clip(lower_bound=pl.col("capacity") * MIN_SHARE)
    other = (pl.col("sent") / pl.col("seconds") - pl.col("base_rate")).clip(lower_bound=0.0)
    avail = pl.max_horizontal(pl.col("cap_up") - other, pl.col("cap_up") * MIN_SHARE)
    # Dropped bytes where counted, else dropped packets as frames (never both: the same drops).
    dropped = pl.max_horizontal(pl.col("dropped"), pl.col("dropped_frames") * FRAME_BYTES)
    lost = (dropped + pl.col("fcs") * FRAME_BYTES) / pl.col("seconds") * pl.col("seconds_step")
    paused_share = ((pl.col("paused") + pl.col("held")) / slots).clip(0.0, 1 - MIN_SHARE)
    # The job's bytes the far end holds in its ingress queue reach its hosts that much later: the bytes
    # held over their drain rate. That rate (the far hosts' share of their port) is not in the telemetry:
    # the end's line rate stands for it, and the link's measured gain scales the result.
    ingress_delay = pl.col("ingress") / pl.col("seconds") / pl.col("capacity")
    # A standing egress queue (``physics.readings``' ``queued``, beyond the job's own usual one): its bytes
    # over the rate the class drained them (Little's law; the class's sent rate while it holds a queue), at
    # least the floor share of the port. Once per traversal: how many the job's collective makes is the
    # link's gain.
    drain = pl.max_horizontal(pl.col("sent") / pl.col("seconds"), MIN_SHARE * pl.col("capacity"))
    egress_delay = pl.col("queued") / pl.col("seconds") / drain
    causes = rows.with_columns(cap_up=cap_up).with_columns(
        # With the job's bytes unknown, a wave down is read as the share of the step its waves carried.
        lost_capacity=pl.when(pl.col("known"))
        .then(pl.col("bytes") * (1 / pl.col("cap_up") - 1 / pl.col("capacity")))
        .otherwise((1 - pl.col("cap_up") / pl.col("capacity")) * pl.col("seconds_step")),
        queueing=pl.col("bytes") * (1 / avail - 1 / pl.col("cap_up")) + ingress_delay + egress_delay,
        # Paused a share f of the time, the job's bytes go at (1 - f) of what is available: the cost is
        # per step (the step's bytes), whatever the step's length. Unknown bytes: f of the step.
        pause=pl.when(pl.col("known"))
        .then(pl.col("bytes") * (1 / (avail * (1 - paused_share)) - 1 / avail))
        .otherwise(paused_share * pl.col("seconds_step")),
        # About one round trip per loss event (the retransmission request and the resent bytes), plus
        # sending the lost bytes again.
        loss_recovery=pl.when(lost > 0).then(pl.col("rtt").fill_null(0.0) + lost / avail).otherwise(0.0),
    )
    names = ["lost_capacity", "queueing", "pause", "loss_recovery"]
    total = pl.sum_horizontal(names)
    cause = pl.concat_list(names).list.arg_max()
    # Per step (the job's bytes of one step, one round trip per loss event) and per second of the step
    # (resending lost bytes): a step's estimate is the first plus the second x its length.
    per_step = (
        pl.col("lost_capacity")
        + pl.col("queueing")
        + pl.when(pl.col("known")).then(pl.col("pause")).otherwise(0.0)
        + pl.when(lost > 0).then(pl.col("rtt").fill_null(0.0)).otherwise(0.0)
    )
    per_end = causes.select(
        "window",
        "link",
        "device",
        physics=total,
        per_step=per_step,
        per_second=((total - per_step) / pl.col("seconds_step")).fill_nan(0.0),
        cause=pl.when(total > 0).then(cause.replace_strict(dict(enumerate(names)), return_dtype=pl.String)),
    )
    per_end = rerouted(per_end, with_capacity, ahead)
    # The two directions of a link run in parallel: the slower one decides.
    return (
        per_end.sort("physics", descending=True)
        .group_by("window", "link")
        .agg(pl.all().exclude("window", "link").first())
    )


def rerouted(per_end: pl.DataFrame, amounts: pl.DataFrame, ahead: int = 0) -> pl.DataFrame:
    """A link down sends the job's bytes it carried over the others: what another link's end gains in the
    job's class while one is down, up to what the downed link no longer carries, is the job's own traffic
    moved, not other traffic, and the queueing it causes is the downed link's (``reroute``).

    Args:
        per_end: ``window``, ``link``, ``device``, ``physics``, ``cause`` (and the rest of a cell).
        amounts: ``window_amounts`` rows with ``base_rate`` and ``capacity``, every window of every end.
        ahead: windows in one poll interval: a status reading says a port is down once it is, up to a poll
            after its traffic moved, so a link counts as down that much before it reads down.
    """
    most = amounts["down"].max()
    if not (isinstance(most, (int, float)) and most > 0):  # no link down in the run
        return per_end
    rate = pl.col("sent") / pl.col("seconds")
    soon = pl.col("down").reverse().rolling_max(ahead + 1, min_samples=1).reverse().over("link", "device")
    down = (
        amounts.sort("window")
        .filter(soon > 0)
        .with_columns(missing=(pl.col("base_rate") - rate).clip(lower_bound=0.0))
        .group_by("window")
        .agg(pl.col("missing").sum(), to=pl.col("link").sort_by("missing", descending=True).first())
    )
    # The job's rate strays from its median (the downed link's median holds the run's slow episodes too):
    # up to NOISE_SHARE of the gaining end's capacity more than went missing is still the job's.
    gained = amounts.select(
        "window", "link", "device", gained=rate - pl.col("base_rate"), slack=NOISE_SHARE * pl.col("capacity")
    )
    moved = (
        (pl.col("cause") == "queueing")
        & (pl.col("link") != pl.col("to"))
        & (pl.col("gained") > 0)
        & (pl.col("gained") <= pl.col("missing") + pl.col("slack"))
    ).fill_null(False)
    return (
        per_end.join(gained, on=["window", "link", "device"], how="left")
        .join(down, on="window", how="left")
        .with_columns(
            link=pl.when(moved).then("to").otherwise("link"),
            cause=pl.when(moved).then(pl.lit("reroute")).otherwise("cause"),
        )
        .select(per_end.columns)
    )


def floor(per_link: pl.DataFrame) -> pl.DataFrame:
    """Estimates under ``PHYSICS_FLOOR_SECONDS`` are no cause."""
    real = pl.col("physics") >= PHYSICS_FLOOR_SECONDS
    return per_link.with_columns(
        physics=pl.when(real).then(pl.col("physics")).otherwise(0.0),
        cause=pl.when(real).then(pl.col("cause")),
    )


def on_steps(cells: pl.DataFrame, grid: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Each step window's estimate per link from the grid's cells it covers: the mean per-step part plus
    the mean per-second part times the step's length (cumulative sums: two lookups per step and link).

    Args:
        cells: ``step_physics`` over the grid (``window`` is the cell).
        grid: ``window``, ``time`` (the cells' centres, regular).
        windows: ``window``, ``lo``, ``hi`` (switch clock), ``seconds_step``.

    Returns:
        ``window``, ``link``, ``device``, ``physics``, ``cause``.
    """
    if cells.is_empty() or grid.height < 2:
        return pl.DataFrame(
            schema={
                "window": pl.Int64(),
                "link": pl.String(),
                "device": pl.String(),
                "physics": pl.Float64(),
                "cause": pl.String(),
            }
        )
    first = grid["time"].dt.epoch("us").min()
    width = grid["time"].dt.epoch("us").diff().median()
    last = grid.height - 1
    index = [
        ((pl.col(c).dt.epoch("us") - first) / width).round().clip(0, last).cast(pl.Int64)
        for c in ("lo", "hi")
    ]
    spans = windows.select("window", "seconds_step", i0=index[0], i1=index[1])
    links = cells.select("link").unique()
    full = grid.select(cell="window").join(links, how="cross")
    summed = (
        full.join(cells.rename({"window": "cell"}), on=["cell", "link"], how="left")
        .sort("link", "cell")
        .with_columns(
            a=pl.col("per_step").fill_null(0.0).cum_sum().over("link"),
            b=pl.col("per_second").fill_null(0.0).cum_sum().over("link"),
        )
    )
    high = summed.select("link", "device", "cause", i1="cell", a1="a", b1="b")
    low = summed.select("link", i0=pl.col("cell") + 1, a0="a", b0="b", device0="device", cause0="cause")
    joined = (
        spans.join(links, how="cross")
        .join(high, on=["link", "i1"], how="left")
        .join(low, on=["link", "i0"], how="left")
        .with_columns(pl.col("a0", "b0").fill_null(0.0), n=pl.col("i1") - pl.col("i0") + 1)
    )
    estimate = (
        pl.col("a1") - pl.col("a0") + (pl.col("b1") - pl.col("b0")) * pl.col("seconds_step")
    ) / pl.col("n")
    # The place and cause of the step's last cell, else of the cell before its first.
    out = joined.select(
        "window",
        "link",
        device=pl.coalesce("device", "device0"),
        physics=estimate.clip(lower_bound=0.0),
        cause=pl.coalesce("cause", "cause0", pl.lit("unclassified")),
    )
    return floor(out)


def collective_windows(windows: pl.DataFrame, typical_seconds: float, skew_seconds: float) -> pl.DataFrame:
    """Where each step's collectives may have run, on the switch clock: a typical step's length of time.

    A step under one and a half typical steps is read over its last typical step's worth of time. A longer
    one (a checkpoint, a stall, or its collective slowed) gets every typical-length window inside it, half
    a typical step apart, ending with its last: a checkpoint's collectives ran at its end, where the
    network cost as much as anywhere in it; a collective the network held ran from where it began to the
    step's end, and the window where it began (the worst, an episode's onset) is what the physics must
    read.

    Args:
        windows: ``window``, ``lo``, ``hi`` (host clock).
        typical_seconds: the typical step's length.
        skew_seconds: host minus switch clock.

    Returns:
        ``window`` (repeated for a long step), ``lo``, ``hi``, ``seconds_step``.
    """
    typical = pl.duration(microseconds=round(typical_seconds * 1e6))
    stride = max(typical_seconds / 2, 1e-6)
    seconds = (pl.col("hi") - pl.col("lo")).dt.total_nanoseconds() / 1e9
    back = pl.int_ranges(0, ((seconds - typical_seconds) / stride).floor().clip(lower_bound=0) + 1)
    ends = windows.with_columns(j=back).explode("j")
    hi = pl.col("hi") - pl.duration(microseconds=(pl.col("j") * stride * 1e6).round().cast(pl.Int64))
    lo = pl.max_horizontal(pl.col("lo"), pl.col("hi_j") - typical)
    skew = pl.duration(microseconds=round(skew_seconds * 1e6))
    return ends.with_columns(hi_j=hi).select(
        "window",
        lo=lo - skew,
        hi=pl.col("hi_j") - skew,
        seconds_step=(pl.col("hi_j") - lo).dt.total_nanoseconds() / 1e9,
    )


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


def cycle(durations: pl.DataFrame) -> int:
    """The job's communication cycle: the smallest N for which exactly one position (step mod N) is slower
    than all the others by more than the clean steps' noise while the others agree within it (DiLoCo
    syncs once every N steps), else 1.

    Args:
        durations: ``step``, ``seconds`` of clean single steps.
    """
    if durations.height < 4 * max(CYCLES):
        return 1
    # A cycle repeats: a run's first CYCLE_STEPS clean steps show it as well as all of them.
    durations = durations.sort("step").head(CYCLE_STEPS)
    for size in CYCLES:
        groups = durations.group_by(position=pl.col("step") % size).agg(
            median=pl.col("seconds").median(),
            low=pl.col("seconds").quantile(0.25),
            mad=(pl.col("seconds") - pl.col("seconds").median()).abs().median(),
        )
        ordered = groups.sort("median", descending=True)
        rest = ordered["median"].to_list()[1:]
        noise = float(groups["mad"].median() or 0.0) * MAD_TO_SIGMA  # type: ignore[arg-type]
        level = SIGNIFICANT_SIGMAS * max(noise, 1e-6)
        # Every step of the slow position is slow (a sync), not half of them (a checkpoint every 2N).
        if ordered["low"][0] - rest[0] > 2 * level and rest[0] - rest[-1] <= level:
            return size
    return 1


def baselines(lines: pl.LazyFrame, size: int) -> pl.LazyFrame:
    """Per rank (and position in the cycle, for single steps): the median and noise of clean lines' seconds
    per step (clean: no physical cause); all lines when none is clean. A line with a wall clock takes the
    median of the clean lines around it (``local_baselines``) where there are any.

    Args:
        lines: ``rank``, ``step``, ``n``, ``per_step``, ``physics`` (the line's summed estimate), and
            ``lo`` where known.
        size: the communication cycle (``cycle``).
    """
    position = pl.when(pl.col("n") == 1).then(pl.col("step") % size).otherwise(-1)
    keyed = lines.with_columns(position=position)
    clean = pl.col("physics") <= 0
    med = pl.coalesce(pl.col("per_step").filter(clean).median(), pl.col("per_step").median())
    base = keyed.group_by("rank", "position").agg(baseline=med)
    if "lo" in keyed.collect_schema().names():
        base = base.join(keyed.select("rank", "position", "step"), on=["rank", "position"])
        base = base.join(local_baselines(keyed), on=["rank", "step"], how="left")
        base = base.select("rank", "step", baseline=pl.coalesce("local", "baseline"))
    keyed = keyed.join(base, on=[c for c in base.collect_schema().names() if c != "baseline"])
    # A line's seconds per step average its n steps: its deviation times the root of n is one step's.
    deviation = (pl.col("per_step") - pl.col("baseline")).abs() * pl.col("n").sqrt()
    noise = keyed.group_by("rank").agg(
        sigma=pl.coalesce(deviation.filter(clean).median(), deviation.median()) * MAD_TO_SIGMA
    )
    # In a cycle (DiLoCo's outer sync every N steps) the positions far quicker than the slowest carry no
    # communication: no network time can be theirs.
    keyed = keyed.join(noise, on="rank").with_columns(
        usual=pl.col("baseline").median().over("rank", "position")
    )
    quiet = (pl.col("position") >= 0) & (
        pl.col("usual") < pl.col("usual").max().over("rank") - SIGNIFICANT_SIGMAS * pl.col("sigma")
    )
    return keyed.with_columns(communicates=~quiet).drop("position", "usual")


def local_baselines(keyed: pl.LazyFrame) -> pl.LazyFrame:
    """Per line with a wall clock, the median seconds per step of the clean lines of its rank and cycle
    position within +-``BASELINE_SECONDS`` / 2: step times drift (a shared host, a data pipeline, thermal
    limits), and a run-wide median reads the drift as excess, or hides an episode under it.

    Returns:
        ``rank``, ``step``, ``local`` (null where no clean line is near).
    """
    by = ["rank", "position"]
    timed = keyed.filter(pl.col("lo").is_not_null()).sort("lo")
    full, half = round(BASELINE_SECONDS * 1e6), round(BASELINE_SECONDS * 5e5)
    clean = pl.col("per_step").filter(pl.col("physics") <= 0)
    # Windows of BASELINE_SECONDS every quarter of that (a rolling median per line costs a median of a
    # window's lines per line); each line takes the window centred nearest to it.
    windows = (
        timed.group_by_dynamic(
            "lo", every=f"{full // 4}us", period=f"{full}us", offset=f"-{half}us", group_by=by
        )
        .agg(local=clean.median())
        .select(*by, "local", centre=pl.col("lo") + pl.duration(microseconds=half))
        .sort("centre")
    )
    near = timed.join_asof(
        windows, left_on="lo", right_on="centre", by=by, strategy="nearest", check_sortedness=False
    )
    return near.select("rank", "step", "local")


def reads_a_gain(*block: str) -> pl.Expr:
    """Whether a line's ratio of ``excess`` to ``physics`` measures the physics' gain in its ``block``: the
    line's excess is past the noise, and the physics shows in it, either on its own (past the line's noise)
    or as the block's typical (median) line's excess past the noise (physics whose size the counters miss,
    such as loss recovery, shows over its whole block). Physics within the noise of a block whose lines
    mostly show nothing: one line past the noise there is something else's (a straggler's wait, a
    checkpoint), and its ratio would scale every line of the block by it."""
    past = pl.col("excess") > SIGNIFICANT_SIGMAS * pl.col("noise")
    visible = pl.col("physics") >= pl.col("noise")
    typical = pl.col("excess").median().over(*block)
    typical_noise = pl.col("noise").median().over(*block)
    return past & (visible | (typical > SIGNIFICANT_SIGMAS * typical_noise))


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


def link_gains(lines: pl.DataFrame, cells: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, line, link): the measured excess per unit of the link's own physics.

    Loss recovery and congestion-control cuts have no magnitude in 1 s counters, but their timing and their
    link do, and each cause on each link is off by its own factor: the gain is read per link, over each run
    of consecutive lines where the link has a cause (its block), from the lines where it is the only cause
    (``ALONE_SHARE`` of the line's physics) and which read a gain (``reads_a_gain``). A link never alone
    takes its line's joint gain (``measured``), else 1.

    Args:
        lines: ``measured`` output.
        cells: ``rank``, ``line``, ``link``, ``physics`` (unscaled, per step of the line).

    Returns:
        ``rank``, ``line``, ``link``, ``gain``.
    """
    per_line = cells.group_by("rank", "line", "link").agg(pl.col("physics").sum())
    order = (
        lines.select("rank", "excess", "noise", "joint_gain", line="step")
        .sort("rank", "line")
        .with_columns(no=pl.int_range(pl.len()).over("rank"))
    )
    rows = per_line.join(order, on=["rank", "line"]).sort("rank", "link", "no")
    block = ((pl.col("no") - pl.col("no").shift(1).over("rank", "link")) != 1).fill_null(True)
    # Columns first: a window inside another window's group would see only that group.
    alone = pl.col("physics") >= ALONE_SHARE * pl.col("physics").sum().over("rank", "line")
    rows = rows.with_columns(block=block.cum_sum().over("rank", "link"))
    rows = rows.with_columns(readable=alone & reads_a_gain("rank", "link", "block"))
    own = (pl.col("excess") / pl.col("physics")).filter("readable").median().over("rank", "link", "block")
    return rows.select("rank", "line", "link", gain=pl.coalesce(own, pl.col("joint_gain"), pl.lit(1.0)))


def poll_seconds(readings: pl.DataFrame) -> float:
    """The usual time between two readings of one quantity of one link end (1 s when unknown): the median
    over every two consecutive readings, so that a quantity read twice in a run (a status that never
    changed, as its running total keeps only its ends) weighs as little as it tells."""
    gaps = readings.group_by("link", "device", "quantity").agg(
        gap=pl.col("time").sort().diff().dt.total_microseconds() / 1e6
    )
    gap = gaps.explode("gap").filter(pl.col("gap") > 0)["gap"].median()
    return float(gap) if isinstance(gap, (int, float)) and gap > 0 else 1.0


def timing_spread(lines: pl.LazyFrame, around: int) -> pl.LazyFrame:
    """``spread``: how much a line's scaled physics changes within ``around`` lines of it (one poll
    interval each way): a reading covers its whole interval, so physics that rises or falls within one
    is known only that well in time (an episode's first and last steps)."""
    size = 2 * around + 1
    scaled = pl.col("scaled")
    high = scaled.rolling_max(size, min_samples=1, center=True).over("rank", order_by="step")
    low = scaled.rolling_min(size, min_samples=1, center=True).over("rank", order_by="step")
    return lines.with_columns(spread=high - low)


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
    out = lines.with_columns(network=network)
    return out.with_columns(unexplained=pl.col("excess").clip(lower_bound=0.0) - pl.col("network"))


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
    if lines.height < 3 or signal.height < 3:
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
        if inside.sum() < 3:
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


@dataclass
class Blame:
    """The blame of one analysis.

    Attributes:
        steps: ``schemas.STEP_ANALYSIS`` rows (one per step and rank; interval lines expanded).
        attribution: ``schemas.ATTRIBUTION`` rows (episode cost per step, rank and link).
        steady: ``steady`` output.
        summary: the JSON-ready figures (skew, correlation, cycle, evidence).
    """

    steps: pl.DataFrame
    attribution: pl.DataFrame
    steady: pl.DataFrame
    summary: dict[str, object]


def _with_logged(evidence: pl.DataFrame | None, parsed_steps: pl.DataFrame) -> pl.DataFrame | None:
    """The given evidence, then each single step's communication time as its own log timed it."""
    if "logged_communication_seconds" not in parsed_steps.columns:  # a frame not read through a parser
        return evidence
    logged = parsed_steps.filter(
        pl.col("logged_communication_seconds").is_not_null() & ~pl.col("interval_average").fill_null(False)
    ).select("step", pl.col("rank").fill_null(0), communication="logged_communication_seconds")
    parts = [part for part in (evidence, logged) if part is not None and part.height]
    if not parts:
        return None
    return pl.concat(parts, how="vertical_relaxed").unique(_STEP, keep="first", maintain_order=True)


def _grid(totals: pl.DataFrame, points: int = 20_000) -> pl.DataFrame:
    """Windows centred on a regular grid over the telemetry (for the skew search and the job's rates)."""
    if totals.is_empty():
        return pl.DataFrame(
            schema={
                "window": pl.Int64(),
                "time": physics.READINGS["time"],
                "lo": physics.READINGS["time"],
                "hi": physics.READINGS["time"],
            }
        )
    first, last = totals.select(
        first=pl.col("time").dt.epoch("us").min(), last=pl.col("time").dt.epoch("us").max()
    ).row(0)
    step_us = max(int(SKEW_RESOLUTION_SECONDS * 1e6), (int(last) - int(first)) // points)
    centres = pl.int_range(int(first), int(last) + 1, step_us, eager=True)
    half = pl.duration(microseconds=int(step_us / 2))
    frame = pl.DataFrame({"time": pl.from_epoch(centres, "us").dt.replace_time_zone("UTC")})
    return frame.with_row_index("window").select(
        pl.col("window").cast(pl.Int64), "time", lo=pl.col("time") - half, hi=pl.col("time") + half
    )


def attribute(
    parsed_steps: pl.DataFrame,
    readings: pl.DataFrame,
    ends: pl.DataFrame,
    round_trips: pl.DataFrame,
    members: pl.DataFrame,
    job: JobFigures,
    skew_seconds: float | None = None,
    evidence: pl.DataFrame | None = None,
) -> Blame:
    """The whole method: steps split, steady figures, physics, skew, reconciliation.

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

    Returns:
        The blame.
    """
    lines = intervals(parsed_steps).collect()
    evidence = _with_logged(evidence, parsed_steps)
    if evidence is not None and evidence.height:
        lines = (
            lines.join(evidence, on=_STEP, how="left")
            .with_columns(
                per_step=pl.when(pl.col("n") == 1)
                .then(pl.coalesce("communication", "per_step"))
                .otherwise("per_step"),
                evidence=pl.when(pl.col("communication").is_not_null())
                .then(pl.lit("communication"))
                .otherwise(pl.lit("step_time")),
            )
            .drop("communication")
        )
    else:
        lines = lines.with_columns(evidence=pl.lit("step_time"))
    steps = expand(lines.lazy()).collect()
    totals = physics.running_totals(readings.lazy()).collect()
    median_step = float(lines["duration"].median() or 0.0)  # type: ignore[arg-type]
    grid = _grid(totals)
    amounts = physics.window_amounts(totals.lazy(), grid.lazy()).collect()
    rates = job_rates(amounts)
    links = steady(members, ends, round_trips, link_bytes(rates, job, median_step))
    grid = grid.with_columns(seconds_step=pl.lit(median_step))
    amounts = amounts.join(rates, on=["link", "device"], how="left").with_columns(
        pl.col("base_rate", "rate_noise").fill_null(0.0)
    )
    cell_seconds = float(grid["time"].dt.epoch("us").diff().median() or 1e6) / 1e6  # type: ignore[arg-type]
    cells = step_physics(grid, amounts, ends, links, round(poll_seconds(readings) / cell_seconds))
    strongest = floor(cells).group_by("window").agg(pl.col("physics").max())
    signal = grid.join(strongest, on="window", how="left").with_columns(pl.col("physics").fill_null(0.0))
    correlation = None
    if skew_seconds is None:
        placed = lines.filter(pl.col("lo").is_not_null())
        typical = pl.col("per_step").median().over("rank")
        over = ((pl.col("per_step") - typical) * pl.col("n")).clip(lower_bound=0.0)
        proxy = placed.select("lo", "hi", excess=over)
        top = proxy["excess"].quantile(0.95) or 0.0
        proxy = proxy.with_columns(pl.col("excess").clip(upper_bound=top))
        skew_seconds, correlation = estimate_skew(proxy, signal.select("time", "physics"))
    windows = (
        steps.filter(pl.col("lo").is_not_null())
        .select("lo", "hi")
        .unique()
        .with_row_index("window")
        .with_columns(pl.col("window").cast(pl.Int64))
    )
    per_link = on_steps(cells, grid, collective_windows(windows, median_step, skew_seconds))
    # A long step's physics is the worst of its typical-length windows (``collective_windows``).
    per_link = per_link.sort("physics", descending=True).group_by("window", "link").first()
    per_link = per_link.filter(pl.col("physics") > 0)
    steps = steps.join(windows, on=["lo", "hi"], how="left")
    caused = steps.select("rank", "line", "step", "window").join(per_link, on="window")
    raw = caused.group_by("rank", "step").agg(raw=pl.col("physics").max())
    line_raw = steps.join(raw, on=_STEP, how="left").group_by("rank", "line").agg(physics=pl.col("raw").sum())
    lines = lines.join(line_raw.rename({"line": "step"}), on=_STEP, how="left").with_columns(
        pl.col("physics").fill_null(0.0)
    )
    singles = lines.filter((pl.col("n") == 1) & (pl.col("physics") <= 0)).select("step", seconds="per_step")
    size = cycle(singles)
    judged = measured(baselines(lines.lazy(), size)).collect()
    gains = link_gains(judged, caused)
    scaled = caused.join(gains, on=["rank", "line", "link"]).with_columns(
        physics=pl.col("physics") * pl.col("gain")
    )
    shares = shapley(scaled.lazy(), _STEP).collect()
    step_total = shares.group_by(_STEP).agg(step_physics=pl.col("physics").max())
    steps = steps.join(step_total, on=_STEP, how="left").with_columns(pl.col("step_physics").fill_null(0.0))
    line_scaled = steps.group_by("rank", "line").agg(scaled=pl.col("step_physics").sum())
    scaled_lines = judged.lazy().join(line_scaled.lazy().rename({"line": "step"}), on=_STEP, how="left")
    scaled_lines = scaled_lines.with_columns(pl.col("scaled").fill_null(0.0))
    around = max(1, round(poll_seconds(readings) / median_step)) if median_step > 0 else 1
    judged = reconcile(timing_spread(scaled_lines, around)).collect()
    # A line's network time goes to its steps in proportion to their physics (evenly without any); an
    # interval line's iterations are first placed by where the physics fell in it (``place``).
    of_line = pl.col("step_physics").sum().over("rank", "line")
    steps = steps.with_columns(
        weight=pl.when(of_line > 0)
        .then(pl.col("step_physics") / of_line)
        .otherwise(1 / pl.len().over("rank", "line"))
    )
    interval_lines = judged.filter((pl.col("n") > 1) & pl.col("lo").is_not_null() & (pl.col("network") > 0))
    iterations, placed = place(interval_lines, floor(cells), grid, gains, skew_seconds)
    seconds = (pl.col("placed_hi") - pl.col("placed_lo")).dt.total_nanoseconds() / 1e9
    steps = (
        steps.join(
            iterations.drop("line").rename(lambda c: f"placed_{c}" if c not in _STEP else c),
            on=_STEP,
            how="left",
        )
        .with_columns(
            lo=pl.coalesce("placed_lo", "lo"),
            hi=pl.coalesce("placed_hi", "hi"),
            per_step=pl.coalesce(seconds, "per_step"),
            duration=pl.coalesce(seconds, "duration"),
            weight=pl.coalesce("placed_weight", "weight"),
        )
        .drop(cs.starts_with("placed_"))
    )
    shares = pl.concat(
        [
            shares.join(iterations.select(_STEP), on=_STEP, how="anti"),
            placed,
        ],
        how="diagonal_relaxed",
    )
    return _outputs(
        steps,
        judged,
        shares,
        links,
        {
            "skew_seconds": skew_seconds,
            "skew_correlation": correlation,
            "skew_estimated": correlation is not None,
            "communication_cycle_steps": size,
            "evidence": dict(lines.group_by("evidence").len().sort("evidence").iter_rows()),
            "interval_lines": int((lines["n"] > 1).sum()),
            "lines_not_placeable": int(lines["lo"].is_null().sum()),
        },
    )


def _outputs(
    steps: pl.DataFrame,
    judged: pl.DataFrame,
    shares: pl.DataFrame,
    links: pl.DataFrame,
    summary: dict[str, object],
) -> Blame:
    """Lines' network time down to steps (by their ``weight``) and links (their Shapley shares)."""
    from analyzer import schemas

    line = judged.select(
        "rank",
        line="step",
        n="n",
        baseline_seconds="baseline",
        line_excess="excess",
        line_network="network",
        line_unexplained="unexplained",
        sigma="sigma",
        source_file="source_file",
    )
    rows = steps.join(line, on=["rank", "line"], how="left")
    rows = rows.with_columns(
        network=pl.col("line_network") * pl.col("weight"),
        inflation_seconds=(pl.col("per_step") - pl.col("baseline_seconds")).clip(lower_bound=0.0),
        unexplained_seconds=pl.col("line_unexplained") / pl.col("n"),
    )
    path = links.select(
        "link",
        steady=pl.col("serialization_seconds").fill_null(0.0)
        + 2 * pl.col("round_trip_seconds").fill_null(0.0),
    ).filter(pl.col("steady") > 0)
    steady_s = path["steady"].max() if path.height else None
    given = shares.join(rows.select("step", "rank", "network"), on=_STEP)
    given = (
        given.filter(pl.col("share") > 0)
        .with_columns(share=pl.col("share") / pl.col("share").sum().over(_STEP))
        .with_columns(attributed_seconds=pl.col("network") * pl.col("share"))
        .filter(pl.col("attributed_seconds") > 0)
    )
    attribution = given.select(
        "step",
        "rank",
        event_id=pl.lit(None, pl.Int64),
        link="link",
        device="device",
        interface=pl.lit(None, pl.String),
        kind="cause",
        overlap_seconds=pl.lit(None, pl.Float64),
        share="share",
        attributed_seconds="attributed_seconds",
    )
    top = (
        attribution.sort("attributed_seconds", descending=True)
        .group_by(_STEP)
        .agg(
            top_link=pl.col("link").first(),
            top_kind=pl.col("kind").first(),
            top_device=pl.col("device").first(),
            events=pl.len().cast(pl.Int64),
        )
    )
    table = (
        rows.join(top, on=_STEP, how="left")
        .select(
            "step",
            "rank",
            start_time="lo",
            end_time="hi",
            duration_seconds="duration",
            baseline_seconds="baseline_seconds",
            inflation_seconds="inflation_seconds",
            inflated=pl.col("inflation_seconds") > SIGNIFICANT_SIGMAS * pl.col("sigma").fill_null(0.0),
            events=pl.col("events").fill_null(0),
            top_link="top_link",
            top_kind="top_kind",
            top_device="top_device",
            steady_seconds=pl.lit(steady_s, pl.Float64),
            unexplained_seconds="unexplained_seconds",
            source_file="source_file",
        )
        .sort(_STEP)
    )
    return Blame(
        schemas.conform_lazy(schemas.STEP_ANALYSIS, table.lazy()).collect(),
        schemas.conform_lazy(schemas.ATTRIBUTION, attribution.lazy()).collect(),
        links,
        summary,
    )
