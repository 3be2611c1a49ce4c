"""What the job's queue on each link went through, from the telemetry: the physics the blame rests on.

The telemetry pass keeps, per link end (a member device of a link), the running totals of the quantities
that slow the job's collectives, summed over the end's member interfaces (``readings``):

* ``sent``: bytes the job's traffic class transmitted (the job's own bytes plus any other traffic in its
  class, which shares the queue with it);
* ``dropped``: bytes the job's class dropped (``dropped_frames`` where only packets are counted),
  ``fcs`` frames received with a bad FCS (lost to the optics), and ``discarded`` frames the end discarded
  as they arrived beyond its usual rate (``ifInDiscards``: a receive buffer that overflowed, as a lossy
  incast's does at the far end; counted per port, not per class, as FCS errors are; what a port discards
  all along, control frames or filtered traffic, is its steady state, its median rate over the run): all
  are sent again;
* ``paused``: seconds the job's priority was paused by the far end (PFC received), and ``pausing``: PFC
  pause time the end sent (to its own hosts, and over the wave to the far end);
* ``down``: wave-seconds the member interfaces were operationally down (a wave down shrinks the link);
* ``slow``: wave-seconds lost to a member's speed below its usual (its median over the run): a port that
  steps down its line rate shrinks the link as a wave down does, in part;
* ``ingress``: byte-seconds of the job's class the end held in its ingress queues (``direction="rx"``
  watermarks x their interval): a deep-buffer switch draining the class slowly to its hosts (an incast)
  holds the job's bytes there without pausing the link or queueing at the sender. The watermark, the
  peak over the interval it closes, is read rather than the instant length: every OpenConfig device
  reports it, and it covers the interval as a counter's increase does (an upper bound of the bytes held,
  which the blame's measured gain scales);
* ``queued``: byte-seconds the job class's egress queues held beyond their usual length (the series'
  median: the job's own bursts) where they stood: past ``HELD_OVER_USUAL`` times it in two consecutive
  readings. A standing queue (other traffic in the class filling a deep buffer) delays every one of the
  job's packets by its length over its drain rate, whatever share of the port the job gets; one reading's
  peak is a burst (the job's own, as its ranks resume together), not a queue that stands.

Only readings that add something, and their neighbours (the anchors of the interpolation), are kept: a
quiet counter between two quiet readings adds nothing to any window. Each end's first and last reading
bound its observation (``window_amounts``' ``covered``).

Only the job's traffic class is read (``--job-traffic-class``): traffic in other classes is served after
the job's and never slows it, so it is shown as background, never blamed. Running totals make the amount
over any window a difference of two interpolations (``window_amounts``), whatever the poll times.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analyzer import schemas
from analyzer.attribution.rules import HELD_OVER_USUAL, STEADY_QUANTILE
from analyzer.kinds import QUEUE_DROPPED

SENT = "dci_queue_transmit_bytes_total"
DROPPED = "dci_queue_dropped_bytes_total"
DROPPED_PACKETS = QUEUE_DROPPED
PAUSED = "dci_pfc_pause_duration_seconds_total"
FCS = "dci_interface_receive_fcs_errors_total"
DISCARDED = "dci_interface_receive_discards_total"
UP = "dci_interface_oper_up"
SPEED = "dci_interface_speed_bytes_per_second"
HELD = "dci_queue_watermark_bytes"
RTT_MIN = "dci_link_rtt_seconds_min"
METRICS = frozenset({SENT, DROPPED, DROPPED_PACKETS, PAUSED, FCS, DISCARDED, UP, SPEED, HELD, RTT_MIN})
_US = pl.Datetime("us", "UTC")
QUANTITIES = (
    "sent",
    "dropped",
    "dropped_frames",
    "paused",
    "pausing",
    "fcs",
    "discarded",
    "down",
    "slow",
    "ingress",
    "queued",
)
KEYS = ["link", "device", "quantity"]

READINGS: pl.Schema = pl.Schema(
    {
        "link": pl.String(),
        "device": pl.String(),
        "quantity": pl.String(),
        "time": schemas.TIME,
        "amount": pl.Float64(),
    }
)
"""One row per reading: what it adds to its quantity's running total (counters: the interval's increase;
``down``: 1 - up, ``slow``: the share of its usual speed missing (over at most a poll; before that the
previous reading's), and ``ingress``: the bytes held, x the interval's seconds); a state's last reading also
adds its state up to its end's last state reading."""

MEMBERS: pl.Schema = pl.Schema(
    {"link": pl.String(), "device": pl.String(), "interfaces": pl.UInt32(), "capacity": pl.Float64()}
)
"""Per link end: member interfaces seen and their summed speed (bytes/s)."""


def readings(signals: pl.LazyFrame, labels: pl.LazyFrame, job_class: str | None) -> pl.LazyFrame:
    """The physics rows of one batch of signals (``READINGS``).

    Args:
        signals: ``schemas.SIGNALS`` rows.
        labels: ``schemas.SERIES`` rows.
        job_class: the job's traffic class (queue and PFC priority name), or None: then no queue
            quantity is read (no class can be blamed without knowing which one is the job's).

    Returns:
        ``READINGS`` rows of link member interfaces.
    """
    # Which quantity each series is, from its metric and labels: only those series' readings are read on
    # (the job class's queues of link members, a small share of the readings). Signals are grouped by
    # series: a series' first row names its metric.
    first_rows = signals.filter((pl.col("series") != pl.col("series").shift(1)).fill_null(True))
    place = labels.select("series", "link", "device", "queue", "priority", "direction")
    named = first_rows.select("series", "metric").join(
        place.filter(pl.col("link").is_not_null()), on="series"
    )
    quantified = named.select("series", "link", "device", quantity=quantity_of(job_class))
    quantities = quantified.filter(pl.col("quantity").is_not_null()).collect()
    is_state = pl.col("quantity").is_in(["down", "slow"])
    metric = pl.col("metric").cast(pl.String)
    # A series never spans batches (one device's whole run): its median is its usual queue length.
    # Computed once, as a column: the expressions below read it several times.
    usual = pl.col("usual")
    # A reading covers the interval since the previous one: a watermark is its peak, a counter's increase
    # its sum; the first reading of a series covers none.
    beyond_usual = (pl.col("increase") - pl.col("usual_rate") * pl.col("seconds")).clip(lower_bound=0.0)
    amount = (
        pl.when(metric == HELD)
        .then(pl.col("value") * pl.col("seconds"))
        .when(metric == DISCARDED)
        .then(beyond_usual)
        .otherwise(pl.col("increase"))
    )
    high = pl.col("high")
    stands = high & ((_same_prev & high.shift(1)) | (_same_next & high.shift(-1))).fill_null(False)
    standing = pl.when(stands).then((pl.col("value") - usual) * pl.col("seconds")).otherwise(0.0)
    sig = (
        signals.filter(pl.col("series").is_in(quantities.filter(~is_state)["series"].implode()))
        .with_columns(
            usual=pl.col("value").median().over("series"),
            # Readings with no time between them (two of one instant) tell no rate.
            usual_rate=(pl.col("increase") / pl.col("seconds"))
            .filter(pl.col("seconds") > 0)
            .median()
            .over("series")
            .fill_null(0.0),
        )
        .with_columns(high=(metric == HELD) & (pl.col("value") > HELD_OVER_USUAL * usual))
        .with_columns(amount=amount.fill_null(0.0), standing=standing.fill_null(0.0))
    )
    rows = sig.filter(_adds_or_anchors()).join(quantities.lazy(), on="series")
    amount = pl.when(pl.col("quantity") == "queued").then(pl.col("standing")).otherwise(pl.col("amount"))
    out = rows.select("link", "device", "time", "quantity", amount=amount)
    held = state_readings(signals, quantities.filter(is_state))
    return schemas.conform_lazy(READINGS, pl.concat([out, held], how="diagonal"))


# Signals are grouped by series in time order: neighbours are a shift away.
_same_prev = (pl.col("series") == pl.col("series").shift(1)).fill_null(False)
_same_next = (pl.col("series") == pl.col("series").shift(-1)).fill_null(False)


def _adds_or_anchors() -> pl.Expr:
    """A reading that adds something, and its neighbours (the anchors of the interpolation), and each
    series' first and last (its observation's bounds)."""
    adds = pl.col("amount") > 0
    return (
        adds
        | ~_same_prev
        | ~_same_next
        | (_same_prev & adds.shift(1).fill_null(False))
        | (_same_next & adds.shift(-1).fill_null(False))
    )


def state_readings(signals: pl.LazyFrame, states: pl.DataFrame) -> pl.LazyFrame:
    """The readings of the state series (up, speed; ``states``: their ``series``, ``link``, ``device``,
    ``quantity``): the share of its end's capacity a state took away, x the seconds it held.

    A state read at a poll changed somewhere in the poll before it; one read after a longer gap (a stream
    sent on change, gNMI ON_CHANGE oper-status, or a heartbeat repeating it) changed no earlier than a poll
    before it: until then the previous reading's state held. The poll is the usual interval of the states'
    readings (a speed is sampled at every poll). The last reading's state holds until its end's last state
    reading (a speed is sampled to the end of the end's observation, ``window_amounts``; a state sent on
    change may not be read again). Few series are states: they are read apart from the others.
    """
    metric = pl.col("metric").cast(pl.String)
    usual = pl.col("usual")
    lacking = (
        pl.when(metric == UP)
        .then(1 - pl.col("value"))
        .when(usual > 0)
        .then((1 - pl.col("value") / usual).clip(0.0, 1.0))
        .otherwise(0.0)
    )
    read = (
        signals.filter(pl.col("series").is_in(states["series"].implode()))
        .with_columns(usual=pl.col("value").median().over("series"))
        .with_columns(lacking=lacking, last=~_same_next)
    )
    poll = read.select(pl.col("seconds").median()).collect().item()
    recent = pl.min_horizontal("seconds", pl.lit(poll, pl.Float64))
    earlier = pl.when(_same_prev).then(pl.col("lacking").shift(1)) * (pl.col("seconds") - recent)
    amount = (pl.col("lacking") * recent + earlier).fill_null(0.0)
    placed = (
        read.with_columns(amount=amount)
        .filter(_adds_or_anchors())
        .join(states.lazy(), on="series")
        .with_columns(end=pl.col("time").max().over("link", "device"))
    )
    after = (pl.col("end") - pl.col("time")).dt.total_nanoseconds() / 1e9
    closing = placed.filter("last").select(
        "link", "device", time="end", quantity="quantity", amount=pl.col("lacking") * after
    )
    return pl.concat(
        [placed.select("link", "device", "time", "quantity", "amount"), closing.filter(pl.col("amount") > 0)]
    )


def quantity_of(job_class: str | None) -> pl.Expr:
    """Which physics quantity a series (its ``metric`` and labels) is, or null (``readings``)."""
    metric = pl.col("metric").cast(pl.String)
    mine = pl.lit(False) if job_class is None else pl.col("queue") == job_class
    ingress = mine & (pl.col("direction") == "rx")
    egress = mine & (pl.col("direction").fill_null("tx") != "rx")
    job_priority = pl.col("priority") == (job_class or "")
    paused_here = job_priority & (pl.col("direction").fill_null("rx") == "rx")
    pausing_here = job_priority & (pl.col("direction") == "tx")
    return (
        pl.when((metric == SENT) & mine)
        .then(pl.lit("sent"))
        .when((metric == DROPPED) & mine)
        .then(pl.lit("dropped"))
        .when((metric == DROPPED_PACKETS) & mine)
        .then(pl.lit("dropped_frames"))
        .when((metric == PAUSED) & paused_here)
        .then(pl.lit("paused"))
        .when((metric == PAUSED) & pausing_here)
        .then(pl.lit("pausing"))
        .when(metric == FCS)
        .then(pl.lit("fcs"))
        .when(metric == DISCARDED)
        .then(pl.lit("discarded"))
        .when(metric == UP)
        .then(pl.lit("down"))
        .when(metric == SPEED)
        .then(pl.lit("slow"))
        .when((metric == HELD) & ingress)
        .then(pl.lit("ingress"))
        .when((metric == HELD) & egress)
        .then(pl.lit("queued"))
    )


def last_states(readings: pl.DataFrame) -> pl.DataFrame:
    """Each link state series' last reading among ``schemas.TELEMETRY`` rows: a state sent on change (gNMI
    ON_CHANGE oper-status) holds until the next one, however long ago it was read."""
    states = readings.filter(pl.col("metric") == UP).sort("time")
    return states.group_by(schemas.SERIES_KEYS, maintain_order=True).last().select(readings.columns)


def members(signals: pl.LazyFrame, labels: pl.LazyFrame) -> pl.LazyFrame:
    """Per link end: member interfaces reporting a speed and their summed speed (``MEMBERS``)."""
    speed = signals.filter(pl.col("metric") == SPEED).group_by("series").agg(speed=pl.col("value").median())
    placed = speed.join(labels.select("series", "link", "device", "interface"), on="series")
    per_port = placed.filter(pl.col("link").is_not_null()).group_by("link", "device", "interface")
    ends = per_port.agg(pl.col("speed").median()).group_by("link", "device")
    return schemas.conform_lazy(
        MEMBERS, ends.agg(interfaces=pl.len().cast(pl.UInt32), capacity=pl.col("speed").sum())
    )


def round_trips(signals: pl.LazyFrame, labels: pl.LazyFrame) -> pl.LazyFrame:
    """Per link: the least of the probes' per-interval minimum round trips (its 5th percentile, so one odd
    reading does not decide), from ``dci_link_rtt_seconds_min``: the steady round trip is the path with
    no queue on it, and a probe only ever waits longer than that (behind the job's own traffic, most of
    the time, on a busy link)."""
    rtt = signals.filter(pl.col("metric") == RTT_MIN).join(labels.select("series", "link"), on="series")
    return (
        rtt.filter(pl.col("link").is_not_null() & (pl.col("value") > 0))
        .group_by("link")
        .agg(rtt_seconds=pl.col("value").quantile(STEADY_QUANTILE), rtt_probes=pl.len().cast(pl.Int64))
    )


def running_totals(readings: pl.LazyFrame) -> pl.LazyFrame:
    """Per (link, device, quantity): the running total at each reading time, members summed.

    Members of one end are polled in one request, so their readings interleave closely; crediting each
    increase at its reading time and interpolating between readings spreads it over the interval it
    describes.
    """
    summed = (
        readings.with_columns(pl.col("time").cast(_US))
        .group_by(*KEYS, "time")
        .agg(pl.col("amount").fill_null(0.0).sum())
    )
    return summed.sort(*KEYS, "time").with_columns(total=pl.col("amount").cum_sum().over(KEYS)).drop("amount")


CHUNK_ROWS = 250_000
"""A memory budget, not a rule of the method: the windows x link ends whose ``window_amounts`` are made at
once (about 30 MB, 0.1 GB while read; ``analyzer.attribution.grid``); a link with more is a chunk alone."""


STEP_CHUNK_ROWS = 500_000
"""A memory budget, not a rule of the method: the step rows (about 0.2 kB each through the blame) of the
ranks whose per-step stages run at once (``analyzer.attribution.pipeline``); a rank with more is a chunk
alone."""


def window_amounts(totals: pl.LazyFrame, windows: pl.LazyFrame) -> pl.LazyFrame:
    """What each quantity of each link end added over each window.

    Each (link end, quantity)'s running total is interpolated linearly at the windows' edges (held flat
    outside its readings): one ``numpy.interp`` per quantity over every series and window at once
    (``_increases``), written straight into the end x window columns.

    Args:
        totals: ``running_totals`` output.
        windows: ``window``, ``lo``, ``hi`` (switch clock).

    Returns:
        ``window``, ``link``, ``device``, one Float64 column per quantity (zero where not reported),
        ``covered`` (seconds of the window inside the end's observation) and ``seconds`` (its length).
    """
    frame = windows.with_columns(pl.col("lo", "hi").cast(_US)).collect()
    series = totals.with_columns(time=pl.col("time").cast(_US).dt.epoch("us")).collect()
    ends = series.select("link", "device").unique(maintain_order=True)
    if ends.is_empty():
        names = {"window": frame.schema["window"], "link": pl.String(), "device": pl.String()}
        return pl.LazyFrame(
            schema={**names, **dict.fromkeys(["covered", *QUANTITIES, "seconds"], pl.Float64())}
        )
    series = series.join(ends.with_row_index("end"), on=["link", "device"]).sort("end", "quantity", "time")
    lo = frame["lo"].dt.epoch("us").to_numpy()
    hi = frame["hi"].dt.epoch("us").to_numpy()
    span = series.group_by("end").agg(first=pl.col("time").min(), last=pl.col("time").max()).sort("end")
    first = span["first"].to_numpy().astype(np.float64)[:, None]
    last = span["last"].to_numpy().astype(np.float64)[:, None]
    covered = np.clip(
        np.minimum(hi.astype(np.float64), last) - np.maximum(lo.astype(np.float64), first), 0.0, None
    )
    seconds = frame.select(s=(pl.col("hi") - pl.col("lo")).dt.total_nanoseconds() / 1e9)["s"].to_numpy()
    end_of_row = np.repeat(np.arange(ends.height), frame.height)
    columns: dict[str, object] = {
        "window": pl.concat([frame["window"]] * ends.height),
        "link": ends["link"].gather(end_of_row),
        "device": ends["device"].gather(end_of_row),
        "covered": (covered / 1e6).ravel(),
    }
    for quantity in QUANTITIES:
        added = np.zeros((ends.height, frame.height))
        rows = series.filter(pl.col("quantity") == quantity).filter(moves().over("end"))
        if rows.height:
            added[rows["end"].unique(maintain_order=True).to_numpy()] = _increases(rows, lo, hi)
        columns[quantity] = added.ravel()
    columns["seconds"] = np.tile(seconds, ends.height)
    return pl.DataFrame(columns).lazy()


def moves() -> pl.Expr:
    """Whether a running total (``total``) moves: one that never does adds nothing to any window, as most
    series of a run."""
    return (pl.col("total").max() > pl.col("total").min()) | pl.col("total").is_nan().any()


def still_ends(totals: pl.DataFrame) -> pl.DataFrame:
    """The link ends (``link``, ``device``) none of whose running totals moves: they read the same, nothing,
    in every window."""
    moving = totals.group_by(KEYS).agg(moves=moves()).group_by("link", "device").agg(pl.col("moves").any())
    return moving.filter(~pl.col("moves")).select("link", "device")


_QUERIES_PER_PASS = 1 << 22  # window edges read per numpy.interp call (memory: 8 bytes x a few each)


def _increases(series: pl.DataFrame, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Each series' increase over each window (clipped at 0): a row per series, a column per window.

    Args:
        series: ``end``, ``time`` (whole microseconds), ``total``, sorted by ``end`` then ``time``.
        lo, hi: the windows' edges (whole microseconds).

    The series are laid end to end on one axis, each past the previous one's last time, and each window
    edge is held inside its own series' readings (as ``numpy.interp`` holds a series flat outside them):
    one call reads many series with the arithmetic of one call per series, the times being whole numbers
    (exact in a float below 2^53).
    """
    end = series["end"].to_numpy()
    times = series["time"].to_numpy()
    totals = series["total"].to_numpy()
    starts = np.flatnonzero(np.r_[True, end[1:] != end[:-1]])
    stops = np.r_[starts[1:], len(end)]
    origin = int(min(times.min(), lo.min()))
    extent = int(max(times.max(), hi.max())) - origin + 1
    per_pass = max(1, min((1 << 52) // extent, _QUERIES_PER_PASS // max(1, len(lo))))
    out = np.empty((len(starts), len(lo)))
    for head in range(0, len(starts), per_pass):  # bounded memory and exact offsets, not one per series
        part = slice(head, head + per_pass)
        shift = np.arange(len(starts[part]), dtype=np.int64)[:, None] * extent - origin
        rows = slice(starts[part][0], stops[part][-1])
        axis = (times[rows] + np.repeat(shift[:, 0], stops[part] - starts[part])).astype(np.float64)
        low = times[starts[part]][:, None]
        high = times[stops[part] - 1][:, None]
        at_hi, at_lo = (
            np.interp(
                (np.minimum(np.maximum(edge, low), high) + shift).astype(np.float64), axis, totals[rows]
            )
            for edge in (hi, lo)
        )
        out[part] = np.clip(at_hi - at_lo, 0.0, None)
    return out
