"""Step 4, placement: where each iteration of an interval line lay, and what of the line's network time was
its, from where the physics fell in the line's span."""

from __future__ import annotations

import polars as pl
import polars.selectors as cs

from analyzer import physics
from analyzer.attribution.reconcile import shapley
from analyzer.attribution.rules import EDGE_SHARE, PHYSICS_ERROR, STALL_HELD_WITHIN, STALL_SHARE

# The step's formula (``docs/method.md``; the capitals are ``rules``).
FORMULA = """\
g(t)   = min(1, d(t) * network / integral of d over the line)     d: the scaled physics' density
ramps  : before the first (after the last) level >= EDGE_SHARE of a run's peak, that level over the ramp's end
stalls : a run where the network took >= STALL_SHARE of the time is one block of g = 1, centred on it,
         unless the rank's run at that density (across lines), a poll in from either end, reads
         g < 1 / (1 + PHYSICS_ERROR)
start_j: where integral of (1 - g) = j / n of the line's work; moved past a stall block opening within
         STALL_HELD_WITHIN of an iteration after it
"""


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


def stalls(pieces: pl.DataFrame, line: list[str], poll: float) -> pl.DataFrame:
    """A stall, sharpened: a run of pieces with network time (``g`` > 0) where the network took at least
    ``STALL_SHARE`` of the time is one stall (a wave's loss, a pause storm) that a poll's counters smeared
    over their interval; it becomes one block of ``g`` = 1 as long as its network time, centred where the
    run's network time is, in whole pieces (``held``), so the iteration it caught takes all of it, as a
    collective held by the network does. Slower, longer runs (congestion) keep their density.

    A poll smears a stall over at most one poll before and one after it, and a stall holds the network all
    the time in between; the scaled physics is off by at most ``PHYSICS_ERROR``. So a run at a stall's
    density that reads less than 1 / (1 + ``PHYSICS_ERROR``) of the time a poll in from its ends is not one
    stall: it is sustained congestion that slows every iteration it spans. That run is the rank's, across
    its lines (a line cuts a long run short).

    Args:
        pieces: ``line`` keys, ``k``, ``a``, ``b`` (seconds), ``g``, sorted by ``k`` within each line, the
            lines of each rank in time order (by their last step).
        line: the columns naming one line; the rank is all of them but the last.
        poll: the readings' interval (seconds).
    """
    seconds = pl.col("b") - pl.col("a")
    dense = pl.col("g") >= STALL_SHARE
    across = dense.rle_id().over(line[:-1])  # the rank's runs at a stall's density, across its lines
    rank_run = [*line[:-1], "across"]
    inner = (pl.col("a") >= pl.col("a").min().over(rank_run) + poll) & (
        pl.col("b") <= pl.col("b").max().over(rank_run) - poll
    )
    inner_spent = (pl.col("g") * seconds).filter("inner").sum() * (1 + PHYSICS_ERROR)
    holds = (inner_spent >= seconds.filter("inner").sum()).over(rank_run)
    run = (pl.col("g") > 0).rle_id().over(line)
    smeared = (~dense | pl.col("holds")).all().over(*line, "run")
    spent = (pl.col("g") * seconds).sum().over(*line, "run")
    length = seconds.sum().over(*line, "run")
    centre = (pl.col("g") * seconds * (pl.col("a") + pl.col("b")) / 2).sum().over(*line, "run") / spent
    lo = pl.max_horizontal(centre - spent / 2, pl.col("a").min().over(*line, "run"))
    hi = pl.min_horizontal(lo + spent, pl.col("b").max().over(*line, "run"))
    # Whole pieces (those whose middle it covers): a piece half stalled would let an iteration end or
    # begin inside the stall, where the held collective ends only with it.
    middle = (pl.col("a") + pl.col("b")) / 2
    inside = ((middle >= lo) & (middle < hi)).cast(pl.Float64)
    stall = (pl.col("g") > 0) & (spent >= STALL_SHARE * length) & smeared
    return (
        pieces.with_columns(run=run, across=across)
        .with_columns(inner=inner)
        .with_columns(holds=holds)
        .with_columns(held=stall & (inside > 0))
        .with_columns(g=pl.when(stall).then(inside).otherwise(pl.col("g")))
        .drop("run", "across", "inner", "holds")
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
    soon = (pl.col("j") > 0) & (
        pl.col("opens") - pl.col("u") < pl.col("all_work") / pl.col("n") * STALL_HELD_WITHIN
    )
    return after.select(*line, "j", u=pl.when(soon).then("closes").otherwise("u"))


_LINE = ["rank", "line"]  # the keys of one interval line


def place(
    lines: pl.DataFrame,
    cells: pl.DataFrame,
    grid: pl.DataFrame,
    gains: pl.DataFrame,
    skew_seconds: float,
    poll: float,
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
        poll: the telemetry's poll interval, seconds (``stalls``).

    Returns:
        Iterations (``rank``, ``line``, ``step``, ``lo``, ``hi`` on the host clock, ``weight``: the
        iteration's share of the line's network time) and each link's part of their physics (``rank``,
        ``step``, ``link``, ``device``, ``cause``, ``share``: its ``shapley`` share integrated over the
        iteration).
    """
    if lines.is_empty() or grid.height < 2:
        return _no_placement()
    spans, pieces = cut_at_cells(lines, grid, skew_seconds)
    gained = gained_physics(pieces, cells, gains)
    pieces = network_share(pieces, gained, poll)
    bounds = held_by_the_ending_iteration(iteration_starts(pieces, spans), pieces, _LINE)
    cuts = cut_at_starts(pieces, bounds, spans)
    spent = cuts.group_by(*_LINE, "j").agg(
        first=pl.col("u").min(),
        extra=(pl.col("g") * pl.col("seconds")).sum(),
        n=pl.col("n").first(),
        lo=pl.col("lo").first(),
    )
    return iterations_of(spent, spans, lines), links_of(cuts, gained, spent)


def _no_placement() -> tuple[pl.DataFrame, pl.DataFrame]:
    """``place``'s two frames, empty."""
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
    return iterations, per_link


def cut_at_cells(
    lines: pl.DataFrame, grid: pl.DataFrame, skew_seconds: float
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The lines' spans on the switch clock (``t0``, ``t1``: seconds from the grid's first cell edge, cell k
    being [k, k + 1) x width), and the spans cut at the cells' edges: piece k (``a``, ``b``) is the part of
    the span in cell k."""
    centres = grid["time"].dt.epoch("us")
    width_us = int(centres.diff().median())  # type: ignore[arg-type]
    origin_us = int(centres.min()) - width_us / 2  # type: ignore[arg-type]
    width = width_us / 1e6

    def switch(column: str) -> pl.Expr:
        return (pl.col(column).dt.epoch("us") - round(skew_seconds * 1e6) - origin_us) / 1e6

    spans = lines.select(
        "rank", "n", "network", "joint_gain", "lo", line="step", t0=switch("lo"), t1=switch("hi")
    )
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
    return spans, pieces


def gained_physics(pieces: pl.DataFrame, cells: pl.DataFrame, gains: pl.DataFrame) -> pl.DataFrame:
    """Each piece's physics per link, scaled by the line's gain for the link (else its joint gain), and its
    ``shapley`` share: at each moment the slowest link decides, the links share that as the airport game."""
    gained = (
        pieces.select(*_LINE, "k", "joint_gain")
        .join(cells.filter(pl.col("physics") > 0).rename({"window": "k"}), on="k")
        .join(gains, on=[*_LINE, "link"], how="left")
        .select(
            *_LINE,
            "k",
            "link",
            "device",
            "cause",
            physics=pl.col("physics") * pl.coalesce("gain", "joint_gain", pl.lit(1.0)),
        )
    )
    return shapley(gained.lazy(), [*_LINE, "k"]).collect()


def network_share(pieces: pl.DataFrame, gained: pl.DataFrame, poll: float) -> pl.DataFrame:
    """Per piece the share of the time the network took (``g``), the density scaled to the line's network
    time (sharpened: ``edges``, ``stalls``); what is left (``work``) is the iterations' own, ``done`` its
    running sum over the line."""
    line = _LINE
    density = gained.group_by(*line, "k").agg(d=pl.col("share").sum())
    pieces = pieces.join(density, on=[*line, "k"], how="left").with_columns(pl.col("d").fill_null(0.0))
    total = (pl.col("d") * (pl.col("b") - pl.col("a"))).sum().over(line)
    g = pl.when(total > 0).then(pl.col("d") * pl.col("network") / total).otherwise(0.0).clip(0.0, 1.0)
    return (
        stalls(edges(pieces.with_columns(g=g).sort(*line, "k"), line), line, poll)
        .with_columns(work=(pl.col("b") - pl.col("a")) * (1 - pl.col("g")))
        .sort(*line, "k")
        .with_columns(done=pl.col("work").cum_sum().over(line))
    )


def iteration_starts(pieces: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """Iteration j starts (``u``) when j / n of the line's work is done (the first at the line's start,
    whatever stalls open it).

    Returns:
        ``rank``, ``line``, ``j``, ``all_work``, ``n``, ``u``.
    """
    line = _LINE
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
    u = pl.when(pl.col("j") == 0).then(pl.col("t0")).otherwise(pl.col("a") + into.clip(lower_bound=0.0))
    return found.join(spans.select(*line, "t0"), on=line).select(*line, "j", "all_work", "n", u=u)


def cut_at_starts(pieces: pl.DataFrame, bounds: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """Sub-pieces: the pieces cut again at the iterations' starts, each in one cell (the last piece begun by
    then: a start computed a rounding past a cell's edge stays in the right cell) and one iteration ``j``,
    from ``u`` for ``seconds``."""
    line = _LINE
    return (
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


def iterations_of(spent: pl.DataFrame, spans: pl.DataFrame, lines: pl.DataFrame) -> pl.DataFrame:
    """Each iteration on the host clock (from its first sub-piece to the next's, the last to the line's
    end) and its share of the line's network time (``weight``; even without any)."""
    line = _LINE
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
    return placed.join(ends, on=line).select(
        "rank",
        "line",
        step=pl.col("line") - pl.col("n") + 1 + pl.col("j"),
        lo="start",
        hi=pl.coalesce("end", "last"),
        weight="weight",
    )


def links_of(cuts: pl.DataFrame, gained: pl.DataFrame, spent: pl.DataFrame) -> pl.DataFrame:
    """Each link's part of each iteration's physics: its ``shapley`` share integrated over the iteration."""
    line = _LINE
    linked = cuts.select(*line, "k", "j", "seconds").join(gained, on=[*line, "k"])
    return (
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


def steps_placed(
    steps: pl.DataFrame,
    judged: pl.DataFrame,
    shares: pl.DataFrame,
    cells: pl.DataFrame,
    grid: pl.DataFrame,
    gains: pl.DataFrame,
    skew_seconds: float,
    poll: float,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each step's share of its line's network time (``weight``) and its links' shares.

    A line's network time goes to its steps in proportion to their physics (evenly without any); an
    interval line's iterations are first placed by where the physics fell in it (``place``), which sets
    their times, lengths, weights and link shares.

    Args:
        steps: ``reconcile.network_time``' steps (with ``step_physics``).
        judged: ``reconcile.network_time``' lines.
        shares: ``reconcile.network_time``' link shares per step.
        cells: ``floor``-ed ``episode.step_physics`` over the grid.
        grid: ``window``, ``time``.
        gains: ``reconcile.link_gains`` output.
        skew_seconds: host minus switch clock.
        poll: the telemetry's poll interval, seconds (``stalls``).

    Returns:
        (the steps with ``weight``, the link shares of every step).
    """
    keys = ["step", "rank"]
    of_line = pl.col("step_physics").sum().over("rank", "line")
    steps = steps.with_columns(
        weight=pl.when(of_line > 0)
        .then(pl.col("step_physics") / of_line)
        .otherwise(1 / pl.len().over("rank", "line"))
    )
    interval_lines = judged.filter((pl.col("n") > 1) & pl.col("lo").is_not_null() & (pl.col("network") > 0))
    iterations, placed = place(interval_lines, cells, grid, gains, skew_seconds, poll)
    seconds = (pl.col("placed_hi") - pl.col("placed_lo")).dt.total_nanoseconds() / 1e9
    steps = (
        steps.join(
            iterations.drop("line").rename(lambda c: f"placed_{c}" if c not in keys else c),
            on=keys,
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
        [shares.join(iterations.select(keys), on=keys, how="anti"), placed], how="diagonal_relaxed"
    )
    return steps, shares
