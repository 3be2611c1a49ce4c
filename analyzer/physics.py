"""What the job's queue on each link went through, from the telemetry: the physics the blame rests on.

The telemetry pass keeps, per link end (a member device of a link), the running totals of the quantities
that slow the job's collectives, summed over the end's member interfaces (``readings``):

* ``sent``: bytes the job's traffic class transmitted (the job's own bytes plus any other traffic in its
  class, which shares the queue with it);
* ``dropped``: bytes the job's class dropped (``dropped_frames`` where only packets are counted), and
  ``fcs`` frames received with a bad FCS (lost to the optics): all are sent again;
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
UP = "dci_interface_oper_up"
SPEED = "dci_interface_speed_bytes_per_second"
HELD = "dci_queue_watermark_bytes"
RTT_MIN = "dci_link_rtt_seconds_min"
METRICS = frozenset({SENT, DROPPED, DROPPED_PACKETS, PAUSED, FCS, UP, SPEED, HELD, RTT_MIN})
_US = pl.Datetime("us", "UTC")
QUANTITIES = (
    "sent",
    "dropped",
    "dropped_frames",
    "paused",
    "pausing",
    "fcs",
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
``down``: 1 - up, ``slow``: the share of its usual speed missing, and ``ingress``: the bytes held, x the
interval's seconds)."""

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
    place = labels.select("series", "link", "device", "queue", "priority", "direction")
    wanted = [SENT, DROPPED, DROPPED_PACKETS, PAUSED, FCS, UP, SPEED, HELD]
    metric = pl.col("metric").cast(pl.String)
    # A series never spans batches (one device's whole run): its median is its usual speed (as ``members``)
    # or queue length. Computed once, as a column: the expressions below read it several times.
    usual = pl.col("usual")
    missing = pl.when(usual > 0).then((1 - pl.col("value") / usual).clip(0.0, 1.0)).otherwise(0.0)
    # A gauge covers the interval since the previous reading; the first reading of a series covers none.
    amount = (
        pl.when(metric == UP)
        .then((1 - pl.col("value")) * pl.col("seconds"))
        .when(metric == SPEED)
        .then(missing * pl.col("seconds"))
        .when(metric == HELD)
        .then(pl.col("value") * pl.col("seconds"))
        .otherwise(pl.col("increase"))
    )
    # Signals are grouped by series in time order: neighbours are a shift away.
    same_prev = (pl.col("series") == pl.col("series").shift(1)).fill_null(False)
    same_next = (pl.col("series") == pl.col("series").shift(-1)).fill_null(False)
    high = pl.col("high")
    stands = high & ((same_prev & high.shift(1)) | (same_next & high.shift(-1))).fill_null(False)
    standing = pl.when(stands).then((pl.col("value") - usual) * pl.col("seconds")).otherwise(0.0)
    sig = (
        signals.filter(pl.col("metric").is_in(wanted))
        .with_columns(usual=pl.col("value").median().over("series"))
        .with_columns(high=(metric == HELD) & (pl.col("value") > HELD_OVER_USUAL * usual))
        .with_columns(amount=amount.fill_null(0.0), standing=standing.fill_null(0.0))
    )
    adds = pl.col("amount") > 0
    keep = (
        adds
        | ~same_prev
        | ~same_next
        | (same_prev & adds.shift(1).fill_null(False))
        | (same_next & adds.shift(-1).fill_null(False))
    )
    rows = sig.filter(keep).join(place, on="series").filter(pl.col("link").is_not_null())
    mine = pl.lit(False) if job_class is None else pl.col("queue") == job_class
    ingress = mine & (pl.col("direction") == "rx")
    egress = mine & (pl.col("direction").fill_null("tx") != "rx")
    job_priority = pl.col("priority") == (job_class or "")
    paused_here = job_priority & (pl.col("direction").fill_null("rx") == "rx")
    pausing_here = job_priority & (pl.col("direction") == "tx")
    quantity = (
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
        .when(metric == UP)
        .then(pl.lit("down"))
        .when(metric == SPEED)
        .then(pl.lit("slow"))
        .when((metric == HELD) & ingress)
        .then(pl.lit("ingress"))
        .when((metric == HELD) & egress)
        .then(pl.lit("queued"))
    )
    amount = pl.when(quantity == "queued").then(pl.col("standing")).otherwise(pl.col("amount"))
    out = rows.select("link", "device", "time", quantity=quantity, amount=amount)
    return schemas.conform_lazy(READINGS, out.filter(pl.col("quantity").is_not_null()))


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


def window_amounts(totals: pl.LazyFrame, windows: pl.LazyFrame) -> pl.LazyFrame:
    """What each quantity of each link end added over each window.

    Each (link end, quantity)'s running total is interpolated linearly at the windows' edges (held flat
    outside its readings): one ``numpy.interp`` per series over every window at once.

    Args:
        totals: ``running_totals`` output.
        windows: ``window``, ``lo``, ``hi`` (switch clock).

    Returns:
        ``window``, ``link``, ``device``, one Float64 column per quantity (zero where not reported),
        ``covered`` (seconds of the window inside the end's observation) and ``seconds`` (its length).
    """
    frame = windows.with_columns(pl.col("lo", "hi").cast(_US)).collect()
    lo = frame["lo"].dt.epoch("us").to_numpy().astype(np.float64)
    hi = frame["hi"].dt.epoch("us").to_numpy().astype(np.float64)
    parts = []
    for (link, device), series in totals.collect().partition_by(["link", "device"], as_dict=True).items():
        times = series["time"].dt.epoch("us").to_numpy().astype(np.float64)
        first, last = times.min(), times.max()
        covered = np.clip(np.minimum(hi, last) - np.maximum(lo, first), 0.0, None) / 1e6
        columns: dict[str, object] = {
            "window": frame["window"],
            "link": link,
            "device": device,
            "covered": covered,
        }
        for quantity in QUANTITIES:
            rows = series.filter(pl.col("quantity") == quantity)
            if rows.is_empty():
                columns[quantity] = 0.0
                continue
            t = rows["time"].dt.epoch("us").to_numpy().astype(np.float64)
            c = rows["total"].to_numpy()
            columns[quantity] = np.clip(np.interp(hi, t, c) - np.interp(lo, t, c), 0.0, None)
        parts.append(pl.DataFrame(columns))
    schema = {"window": frame.schema["window"], "link": pl.String(), "device": pl.String()}
    empty = pl.DataFrame(
        schema={**schema, "covered": pl.Float64(), **dict.fromkeys(QUANTITIES, pl.Float64())}
    )
    wide = pl.concat(parts, how="vertical_relaxed") if parts else empty
    seconds = (pl.col("hi") - pl.col("lo")).dt.total_nanoseconds() / 1e9
    return wide.lazy().join(frame.lazy().select("window", seconds=seconds), on="window")
