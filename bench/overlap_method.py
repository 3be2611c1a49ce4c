"""The retired overlap-and-weights method (the analysis blames from evidence now: ``analyzer.attribution``),
kept for the analyzer bench, whose DuckDB and pandas engines compute it: the engines' agreement is checked
on its figures.

* overlap: an inequality join of step intervals with event intervals widened by the clock-skew tolerance on
  both sides (``sweep_pairs``: binary search on one integer axis);
* baseline: per rank, the median duration of *clean* steps (overlapping no event), its spread their MAD;
* inflation: how far a step exceeds its baseline (never negative); a step is *inflated* when that exceeds
  both a share of the baseline and a multiple of the MAD;
* attribution: a step's inflation is split over the events it overlaps, in proportion to overlap seconds
  times the kind's weight (``analyzer.kinds``).
"""

from __future__ import annotations

import polars as pl

from analyzer import schemas
from analyzer.kinds import KINDS
from analyzer.thresholds import Thresholds

KIND_WEIGHTS: dict[str, float] = {kind.name: kind.weight for kind in KINDS.values()}
_STEP = ["step", "rank"]
_MAD_TO_SIGMA = 1.4826  # the MAD of a normal distribution times this is its standard deviation


def _seconds(delta: pl.Expr) -> pl.Expr:
    return delta.dt.total_nanoseconds() / 1e9


def overlaps(steps: pl.LazyFrame, events: pl.LazyFrame, skew_seconds: float) -> pl.LazyFrame:
    """Every (step, rank, event) pair whose intervals meet, events widened by the skew tolerance.

    Args:
        steps: ``prepare_steps`` output.
        events: ``schemas.EVENTS`` rows.
        skew_seconds: clock-skew tolerance added on both sides of each event.

    Returns:
        Columns ``step``, ``rank``, ``event_id``, ``link``, ``device``, ``interface``, ``kind``,
        ``overlap_seconds`` (> 0; at least 1 ns when the intervals only touch through the tolerance).
    """
    skew = pl.duration(microseconds=int(skew_seconds * 1e6))
    widened = events.select(
        "event_id",
        "link",
        "device",
        "interface",
        "kind",
        ev_start=pl.col("start_time") - skew,
        ev_end=pl.col("end_time") + skew,
    )
    timed = steps.filter(pl.col("start_time").is_not_null()).select([*_STEP, "start_time", "end_time"])
    pairs = sweep_pairs(*pl.collect_all([timed, widened])).lazy()
    overlap = _seconds(
        pl.min_horizontal("end_time", "ev_end") - pl.max_horizontal("start_time", "ev_start")
    ).clip(lower_bound=1e-9)
    return pairs.select(*_STEP, "event_id", "link", "device", "interface", "kind", overlap_seconds=overlap)


def _int_ns(column: str, origin: int) -> pl.Expr:
    return pl.col(column).dt.epoch("ns") - origin


def sweep_pairs(timed: pl.DataFrame, widened: pl.DataFrame) -> pl.DataFrame:
    """Every (step, event) pair with ``start_time <= ev_end`` and ``end_time >= ev_start``, by binary search.

    Steps are sorted by (rank, start) on one integer axis (``rank index x span + time``), so for each
    (event, rank) two ``search_sorted`` calls bound the candidate steps; the candidates are gathered and the
    exact condition checked. O((events x ranks) log steps + pairs): far cheaper than a general inequality
    join when a few thousand events meet a million steps. Ends are searched through their running maximum,
    so steps that overlap within a rank (a faulty log) are still found.

    Args:
        timed: ``step``, ``rank``, ``start_time``, ``end_time``.
        widened: ``event_id``, ``link``, ``device``, ``interface``, ``kind``, ``ev_start``, ``ev_end``.

    Returns:
        The columns of both, one row per meeting pair.
    """
    if timed.is_empty() or widened.is_empty():
        return timed.clear().join(widened.clear(), how="cross")
    times = pl.concat(
        [
            timed.select(t="start_time"),
            timed.select(t="end_time"),
            widened.select(t="ev_start"),
            widened.select(t="ev_end"),
        ]
    )
    bounds = times.select(low=pl.col("t").dt.epoch("ns").min(), high=pl.col("t").dt.epoch("ns").max())
    low, high = bounds.row(0)
    origin, span = int(low) - 1, int(high) - int(low) + 3
    ranks = timed.select(pl.col("rank").unique().sort()).with_row_index("rank_index")
    if span * (ranks.height + 1) >= 2**62:  # the axis would overflow: fall back to the general join
        return timed.join_where(
            widened, pl.col("start_time") <= pl.col("ev_end"), pl.col("end_time") >= pl.col("ev_start")
        )
    offset = pl.col("rank_index").cast(pl.Int64) * span
    ordered = timed.join(ranks, on="rank").sort("rank_index", "start_time")
    ordered = ordered.with_columns(
        start_key=offset + _int_ns("start_time", origin),
        reach=(offset + _int_ns("end_time", origin)).cum_max(),
    )
    probes = widened.join(ranks, how="cross").with_columns(
        lo_key=offset + _int_ns("ev_start", origin), hi_key=offset + _int_ns("ev_end", origin)
    )
    lo = ordered["reach"].search_sorted(probes["lo_key"], side="left")
    hi = ordered["start_key"].search_sorted(probes["hi_key"], side="right")
    probes = probes.with_columns(lo=lo, hi=hi).filter(pl.col("hi") > pl.col("lo"))
    candidates = probes.with_columns(index=pl.int_ranges("lo", "hi")).explode("index")
    steps = ordered.select(*_STEP, "start_time", "end_time")[candidates["index"]]
    joined = pl.concat([steps, candidates.select(widened.columns)], how="horizontal")
    return joined.filter(pl.col("end_time") >= pl.col("ev_start"), pl.col("start_time") <= pl.col("ev_end"))


def baselines(steps: pl.LazyFrame, pairs: pl.LazyFrame) -> pl.LazyFrame:
    """Per rank: the median and MAD of the durations of clean steps (all steps when none is clean).

    Args:
        steps: ``prepare_steps`` output.
        pairs: ``overlaps`` output.

    Returns:
        Columns ``rank``, ``baseline_seconds``, ``mad_seconds``.
    """
    touched = pairs.select(_STEP).unique().with_columns(touched=pl.lit(True))
    marked = steps.join(touched, on=_STEP, how="left").with_columns(pl.col("touched").fill_null(False))
    clean = ~pl.col("touched")
    medians = marked.group_by("rank").agg(
        baseline_seconds=pl.coalesce(
            pl.col("duration_seconds").filter(clean).median(), pl.col("duration_seconds").median()
        )
    )
    deviation = (pl.col("duration_seconds") - pl.col("baseline_seconds")).abs()
    return (
        marked.join(medians, on="rank")
        .group_by("rank")
        .agg(
            pl.col("baseline_seconds").first(),
            mad_seconds=pl.coalesce(deviation.filter(clean).median(), deviation.median()),
        )
    )


def step_table(
    steps: pl.LazyFrame,
    pairs: pl.LazyFrame,
    thresholds: Thresholds,
    kineto: pl.DataFrame | None = None,
    inspector: pl.DataFrame | None = None,
) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Inflation per step and its attribution to events.

    Args:
        steps: ``prepare_steps`` output.
        pairs: ``overlaps`` output.
        thresholds: ``inflated_min_ratio`` and ``inflated_mad_factor`` decide which steps are inflated.
        kineto: optional ``schemas.KINETO_STEPS`` rows, joined for the exposed-communication cross-check.
        inspector: optional ``gpu_time.inspector_step_communication`` rows, joined beside Kineto's figures.

    Returns:
        ``(steps, attribution)``: ``schemas.STEP_ANALYSIS`` and ``schemas.ATTRIBUTION`` rows.
    """
    # Collected at each stage: the plan uses pairs and attribution twice, and re-running them costs more
    # than holding them.
    pairs = pairs.collect().lazy()
    base = baselines(steps, pairs).collect().lazy()
    inflation = (pl.col("duration_seconds") - pl.col("baseline_seconds")).clip(lower_bound=0.0)
    floor = pl.max_horizontal(
        pl.col("baseline_seconds") * thresholds.inflated_min_ratio,
        pl.col("mad_seconds") * _MAD_TO_SIGMA * thresholds.inflated_mad_factor,
    )
    rows = steps.join(base, on="rank", how="left").with_columns(inflation_seconds=inflation)
    rows = rows.with_columns(inflated=pl.col("inflation_seconds") > floor)
    rows = rows.collect().lazy()
    attribution = _attribute(rows, pairs).collect().lazy()
    top = _top(attribution)
    rows = rows.join(top, on=_STEP, how="left").with_columns(pl.col("events").fill_null(0))
    given = attribution.group_by(_STEP).agg(attributed=pl.col("attributed_seconds").sum())
    rows = rows.join(given, on=_STEP, how="left").with_columns(
        unexplained_seconds=(pl.col("inflation_seconds") - pl.col("attributed").fill_null(0.0)).clip(
            lower_bound=0.0
        )
    )
    if kineto is not None and kineto.height:
        exposed = (
            kineto.lazy()
            .group_by(_STEP)
            .agg(pl.col("communication_seconds").sum(), pl.col("exposed_communication_seconds").sum())
        )
        rows = rows.join(exposed, on=_STEP, how="left")
    if inspector is not None and inspector.height:
        rows = rows.join(inspector.lazy(), on=_STEP, how="left")
    return (
        schemas.conform_lazy(schemas.STEP_ANALYSIS, rows.sort(_STEP)),
        schemas.conform_lazy(schemas.ATTRIBUTION, attribution),
    )


def _top(attribution: pl.LazyFrame) -> pl.LazyFrame:
    """Per step: the link with the largest summed share (and the kind of its largest event), the interface
    with the largest summed share (the finest place: a wave, for simulators that blame waves), the count."""
    # Ties between links are broken by the larger single event; shares are at most 1, so the small factor
    # keeps the link's total in charge.
    scored = attribution.with_columns(
        link_score=pl.col("share").sum().over([*_STEP, "link"]) + pl.col("share") * 1e-6,
        port_score=pl.col("share").sum().over([*_STEP, "device", "interface"]),
    )
    return scored.group_by(_STEP).agg(
        top_link=pl.col("link").get(pl.col("link_score").arg_max()),
        top_kind=pl.col("kind").get(pl.col("link_score").arg_max()),
        top_device=pl.col("device").get(pl.col("port_score").arg_max()),
        top_interface=pl.col("interface").get(pl.col("port_score").arg_max()),
        events=pl.len().cast(pl.Int64),
    )


def _attribute(rows: pl.LazyFrame, pairs: pl.LazyFrame) -> pl.LazyFrame:
    weights = pl.DataFrame({"kind": list(KIND_WEIGHTS), "weight": list(KIND_WEIGHTS.values())}).lazy()
    weighted = pairs.join(weights, on="kind", how="left").with_columns(
        weight=pl.col("overlap_seconds") * pl.col("weight").fill_null(0.5)
    )
    weighted = weighted.with_columns(share=pl.col("weight") / pl.col("weight").sum().over(_STEP))
    # Every step that overlaps an event gives its whole inflation, not only steps past the "inflated"
    # threshold: a network that adds less than the step-time noise per step still adds it to every step it
    # touches (on the simulated fabric, thresholding lost 10-20% of the true exposed time). The cost is the
    # positive half of step-time noise on overlapping steps (about 0.4 x its standard deviation each).
    inflation = rows.select(*_STEP, given="inflation_seconds")
    return weighted.join(inflation, on=_STEP, how="inner").with_columns(
        attributed_seconds=pl.col("share") * pl.col("given")
    )
