"""The telemetry half of an analysis: readings -> events, per-series totals and quantile samples.

Series never span devices, so an archive is processed in batches of devices whose row count stays under a
budget: each batch's signals are computed once (one grouping by series), held in memory while events,
totals and samples are taken from them, then dropped. Peak memory follows the batch size, not the archive
size.

An archive file holds every device's readings of its flush interval, so the needed rows are first copied,
in one streaming pass (``analyzer.spill``), into a temporary folder per batch, narrow (series id, metric,
time, value, counter; the labels once per series); each batch then reads only its own part.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import polars as pl

from analyzer import frames, measures, optical_signal, physics, quantiles, schemas, spill, telemetry, topology
from analyzer.events import detect_events
from analyzer.kinds import EGRESS
from analyzer.kinds import METRICS as EVENT_METRICS
from analyzer.thresholds import Thresholds

# What the measures read beyond the event rules' metrics.
MEASURE_METRICS = frozenset(
    {
        measures.TX_BYTES,
        measures.RX_BYTES,
        measures.PFC_SECONDS,
        topology.SPEED,
        *measures.POST_FEC,
        *physics.METRICS,
    }
)
NEEDED = EVENT_METRICS | MEASURE_METRICS
DEFAULT_BATCH_ROWS = 12_000_000  # about 1.5 GB peak (narrow rows, one batch at a time)

# queue: a claim may be scoped to the job's traffic class (analyzer.measures.JOB_CLASS_SCOPE).
_TOTAL_KEYS = ["device", "interface", "link", "metric", "queue"]


@dataclass
class NetworkResult:
    """What the telemetry pass produced (each frame concatenated over batches)."""

    events: pl.DataFrame
    totals: pl.DataFrame
    samples: pl.DataFrame
    rows: int = 0
    devices: list[str] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # archive files not read, and why
    # The job's queue per link end (``analyzer.physics``): readings, member capacity, probed round trips.
    physics: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=physics.READINGS))
    ends: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=physics.MEMBERS))
    round_trips: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(
            schema={"link": pl.String(), "rtt_seconds": pl.Float64(), "rtt_probes": pl.Int64()}
        )
    )


def batches(counts: pl.DataFrame, max_rows: int) -> Iterator[list[str]]:
    """Group devices into batches of at most ``max_rows`` readings (a bigger device is a batch alone).

    Args:
        counts: columns ``device`` and ``rows``.
        max_rows: the budget per batch.

    Yields:
        Lists of device names.
    """
    batch: list[str] = []
    size = 0
    for device, rows in counts.sort("device").iter_rows():
        if batch and size + rows > max_rows:
            yield batch
            batch, size = [], 0
        batch.append(device)
        size += rows
    if batch:
        yield batch


def totals(signals: pl.LazyFrame, labels: pl.LazyFrame) -> pl.LazyFrame:
    """Per series group (device, interface, link, metric, class: ``schemas.series_class`` as ``queue``):
    increase, extremes and observed span.

    Extremes leave out optical no-signal sentinels (``analyzer.optical_signal``), counted in ``no_signal``:
    a down wave is an outage, not the worst optics reading.
    """
    outage = optical_signal.no_signal(pl.col("metric"), pl.col("value"))
    per_series = signals.group_by("series").agg(
        increase=pl.col("increase").sum(),
        max=pl.col("value").filter(~outage).max(),
        min=pl.col("value").filter(~outage).min(),
        first=pl.col("time").min(),
        last=pl.col("time").max(),
        no_signal=outage.sum().cast(pl.Int64()),
    )
    # A PFC series' class is its priority: a PFC claim is scoped to the job's class as a loss claim is.
    return (
        per_series.join(labels.with_columns(queue=schemas.series_class()), on="series")
        .group_by(_TOTAL_KEYS)
        .agg(
            pl.col("increase").sum(),
            pl.col("max").max(),
            pl.col("min").min(),
            pl.col("first").min(),
            pl.col("last").max(),
            pl.col("no_signal").sum(),
        )
    )


UTILIZATION_WINDOW = "10s"
UTILIZATION_MIN_SECONDS = 5.0  # a window (the series' first) covering less is left out


def windowed_rates(signals: pl.LazyFrame) -> pl.LazyFrame:
    """Transmit rates over the ``UTILIZATION_WINDOW`` ending at each reading, not over one poll interval.

    An SNMP reading is stamped when the response arrives, but the device (and the simulator) sampled its
    counters earlier, from a cache refreshed on its own schedule; a slow poll followed by a prompt one gives
    an interval of 0.17 s holding a second's bytes. Per-interval rates then read up to 3x line rate
    (measured on the demo: 1.57 on an idle-to-moderately-loaded wave). Over a 10 s window the same stamp
    error of tens of milliseconds is under 1 %, as Prometheus' advice to rate() over several scrapes.

    Args:
        signals: ``schemas.SIGNALS`` rows, grouped by series in time order.

    Returns:
        ``series``, ``time``, ``rate`` (bytes per second over the window).
    """
    rows = signals.filter((pl.col("metric") == measures.TX_BYTES) & pl.col("increase").is_not_null())
    window = rows.select(
        "series",
        "time",
        sent=pl.col("increase").rolling_sum_by("time", UTILIZATION_WINDOW).over("series"),
        seconds=pl.col("seconds").rolling_sum_by("time", UTILIZATION_WINDOW).over("series"),
    )
    return window.filter(pl.col("seconds") >= UTILIZATION_MIN_SECONDS).select(
        "series", "time", rate=pl.col("sent") / pl.col("seconds")
    )


def samples(signals: pl.LazyFrame, labels: pl.LazyFrame) -> pl.LazyFrame:
    """Histograms of what quantile measures need: queue depths, and utilization (transmit rate / speed).

    Readings are counted per series first (integer keys), then the few thousand counts are placed by their
    labels: joining and grouping millions of readings on label strings costs several times more.
    """
    speed = (
        signals.filter(pl.col("metric") == topology.SPEED)
        .group_by("series")
        .agg(speed=pl.col("value").median())
        .join(labels, on="series")
        .group_by("device", "interface")
        .agg(pl.col("speed").median())
    )
    transmit = labels.filter(pl.col("metric") == measures.TX_BYTES).select("series", "device", "interface")
    speed_of = transmit.join(speed.filter(pl.col("speed") > 0), on=["device", "interface"])
    egress = labels.filter(EGRESS).select("series")
    depth = (
        signals.filter(pl.col("metric").is_in(list(measures.SAMPLE_METRICS)))
        .join(egress, on="series", how="semi")
        .select("series", "metric", "value")
    )
    utilization = (
        windowed_rates(signals)
        .join(speed_of.select("series", "speed"), on="series")
        .select(
            "series",
            metric=pl.lit(measures.UTILIZATION, schemas.METRIC),
            # What is left above line rate after windowing is stamp error, not traffic (see windowed_rates).
            value=(pl.col("rate") / pl.col("speed")).clip(upper_bound=1.0),
        )
    )
    per_series = (
        pl.concat([depth, utilization])
        .group_by("series", "metric", bucket=quantiles.bucket_of(pl.col("value")))
        .agg(count=pl.len().cast(pl.Int64()))
    )
    place = labels.select("series", "device", "interface", "link", "queue")
    placed = per_series.join(place, on="series").with_columns(pl.col("metric").cast(pl.String))
    return placed.group_by(*_TOTAL_KEYS, "bucket").agg(pl.col("count").sum())


def analyse_frame(
    frame: pl.LazyFrame,
    thresholds: Thresholds,
    members: pl.DataFrame,
    labels: pl.LazyFrame | None = None,
    job_class: str | None = None,
) -> Batch:
    """One batch: signals once, then events, totals, samples and the job queue's physics from them.

    Args:
        frame: ``schemas.TELEMETRY`` rows of whole devices, or (with ``labels``) narrow rows holding
            ``series`` and the columns ``telemetry.signals`` reads (``spill.NARROW``).
        thresholds: detection levels.
        members: ``topology.link_members`` output (for the bandwidth-delay product).
        labels: the batch's ``schemas.SERIES`` rows, when ``frame`` does not carry the labels itself.
        job_class: the job's traffic class (``analyzer.physics``), or None.

    Returns:
        The batch's tables; event ids are per batch (renumbered by the caller).
    """
    # One contiguous chunk first: the spill gives one chunk per file, and hashing and grouping many small
    # chunks is several times slower than one large one.
    readings = telemetry.with_series(frame).collect(engine="streaming").rechunk().lazy()
    if labels is None:
        sig, labels_df = pl.collect_all([telemetry.signals(readings), telemetry.series_labels(readings)])
    else:
        sig, labels_df = pl.collect_all([telemetry.signals(readings), labels])
    del readings
    labels = labels_df.lazy()
    bdp = topology.interface_bdp(sig.lazy(), labels, members) if members.height else None
    optics = topology.link_optics(members, thresholds) if members.height else None
    events, tot, smp, phys, ends, rtt = pl.collect_all(
        [
            detect_events(sig.lazy(), thresholds, labels, bdp, optics, job_class),
            totals(sig.lazy(), labels),
            samples(sig.lazy(), labels),
            physics.readings(sig.lazy(), labels, job_class),
            physics.members(sig.lazy(), labels),
            physics.round_trips(sig.lazy(), labels),
        ]
    )
    return Batch(events, tot, smp, sig.height, phys, ends, rtt)


@dataclass
class Batch:
    """What one batch of devices gave (see ``NetworkResult``)."""

    events: pl.DataFrame
    totals: pl.DataFrame
    samples: pl.DataFrame
    rows: int
    physics: pl.DataFrame
    ends: pl.DataFrame
    round_trips: pl.DataFrame


def empty_result() -> NetworkResult:
    """The result of no telemetry at all (a logs-only analysis)."""
    keys = dict.fromkeys(_TOTAL_KEYS, pl.String())
    empty_totals = pl.DataFrame(
        schema={
            **keys,
            "increase": pl.Float64(),
            "max": pl.Float64(),
            "min": pl.Float64(),
            "first": schemas.TIME,
            "last": schemas.TIME,
            "no_signal": pl.Int64(),
        }
    )
    empty_samples = pl.DataFrame(schema={**keys, "bucket": pl.Int32(), "count": pl.Int64()})
    return NetworkResult(pl.DataFrame(schema=schemas.EVENTS), empty_totals, empty_samples, 0, [])


def _combine(parts: list[Batch], devices: list[str]) -> NetworkResult:
    if not parts:
        return empty_result()
    events = frames.sorted_by(  # each batch's text in one buffer per column, its repeated values once
        frames.shared_text(pl.concat([p.events for p in parts])),
        ("start_time", "kind", "link", "device", "interface"),
    )
    events = events.with_columns(event_id=pl.int_range(pl.len(), dtype=pl.Int64()))
    # A link's probes come from its two sites' collectors, which may fall in different batches.
    probes = pl.concat([p.round_trips for p in parts])
    return NetworkResult(
        events,
        pl.concat([p.totals for p in parts]),
        pl.concat([p.samples for p in parts]),
        sum(p.rows for p in parts),
        devices,
        physics=pl.concat([p.physics for p in parts]),
        ends=pl.concat([p.ends for p in parts]),
        round_trips=probes.group_by("link").agg(pl.col("rtt_seconds").median(), pl.col("rtt_probes").sum()),
    )


def analyse_archive(
    root: Path,
    thresholds: Thresholds,
    members: pl.DataFrame,
    start: datetime | None = None,
    end: datetime | None = None,
    devices: list[str] | None = None,
    max_rows: int = DEFAULT_BATCH_ROWS,
    progress: Callable[[int, int], None] | None = None,
    job_class: str | None = None,
) -> NetworkResult:
    """The telemetry pass over an archive, batch by batch.

    Args:
        root: the archive directory.
        thresholds: detection levels.
        members: ``topology.link_members`` output.
        start: first time included, or None.
        end: first time excluded, or None.
        devices: devices to analyse, or None for all.
        max_rows: readings per batch (memory budget).
        progress: called with ``(batches done, batches in all)``.
        job_class: the job's traffic class (``analyzer.physics``), or None.

    Returns:
        Events, totals, samples and the job queue's physics of every device.

    Raises:
        InputError: the archive has no data files.
    """
    scan = telemetry.scan_archive(root, start, end, devices, NEEDED)
    counts = scan.group_by("device").agg(rows=pl.len()).collect(engine="streaming")
    plan = list(batches(counts.drop_nulls("device"), max_rows))
    keep = spill.row_filter(start, end, devices, NEEDED)
    with tempfile.TemporaryDirectory(prefix="spanwatch-batches-") as folder:
        frames = spill.spill_batches(spill.files_in_range(root, start, end), keep, plan, Path(folder))
        parts = []
        for done, (frame, labels) in enumerate(frames, start=1):
            parts.append(analyse_frame(frame, thresholds, members, labels, job_class))
            if progress is not None:
                progress(done, len(plan))
    result = _combine(parts, sorted(counts["device"].drop_nulls().to_list()))
    result.skipped = telemetry.skipped_files(root)
    return result


def analyse_telemetry(
    frame: pl.LazyFrame, thresholds: Thresholds, members: pl.DataFrame, job_class: str | None = None
) -> NetworkResult:
    """The telemetry pass over readings already in memory (e.g. from Prometheus), as one batch.

    Args:
        frame: ``schemas.TELEMETRY`` rows.
        thresholds: detection levels.
        members: ``topology.link_members`` output.
        job_class: the job's traffic class (``analyzer.physics``), or None.

    Returns:
        Events, totals, samples and the job queue's physics.
    """
    frame = frame.filter(pl.col("metric").is_in(sorted(NEEDED)))
    devices = frame.select(pl.col("device").drop_nulls().unique().sort()).collect()["device"].to_list()
    return _combine([analyse_frame(frame, thresholds, members, job_class=job_class)], devices)
