"""Signals -> congestion and health episodes per link member interface (pure LazyFrame logic).

Each event kind is declared once in ``analyzer.kinds``: the catalogue metrics it reads, which direction is
bad, and its enter/exit levels. Detection is vectorised per series:

1. hysteresis: a reading past the enter level switches the series on, one past the exit level switches it
   off, anything in between keeps the previous state (a forward fill of the on/off decisions); levels may
   read the place's normal (optics, other traffic classes: ``analyzer.kinds``), and an optical reading
   without signal (a sentinel, or covering time its interface was down) is off: that is an outage;
2. runs of "on" readings become raw episodes; each reading covers the interval it describes: a rate or a
   peak covers ``(previous reading, reading]``, an instant gauge the half-way points around it;
3. raw episodes of one kind on one interface (every queue, priority and metric together) are merged when
   closer than the merge gap, then those shorter than the minimum duration are dropped;
4. one optical event per wave end (``one_per_wave``); with the job's class known, other classes' events
   that are the job's class seen from below go, and a surge of the job's class that squeezed them is
   its ``burst`` (``background``).

Two inputs are derived before the rules run: ECN marks become the marked share of the queue's
transmitted packets (``ecn_fraction``), and optical-channel series, which carry a ``component`` instead of
an interface, are placed by their component.
"""

from __future__ import annotations

import polars as pl

from analyzer import kinds, optical_signal, schemas
from analyzer.kinds import ECN, ECN_FRACTION, KINDS, LOW_IS_BAD, QUEUE_DROPPED, QUEUE_SENT, SURGE, Rule
from analyzer.telemetry import COUNTERS, INTERVAL_GAUGES, STATE_GAUGES
from analyzer.thresholds import Thresholds

EVENT_KEYS = ["kind", "link", "device", "interface"]
RELOCK_SECONDS = 2.0  # after a wave is seen up again, its errors are still the outage's (``outages``)
ONE_READING_SHARE = 0.5
"""Another class's episode seen in one reading stands when that reading covers at least this share of the
telemetry's usual interval: a rate over a whole poll is as good as any, while a counter read again within a
fraction of a second (two subscriptions of one leaf) gives any rate. Half a poll tells the two apart."""
EVENT_KEYS_QUEUE = [*EVENT_KEYS, "queue", "start_time"]  # one merged event
RULES: tuple[tuple[str, Rule], ...] = tuple(
    (kind.name, rule) for kind in KINDS.values() for rule in kind.rules
)
"""Every (kind, rule) pair, in the order of ``analyzer.kinds.KINDS``."""
_SIGNALED = frozenset(optical_signal.BER_METRICS + optical_signal.SNR_METRICS)  # may read no-signal


def ecn_fraction(signals: pl.LazyFrame, labels: pl.LazyFrame) -> pl.LazyFrame:
    """The ECN rows the rules read: the marked share of the queue's transmitted packets where both are there.

    Args:
        signals: ``schemas.SIGNALS`` rows grouped by series in time order.
        labels: ``schemas.SERIES`` rows.

    Returns:
        ``schemas.SIGNALS`` rows: paired ECN-mark rows as ``ECN_FRACTION`` rows (same series id), unpaired
        ones unchanged, each metric's rows grouped by series in time order. No other metric.
    """
    # An ingress queue (``direction``) is another queue than the egress one of the same name.
    queue = labels.select("series", "device", "interface", "queue", "direction")
    on = ["device", "interface", "queue", "direction", "time"]
    marks = signals.filter(pl.col("metric") == ECN).join(queue, on="series")
    sent = signals.filter(pl.col("metric") == QUEUE_SENT).join(queue, on="series").select(*on, sent="value")
    paired = marks.join(sent, on=on, how="inner", nulls_equal=True)
    share = pl.when(pl.col("sent") > 0).then(pl.col("value") / pl.col("sent")).otherwise(0.0)
    fraction = paired.with_columns(metric=pl.lit(ECN_FRACTION, schemas.METRIC), value=share).select(
        list(schemas.SIGNALS)
    )
    unpaired = marks.join(paired.select("series").unique(), on="series", how="anti").select(
        list(schemas.SIGNALS)
    )
    return pl.concat([unpaired.sort("series", "time"), fraction.sort("series", "time")])


def _state(rule: Rule, thresholds: Thresholds) -> pl.Expr:
    """On/off per reading with hysteresis: on past enter, off past exit, otherwise as before; a reading
    without signal (``masked``) is off."""
    value, enter, leave = pl.col("value"), rule.enter(thresholds), rule.exit(thresholds)
    on, off = (value < enter, value >= leave) if rule.low_is_bad else (value >= enter, value < leave)
    decision = pl.when(pl.col("masked")).then(False).when(value.is_null()).then(None)
    decision = decision.when(on).then(True).when(off).then(False)
    # Rows are grouped by series: giving every series' first reading a state makes one global forward fill
    # equal to a per-series one, without a window group-by.
    first = (pl.col("series") != pl.col("series").shift(1)).fill_null(True)
    return pl.when(first).then(decision.fill_null(False)).otherwise(decision).forward_fill()


def _coverage() -> tuple[pl.Expr, pl.Expr]:
    """The interval each reading describes: (previous, reading] for rates and peaks, [reading, next) for a
    state (sent when it changes), else mid-points."""
    interval = pl.col("metric").is_in(sorted(COUNTERS | INTERVAL_GAUGES | {ECN_FRACTION}))
    state = pl.col("metric").is_in(sorted(STATE_GAUGES))
    time, prev, nxt = pl.col("time"), pl.col("prev_time"), pl.col("next_time")
    start = (
        pl.when(interval)
        .then(pl.coalesce(prev, time))
        .when(state)
        .then(time)
        .otherwise(pl.coalesce(prev + (time - prev) / 2, time))
    )
    end = (
        pl.when(interval)
        .then(time)
        .when(state)
        .then(pl.coalesce(nxt, time))
        .otherwise(pl.coalesce(time + (nxt - time) / 2, time))
    )
    return start.alias("start_time"), end.alias("end_time")


def _normal(rule: Rule) -> pl.Expr:
    """The normal of a place (device, interface, queue, direction): the median of the readings with signal
    of each of its series, the most lenient of them (a queue's watermark, not the occupancy that is mostly
    0)."""
    median = pl.col("value").filter(~pl.col("masked")).median().over("series")
    return (median.min() if rule.low_is_bad else median.max()).over("place")


def _masked(readings: pl.LazyFrame, down: pl.LazyFrame | None) -> pl.LazyFrame:
    """``masked``: a reading that is a no-signal sentinel, or covers time its interface was down (errors
    counted then are the outage's: loss of light and relocking, not a degraded signal)."""
    masked = readings.with_columns(masked=optical_signal.no_signal(pl.col("metric"), pl.col("value")))
    if down is None:
        return masked
    overlap = (pl.col("start_time") < pl.col("down_end")) & (pl.col("end_time") > pl.col("down_start"))
    hits = (
        masked.select("series", "time", "start_time", "end_time")
        .join(down, on="series")
        .filter(overlap)
        .select("series", "time", outage=pl.lit(True))
        .unique()
    )
    joined = masked.join(hits, on=["series", "time"], how="left", maintain_order="left")
    return joined.with_columns(masked=pl.col("masked") | pl.col("outage").fill_null(False)).drop("outage")


def raw_episodes(
    signals: pl.LazyFrame,
    kind: str,
    rule: Rule,
    thresholds: Thresholds,
    down: pl.LazyFrame | None = None,
    normal: bool = True,
) -> pl.LazyFrame:
    """Runs of readings of one rule's metrics that are "on", one row per run and series.

    Args:
        signals: ``schemas.SIGNALS`` rows grouped by series in time order, optionally with the link figures
            ``bdp_bytes``, ``fec_limit_ber`` and ``osnr_required_db`` and ``background`` (the series is
            of another traffic class than the job's).
        kind: the kind the rule recognises.
        rule: the rule to apply.
        thresholds: the levels.
        down: ``series``, ``down_start``, ``down_end``: when the interface of a series was down; its
            readings covering that time are off.
        normal: False when no series needs its normal (a congestion rule without another class's
            series): the window over every reading is then skipped.

    Returns:
        Columns ``kind``, ``series``, ``metric``, ``start_time``, ``end_time``,
        ``score`` (the worst value, negated for low-is-bad kinds so that larger is always worse), ``samples``,
        ``covered`` (the seconds its readings' intervals span).
    """
    keyed = signals.filter(pl.col("metric").is_in(list(rule.metrics)))  # keeps the order
    fec, osnr = thresholds.optical_limits()
    present = keyed.collect_schema().names()
    if "bdp_bytes" not in present:
        keyed = keyed.with_columns(bdp_bytes=pl.lit(None, pl.Float64()))
    limits = {"fec_limit_ber": fec, "osnr_required_db": osnr}  # the default profile's, for series of no link
    keyed = keyed.with_columns(
        (pl.col(name).fill_null(value) if name in present else pl.lit(value, pl.Float64())).alias(name)
        for name, value in limits.items()
    )
    if "background" not in present:
        keyed = keyed.with_columns(background=pl.lit(False))
    if "ingress" not in present:  # series not placed (no config): read as egress queues
        keyed = keyed.with_columns(ingress=pl.lit(False))
    if "place" not in present:
        keyed = keyed.with_columns(place=pl.col("series").cast(pl.String))
    staged = keyed.with_columns(*_coverage())
    if set(rule.metrics) & _SIGNALED or down is not None:
        staged = _masked(staged, down)
    else:
        staged = staged.with_columns(masked=pl.lit(False))
    if rule.relative:
        staged = staged.with_columns(normal=_normal(rule) if normal else pl.lit(None, pl.Float64()))
    staged = staged.with_columns(_state(rule, thresholds).alias("on"))
    runs = staged.with_columns(run=(pl.col("on") != pl.col("on").shift(1)).fill_null(True).cum_sum())
    sign = -1.0 if rule.low_is_bad else 1.0
    return (
        runs.filter("on")
        .group_by("series", "run")
        .agg(
            pl.col("metric").first(),
            pl.col("start_time").min(),
            pl.col("end_time").max(),
            score=(pl.col("value") * sign).max(),
            samples=pl.len().cast(pl.Int64),
            covered=pl.col("seconds").sum(),
        )
        .select(pl.lit(kind).alias("kind"), pl.exclude("run"))
    )


def merge_episodes(raw: pl.LazyFrame, gap_seconds: float) -> pl.LazyFrame:
    """Merge raw episodes of one kind on one interface that overlap or are at most ``gap_seconds`` apart.

    Args:
        raw: ``raw_episodes`` output (any number of rules concatenated).
        gap_seconds: the largest gap bridged.

    Returns:
        Columns as ``raw`` with ``metrics`` (sorted, comma-separated) instead of ``metric``; episodes of
        different queues (``queue``, when ``raw`` has one) are never merged.
    """
    gap = pl.duration(microseconds=int(gap_seconds * 1e6))
    # Queues (traffic classes) are merged apart: the job's class and the background are different stories.
    keys = [*EVENT_KEYS, "queue"] if "queue" in raw.collect_schema() else EVENT_KEYS
    reach = pl.col("end_time").cum_max().shift(1).over(keys)
    new_block = (pl.col("start_time") > reach + gap).fill_null(True)
    blocks = raw.sort([*keys, "start_time"], nulls_last=True).with_columns(
        block=new_block.cast(pl.Int64).cum_sum().over(keys)
    )
    return blocks.group_by([*keys, "block"]).agg(
        pl.col("start_time").min(),
        pl.col("end_time").max(),
        pl.col("score").max(),
        pl.col("samples").sum(),
        pl.col("covered").max(),
        metrics=pl.col("metric").cast(pl.String).unique().sort().str.join(","),
    )


def per_queue_drops(events: pl.LazyFrame, labels: pl.LazyFrame) -> pl.LazyFrame:
    """Interface-level drop events where the interface also counts drops per queue: the same drops
    counted twice (transmit discards are the queues' drops summed), the per-queue copy says which class."""
    counted = (
        labels.filter((pl.col("metric").cast(pl.String) == QUEUE_DROPPED) & pl.col("queue").is_not_null())
        .select("device", "interface")
        .unique()
        .with_columns(per_queue=pl.lit(True))
    )
    marked = events.join(counted, on=["device", "interface"], how="left")
    interface_level = ~pl.col("metrics").str.contains(QUEUE_DROPPED)
    copy = (pl.col("kind") == "drops") & pl.col("queue").is_null() & interface_level
    copy = copy & pl.col("per_queue").fill_null(False)
    return marked.filter(~copy).drop("per_queue")


OPTICAL = frozenset(k.name for k in KINDS.values() if k.family == "optical")


def one_per_wave(events: pl.LazyFrame) -> pl.LazyFrame:
    """Drop an optical event lying within another optical event of the same place: one failing wave end
    raises BER, then FEC and FCS counters, each read on its own schedule: the widest is the episode, the
    others are the same episode seen late or early (they would stand alone as its tail)."""
    place = ["device", "interface"]
    optical = events.filter(pl.col("kind").is_in(sorted(OPTICAL)))
    outer = optical.select(*place, o_kind="kind", o_start="start_time", o_end="end_time")
    inside = (pl.col("start_time") >= pl.col("o_start")) & (pl.col("end_time") <= pl.col("o_end"))
    same = (pl.col("start_time") == pl.col("o_start")) & (pl.col("end_time") == pl.col("o_end"))
    # Of events with the same span, the kind first in alphabetical order stays.
    within = (
        optical.join(outer, on=place)
        .filter((pl.col("kind") != pl.col("o_kind")) & inside & (~same | (pl.col("o_kind") < pl.col("kind"))))
        .select("kind", *place, "start_time")
        .unique()
    )
    return events.join(within, on=["kind", *place, "start_time"], how="anti", nulls_equal=True)


def surges(
    signals: pl.LazyFrame, labels: pl.LazyFrame, thresholds: Thresholds, job_class: str
) -> pl.LazyFrame:
    """When the job's class sent ``SURGE`` times its normal packet rate: ``link``, ``device``,
    ``interface``, ``start_time``, ``end_time``, ``score`` (the highest rate), ``samples``."""
    job = labels.filter(pl.col("queue") == job_class).select("series", "link", "device", "interface")
    rows = signals.filter(pl.col("metric") == QUEUE_SENT).join(job.select("series"), on="series")
    runs = raw_episodes(rows, "burst", SURGE, thresholds)
    return runs.join(job, on="series").drop("series", "kind", "metric")


def _touching(
    frame: pl.LazyFrame,
    spans: pl.LazyFrame,
    on: list[str],
    keys: list[str],
    touch: bool = True,
) -> pl.LazyFrame:
    """The rows of ``frame`` (identified by ``keys``) whose time overlaps (``touch``) or overlaps none (not
    ``touch``) of the ``spans`` rows with the same ``on`` keys; sharing only an edge counts."""
    hits = (
        frame.join(spans.select(*on, _start="start_time", _end="end_time"), on=on)
        .filter((pl.col("start_time") <= pl.col("_end")) & (pl.col("end_time") >= pl.col("_start")))
        .select(keys)
        .unique()
    )
    return frame.join(hits, on=keys, how="semi" if touch else "anti", nulls_equal=True)


def _covered(
    frame: pl.LazyFrame, spans: pl.LazyFrame, on: list[str], keys: list[str], below: float
) -> pl.LazyFrame:
    """The rows of ``frame`` (identified by ``keys``) that the ``spans`` rows with the same ``on`` keys
    cover for less than ``below`` of their time (overlapping spans counted once each)."""
    seconds = (pl.col("end_time") - pl.col("start_time")).dt.total_nanoseconds() / 1e9
    shared = (
        pl.min_horizontal("end_time", "_end") - pl.max_horizontal("start_time", "_start")
    ).dt.total_nanoseconds() / 1e9
    covered = (
        frame.join(spans.select(*on, _start="start_time", _end="end_time"), on=on)
        .with_columns(shared=shared.clip(lower_bound=0.0), seconds=seconds)
        .group_by(keys)
        .agg(pl.col("shared").sum(), pl.col("seconds").first())
        .filter(pl.col("shared") >= below * pl.col("seconds").clip(lower_bound=1e-9))
        .select(keys)
    )
    return frame.join(covered, on=keys, how="anti", nulls_equal=True)


def offered_rise(signals: pl.LazyFrame, labels: pl.LazyFrame, job_class: str) -> pl.LazyFrame:
    """Per reading of another class's egress queue, its offered packet rate (transmitted + dropped) over
    the median of its readings: ``device``, ``interface``, ``queue``, ``time``, ``rise``.

    Only readings that carry both counters at one time count: one alone is not what was offered.
    """
    place = ["device", "interface", "queue"]
    queues = labels.filter(pl.col("queue").is_not_null() & (pl.col("queue") != job_class) & kinds.EGRESS)
    rows = signals.filter(pl.col("metric").is_in([QUEUE_SENT, QUEUE_DROPPED]) & pl.col("value").is_not_null())
    both = (
        rows.join(queues.select("series", *place), on="series")
        .group_by(*place, "time")
        .agg(offered=pl.col("value").sum(), counters=pl.col("metric").n_unique())
        .filter(pl.col("counters") == 2)
    )
    return both.select(*place, "time", rise=pl.col("offered") / pl.col("offered").median().over(place))


def _by_offered_load(
    other: pl.LazyFrame, offered: pl.LazyFrame, level: float, keys: list[str]
) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """The ``other`` events whose class offered at least ``level`` x its normal load over their time, and
    those whose load no reading shows."""
    place = ["device", "interface", "queue"]
    inside = (pl.col("time") > pl.col("start_time")) & (pl.col("time") <= pl.col("end_time"))
    load = other.join(offered, on=place).filter(inside).group_by(keys).agg(rise=pl.col("rise").mean())
    unseen = other.join(load, on=keys, how="anti", nulls_equal=True)
    risen = other.join(load.filter(pl.col("rise") >= level), on=keys, how="semi", nulls_equal=True)
    return risen, unseen


def background(
    events: pl.LazyFrame,
    surge: pl.LazyFrame,
    job_class: str,
    offered: pl.LazyFrame | None = None,
    offered_level: float = 1.5,
    usual_seconds: float | None = None,
) -> pl.LazyFrame:
    """Events of other traffic classes that are episodes of their own, and the job's class's bursts.

    Under strict priority another class is served with what the job's class leaves: its drops and marks
    while the job's class on the same interface is in an episode, or sends a surge (``surges``), for at
    least half of their time, are that episode seen from below, not another one. Nor is a state it
    reaches without being offered more load than usual (``offered``: ``offered_rise``): the job's class
    took more of the port (catching up after a pause, a few more bytes a step), which no surge threshold
    sees; another tenant's episode is more load. Where that load is read it decides alone, so another
    tenant's episode inside one of the job's class stays. A surge that squeezed another class while the
    job's class shows nothing of its own there is a ``burst`` of the job's class, unless an optical or
    outage event on the link explains it (the job resends what a failing wave lost). A single reading is
    evidence of another class's episode only when it covers ``ONE_READING_SHARE`` of the usual interval
    (a burst shorter than a poll shows in one reading), of a burst never. (A state another class holds all
    run is its normal: the rules' ``background`` levels.)

    Args:
        events: merged events with ``queue``.
        surge: ``surges`` output.
        job_class: the job's traffic class.
        offered: ``offered_rise`` output; without it every other-class episode of its own stays.
        offered_level: the least mean ``rise`` over an episode of its own.
        usual_seconds: the telemetry's usual interval between readings; without it one reading of another
            class is never an episode.
    """
    place = ["device", "interface"]
    is_other = pl.col("queue").is_not_null() & (pl.col("queue") != job_class)
    whole = pl.col("covered") >= ONE_READING_SHARE * usual_seconds if usual_seconds else pl.lit(False)
    other = events.filter(is_other & ((pl.col("samples") > 1) | whole.fill_null(False)))
    own = events.filter(pl.col("queue") == job_class)
    job_spans = pl.concat(
        [own.select(*place, "start_time", "end_time"), surge.select(*place, "start_time", "end_time")]
    )
    failing = [k.name for k in KINDS.values() if k.family in ("optical", "down")]
    run = [*place, "start_time"]  # a surge's key
    bursts = _touching(surge.filter(pl.col("samples") > 1), other, place, run)
    bursts = _touching(bursts, own, place, run, touch=False)
    failures = events.filter(pl.col("kind").is_in(failing))
    bursts = _touching(bursts, failures, ["link"], run, touch=False)
    duration = (pl.col("end_time") - pl.col("start_time")).dt.total_nanoseconds() / 1e9
    found = bursts.with_columns(
        kind=pl.lit("burst"),
        queue=pl.lit(job_class),
        metrics=pl.lit(QUEUE_SENT),
        worst="score",
        duration_seconds=duration,
    )
    # Where the class's offered load is read, it decides: more load than usual is another tenant's episode,
    # whatever the job's class does beside it (two tenants' episodes may overlap), and usual load is the
    # job's class seen from below. Where it is not read, an episode the job's class spans for less than
    # half of it is its own (one that only starts where the job's class ends, at the same reading, among
    # them): a short job-class event inside another class's long one does not explain it.
    unseen = other
    risen = other.clear()
    if offered is not None:
        risen, unseen = _by_offered_load(other, offered, offered_level, EVENT_KEYS_QUEUE)
    own_episodes = pl.concat([risen, _covered(unseen, job_spans, place, EVENT_KEYS_QUEUE, below=0.5)])
    kept = pl.concat([events.filter(~is_other.fill_null(False)), own_episodes])
    return pl.concat([kept, found], how="diagonal_relaxed")


def outages(signals: pl.LazyFrame, labels: pl.LazyFrame, thresholds: Thresholds) -> pl.LazyFrame:
    """When each interface was down, and relocking after: ``device``, ``interface``, ``down_start``,
    ``down_end`` (``RELOCK_SECONDS`` past the reading that saw it up: the far end's transmitter comes back
    on its own poll, and the errors a receiver counts while the wave relocks are the outage's)."""
    down_rule = KINDS["wave_down"].rules[0]
    rows = signals.filter(pl.col("metric").is_in(list(down_rule.metrics)))
    runs = raw_episodes(rows, "wave_down", down_rule, thresholds)
    place = labels.select("series", "device", "interface")
    relock = pl.duration(microseconds=round(RELOCK_SECONDS * 1e6))
    return runs.join(place, on="series").select(
        "device", "interface", down_start="start_time", down_end=pl.col("end_time") + relock
    )


def detect_events(
    signals: pl.LazyFrame,
    thresholds: Thresholds,
    labels: pl.LazyFrame,
    bdp: pl.LazyFrame | None = None,
    link_optics: pl.LazyFrame | None = None,
    job_class: str | None = None,
) -> pl.LazyFrame:
    """Every congestion and health episode the signals show.

    Args:
        signals: ``schemas.SIGNALS`` rows grouped by series in time order, as ``telemetry.signals`` gives them.
        thresholds: the levels, minimum duration and merge gap.
        labels: ``schemas.SERIES`` rows (``telemetry.series_labels``) naming each series' place.
        bdp: optional ``device``, ``interface``, ``bdp_bytes`` (``topology.interface_bdp``).
        link_optics: optional ``link``, ``fec_limit_ber``, ``osnr_required_db`` (``topology.link_optics``);
            series of no link get the default profile's.
        job_class: the job's traffic class; with it, the other classes' series enter past their normal
            (``analyzer.kinds``) and ``background`` filters their events.

    Returns:
        ``schemas.EVENTS`` rows sorted by start time, ``event_id`` numbered from 0 in that order.
    """
    # Each rule filters its own metrics (an enum: a cheap integer scan) rather than all rules sharing one
    # copy of every relevant row; only the ECN rules read derived rows.
    ecn = ecn_fraction(signals, labels).collect().lazy()
    queue = schemas.series_class()
    other = queue.is_not_null() & (queue != job_class) if job_class is not None else pl.lit(False)
    where = [pl.col("device"), pl.coalesce("interface", "component"), queue, pl.col("direction")]
    per_series = labels.select(
        "series",
        "device",
        "interface",
        "link",
        background=other,
        place=pl.concat_str(where, separator="/", ignore_nulls=True),
        ingress=((pl.col("direction") == "rx") & queue.is_not_null()).fill_null(False),
    )
    if bdp is not None:
        per_series = per_series.join(bdp, on=["device", "interface"], how="left")
    if link_optics is not None:
        per_series = per_series.join(link_optics, on="link", how="left")
    down = labels.select("series", "device", "interface").join(
        outages(signals, labels, thresholds).collect().lazy(), on=["device", "interface"]
    )
    down = down.drop("device", "interface")
    # One row per series: small, so collected once; most readings need none of it.
    per_series_df = per_series.drop("device", "interface", "link").collect()
    others = bool(per_series_df["background"].any())
    per_series = per_series_df.lazy()
    linked = bdp is not None or link_optics is not None
    inputs = []
    for kind, rule in RULES:
        rows = ecn if {ECN, ECN_FRACTION} & set(rule.metrics) else signals
        rows = rows.filter(pl.col("metric").is_in(list(rule.metrics)))
        optical = KINDS[kind].family == "optical"
        normal = rule.relative and (optical or others)
        if linked or normal:
            rows = rows.join(per_series, on="series", how="left", maintain_order="left")
        inputs.append(raw_episodes(rows, kind, rule, thresholds, down if optical else None, normal))
    raw = pl.concat(inputs, how="vertical_relaxed")
    # Optical-channel series (OpenConfig terminal-device) carry a component, not an interface: the
    # component names the place then. PFC series name their priority where queue series name the queue.
    place = labels.select(
        "series",
        "link",
        "device",
        interface=pl.coalesce("interface", "component"),
        queue=schemas.series_class(),
    )
    placed = raw.join(place, on="series", how="left")
    merged = merge_episodes(placed.drop("series"), thresholds.merge_gap_seconds)
    sign = pl.when(pl.col("kind").is_in(sorted(LOW_IS_BAD))).then(-1.0).otherwise(1.0)
    duration = (pl.col("end_time") - pl.col("start_time")).dt.total_nanoseconds() / 1e9
    merged = merged.with_columns(duration_seconds=duration, worst=pl.col("score") * sign)
    # Events are few: collected once, so the filters below that read them several times do not each
    # run detection again.
    merged = one_per_wave(per_queue_drops(merged, labels).collect().lazy())
    if job_class is not None:
        merged = background(
            merged,
            surges(signals, labels, thresholds, job_class).collect().lazy(),
            job_class,
            offered_rise(signals, labels, job_class).collect().lazy(),
            thresholds.background_offered_rise,
            signals.select(pl.col("seconds").median()).collect().item(),
        )
    events = (
        merged.filter(pl.col("duration_seconds") >= thresholds.min_duration_seconds)
        .sort("start_time", *EVENT_KEYS, nulls_last=True)
        .with_row_index("event_id")
    )
    return schemas.conform_lazy(schemas.EVENTS, events)
