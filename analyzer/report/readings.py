"""The few raw readings the report needs beyond the analysis tables, read from the archive once.

The analysis directory holds per-step and per-event results but not raw readings; the report also shows how
many readings a claim rests on, queue watermark distributions and optical series over time. They come from
the archive the analysis named (``summary.json``), filtered to the metrics concerned, and the series are
downsampled to at most ``MAX_POINTS`` per interface: a chart does not need more, and the HTML stays small.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from analyzer import archive_source, optical_signal, quantiles, schemas, telemetry
from analyzer.errors import AnalyzerError
from analyzer.kinds import EGRESS
from analyzer.measures import OSNR, PRE_FEC, SAMPLE_METRICS, SPEED, TX_BYTES
from collector import storage

MAX_POINTS = 240
RTT_MIN, RTT_AVG = "dci_link_rtt_seconds_min", "dci_link_rtt_seconds_avg"
CD = "dci_optics_chromatic_dispersion_ps_per_nm"
OPTICS = {**dict.fromkeys(PRE_FEC, PRE_FEC[0]), **dict.fromkeys(OSNR, OSNR[0])}


@dataclass(frozen=True)
class Readings:
    """What the report reads from the archive.

    Attributes:
        counts: ``device``, ``metric``, ``n``, ``first``, ``last``, ``no_signal``: readings per device and
            metric (``no_signal``: optical no-signal sentinels among them, ``analyzer.optical_signal``).
        watermarks: ``device``, ``bucket``, ``count``: the histogram (``analyzer.quantiles``) of the distinct
            queue watermark readings on link member interfaces (occupancy for devices without watermarks),
            the one the ``queue_watermark_p99_bytes`` measure is read from.
        optics: ``device``, ``interface``, ``metric`` (``dci_optics_pre_fec_ber`` or ``dci_optics_osnr_db``,
            their min/max variants folded in), ``time``, ``value``, ``no_signal`` (sentinel readings in the
            bucket, left out of ``value``; ``value`` is null when the wave had no signal at all): downsampled.
        link_speed_bytes: the median speed of link member interfaces, or None.
        link_transmit_bytes: bytes transmitted by link member interfaces over the run (both directions),
            or None.
        note: why the archive could not be read, or None.
        links: ``link``, ``rtt_min``, ``rtt_median`` (probed round trips, seconds) and ``cd`` (median
            absolute chromatic dispersion, ps/nm) per link, or None.
        stamps: ``device``, ``link``, ``second`` (whole seconds with a reading; for coverage).
    """

    counts: pl.DataFrame
    watermarks: pl.DataFrame
    optics: pl.DataFrame
    link_speed_bytes: float | None
    link_transmit_bytes: float | None = None
    note: str | None = None
    stamps: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(
            schema={"device": pl.String(), "link": pl.String(), "second": pl.Datetime("ns", "UTC")}
        )
    )
    links: pl.DataFrame | None = None


def empty(note: str | None) -> Readings:
    """Readings with no rows (no archive), carrying why."""
    return Readings(
        pl.DataFrame(
            schema={
                "device": pl.String(),
                "metric": pl.String(),
                "n": pl.UInt32(),
                "first": pl.Datetime("ns", "UTC"),
                "last": pl.Datetime("ns", "UTC"),
                "no_signal": pl.UInt32(),
            }
        ),
        pl.DataFrame(schema={"device": pl.String(), "bucket": pl.Int32(), "count": pl.Int64()}),
        pl.DataFrame(
            schema={
                "device": pl.String(),
                "interface": pl.String(),
                "metric": pl.String(),
                "time": pl.Datetime("ns", "UTC"),
                "value": pl.Float64(),
                "no_signal": pl.UInt32(),
            }
        ),
        None,
        None,
        note,
    )


def read_archive(archive: Path | str | None) -> Readings:
    """Read the counts, watermarks, optics and link speed the report shows.

    Args:
        archive: the archive directory, an ``s3://bucket/prefix`` URL (copied into TMPDIR first), or None.

    Returns:
        The readings; empty ones (with a note) when there is no usable archive, so the report still renders.
    """
    if archive is None:
        return empty("no archive was analysed: reading counts, watermarks and optics are not shown")
    if storage.is_url(archive):
        try:
            with archive_source.local_folder(archive) as folder:
                return read_archive(folder)  # collected before the copy is removed
        except AnalyzerError as exc:
            return empty(f"archive unreadable ({exc}): reading counts, watermarks and optics are not shown")
    try:
        scan = telemetry.scan_archive(Path(archive))
    except AnalyzerError as exc:
        return empty(f"archive unreadable ({exc}): reading counts, watermarks and optics are not shown")
    counts = scan.group_by("device", "metric").agg(
        n=pl.len(),
        first=pl.col("time").min(),
        last=pl.col("time").max(),
        no_signal=optical_signal.no_signal(pl.col("metric"), pl.col("value")).sum(),
    )
    stamps = scan.select("device", "link", second=pl.col("time").dt.truncate("1s")).unique()
    watermarks = _watermarks(scan)
    optics = _optics(scan)
    members = scan.filter(pl.col("link").is_not_null())
    speed = members.filter(pl.col("metric") == SPEED).select(pl.col("value").median())
    # Last minus first reading per series: a counter reset in the run undercounts, which a budget tolerates.
    sent = (
        members.filter(pl.col("metric") == TX_BYTES)
        .group_by(list(schemas.SERIES_KEYS))
        .agg(increase=pl.col("value").sort_by("time").last() - pl.col("value").sort_by("time").first())
        .select(pl.col("increase").clip(lower_bound=0).sum())
    )
    frames = pl.collect_all([counts, watermarks, optics, speed, sent, stamps, _links(scan)])
    return Readings(
        frames[0], frames[1], frames[2], _scalar(frames[3]), _scalar(frames[4]), None, frames[5], frames[6]
    )


def _links(scan: pl.LazyFrame) -> pl.LazyFrame:
    """Per link: the fastest and the median probed round trip, and the median |CD| its channels report."""
    linked = scan.filter(pl.col("link").is_not_null())
    metric, value = pl.col("metric"), pl.col("value")
    rtt = (
        linked.filter(metric.is_in([RTT_MIN, RTT_AVG]))
        .group_by("link")
        .agg(
            rtt_min=value.filter(metric == RTT_MIN).min(), rtt_median=value.filter(metric == RTT_AVG).median()
        )
    )
    cd = linked.filter(metric == CD).group_by("link").agg(cd=value.abs().median())
    return rtt.join(cd, on="link", how="full", coalesce=True)


def _scalar(frame: pl.DataFrame) -> float | None:
    value = frame.item() if frame.height else None
    return None if value is None or value == 0 else float(value)


def _watermarks(scan: pl.LazyFrame) -> pl.LazyFrame:
    # Per device, the first of SAMPLE_METRICS it reports on egress queues, as the queue_watermark_p99_bytes
    # measure does.
    order = {metric: index for index, metric in enumerate(SAMPLE_METRICS)}
    rows = scan.filter(pl.col("link").is_not_null(), pl.col("metric").is_in(list(SAMPLE_METRICS)), EGRESS)
    rows = rows.with_columns(preference=pl.col("metric").replace_strict(order, return_dtype=pl.Int32()))
    best = pl.col("preference") == pl.col("preference").min().over("device")
    distinct = quantiles.distinct_readings(rows.filter(best), schemas.SERIES_KEYS)
    return quantiles.histogram(distinct, ["device"])


def _optics(scan: pl.LazyFrame) -> pl.LazyFrame:
    # Coherent optical channels are components (OpticalChannel1/4), not interfaces: name them by either.
    rows = scan.with_columns(interface=pl.coalesce("interface", "component"))
    rows = rows.filter(pl.col("metric").is_in(list(OPTICS)), pl.col("interface").is_not_null())
    rows = rows.with_columns(pl.col("metric").replace_strict(OPTICS, return_dtype=pl.String()))
    span = pl.col("time").max() - pl.col("time").min()
    # Equal time buckets over the whole run; a BER burst is kept by taking the max, an OSNR dip by the min.
    bucket = (
        (pl.col("time") - pl.col("time").min()).dt.total_nanoseconds()
        * MAX_POINTS
        // (span.dt.total_nanoseconds() + 1)
    )
    # No-signal sentinels (a down wave) are counted, not plotted or ranked as the worst reading.
    outage = optical_signal.no_signal(pl.col("metric"), pl.col("value"))
    signal = pl.col("value").filter(~outage)
    worst = pl.when(pl.col("metric").first() == PRE_FEC[0]).then(signal.max()).otherwise(signal.min())
    return (
        rows.with_columns(bucket=bucket)
        .group_by("device", "interface", "metric", "bucket")
        .agg(time=pl.col("time").min(), value=worst, no_signal=outage.sum())
        .drop("bucket")
        .sort("device", "interface", "metric", "time")
    )
