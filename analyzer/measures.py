"""The fixed list of measures a claims file can name (``MEASURES``), computed per link, device and label.

A measure reads one of the analysis's intermediate tables, all carrying ``device``, ``link`` and the target
labels of the device (``vendor``, ``site``...), plus ``run`` (always ``"all"``) for the whole run:

* ``totals``: per series (device, interface, link, metric) the reset-aware counter increase, min and max
  value and the first and last reading (small: one row per series);
* ``samples``: log-spaced histograms (``bucket``, ``count``) of the readings quantile measures need (queue
  watermark / occupancy, utilization), exact to 1%;
* ``events``, ``attribution``, ``steps``: the detection and correlation outputs.

Every measure is computed for each scope: ``link`` (link member interfaces only), ``device``, each target
label (``label:vendor``...), and ``run``. A measure with no data for a key gives no row (not a zero):
"not measured" and "measured zero" differ in a vendor comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import polars as pl

from analyzer import quantiles, schemas
from analyzer.correlate import exposure_per_step
from analyzer.intervals import covered_seconds

DROPPED = "dci_queue_dropped_packets_total"
ECN = "dci_queue_ecn_marked_packets_total"
TX_BYTES = "dci_interface_transmit_bytes_total"
RX_BYTES = "dci_interface_receive_bytes_total"
FCS = "dci_interface_receive_fcs_errors_total"
PFC_SECONDS = "dci_pfc_pause_duration_seconds_total"
WATERMARK = "dci_queue_watermark_bytes"
OCCUPANCY = "dci_queue_occupancy_bytes"
SPEED = "dci_interface_speed_bytes_per_second"
OPER_UP = "dci_interface_oper_up"
UTILIZATION = schemas.UTILIZATION
PRE_FEC = ("dci_optics_pre_fec_ber", "dci_optics_pre_fec_ber_max")
POST_FEC = ("dci_optics_post_fec_ber", "dci_optics_post_fec_ber_max")
OSNR = ("dci_optics_osnr_db", "dci_optics_osnr_db_min")
SAMPLE_METRICS = (WATERMARK, OCCUPANCY)
CONGESTION = ("drops", "ecn", "pfc", "queue")


@dataclass(frozen=True)
class MeasureInputs:
    """The tables measures read (see the module docstring); label columns already joined."""

    totals: pl.DataFrame
    samples: pl.DataFrame
    events: pl.DataFrame
    attribution: pl.DataFrame
    steps: pl.DataFrame
    gpus: int | None
    job_class: str | None = None  # the job's traffic class: the by-class measures get JOB_CLASS_SCOPE rows
    # link -> its member devices: network time blamed on a link but on no one device of it is each of its
    # devices' in the device scope, so a vendor's step claims read the same attribution as the link's cost
    link_devices: pl.DataFrame | None = None


Compute = Callable[[MeasureInputs, str], pl.DataFrame]


@dataclass(frozen=True)
class Measure:
    """One entry of the registry.

    Attributes:
        unit: the unit of the value.
        doc: what it is, for the report and the claims-file documentation.
        compute: ``(inputs, key) -> DataFrame[key, value]``.
        reads: the catalogue metrics the value comes from (the report counts their readings as evidence);
            empty for measures of the whole telemetry or of the steps.
        kinds: the event kinds behind the value (the report lists them as evidence); empty for all kinds.
        from_steps: the value comes from the training steps (their attributed network time), so a device
            with telemetry but nothing attributed measured zero rather than nothing.
        by_class: it reads counters of a traffic class (queues; PFC priorities), so it is also measured on
            the job's traffic class alone (``JOB_CLASS_SCOPE``): another tenant's best-effort drops, or pauses
            on its priority, are not the job's.
    """

    unit: str
    doc: str
    compute: Compute
    reads: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    from_steps: bool = False
    by_class: bool = False


def _attribution(inputs: MeasureInputs, key: str) -> pl.DataFrame:
    """The attribution a scope reads: for ``device``, rows of a link with no device are each member's."""
    a = inputs.attribution
    if key != "device" or inputs.link_devices is None or a.height == 0:
        return a
    loose = a.filter(pl.col("device").is_null()).drop("device")
    spread = loose.join(inputs.link_devices.select("link", "device").unique(), on="link")
    return pl.concat([a.filter(pl.col("device").is_not_null()), spread.select(a.columns)])


def _per_terabyte(numerator: str, bytes_metric: str) -> Compute:
    def compute(inputs: MeasureInputs, key: str) -> pl.DataFrame:
        t = inputs.totals.filter(pl.col(key).is_not_null())
        count = pl.col("increase").filter(pl.col("metric") == numerator).sum()
        terabytes = pl.col("increase").filter(pl.col("metric") == bytes_metric).sum() / 1e12
        has = (pl.col("metric") == numerator).any() & (terabytes > 0)
        return t.group_by(key).agg(value=pl.when(has).then(count / terabytes)).drop_nulls("value")

    return compute


def _per_terabyte_measure(
    unit: str, doc: str, numerator: str, bytes_metric: str, kind: str, by_class: bool = False
) -> Measure:
    """A count of ``numerator`` per 10^12 bytes of ``bytes_metric``, evidenced by events of ``kind``."""
    return Measure(
        unit,
        doc,
        _per_terabyte(numerator, bytes_metric),
        reads=(numerator, bytes_metric),
        kinds=(kind,),
        by_class=by_class,
    )


def _extreme(metrics: tuple[str, ...], largest: bool) -> Compute:
    def compute(inputs: MeasureInputs, key: str) -> pl.DataFrame:
        t = inputs.totals.filter(pl.col(key).is_not_null() & pl.col("metric").is_in(list(metrics)))
        value = pl.col("max").max() if largest else pl.col("min").min()
        return t.group_by(key).agg(value=value).drop_nulls("value")

    return compute


def _extreme_measure(
    unit: str, doc: str, metrics: tuple[str, ...], largest: bool, kinds: tuple[str, ...]
) -> Measure:
    """The largest (or smallest) reading of ``metrics``, evidenced by events of ``kinds``."""
    return Measure(unit, doc, _extreme(metrics, largest), reads=metrics, kinds=kinds)


def _pfc_per_hour(inputs: MeasureInputs, key: str) -> pl.DataFrame:
    t = inputs.totals.filter(pl.col(key).is_not_null())
    paused = pl.col("increase").filter(pl.col("metric") == PFC_SECONDS).sum()
    hours = (pl.col("last").max() - pl.col("first").min()).dt.total_nanoseconds() / 3.6e12
    has = (pl.col("metric") == PFC_SECONDS).any() & (hours > 0)
    return t.group_by(key).agg(value=pl.when(has).then(paused / hours)).drop_nulls("value")


def _sample_quantile(metrics: tuple[str, ...], q: float) -> Compute:
    def compute(inputs: MeasureInputs, key: str) -> pl.DataFrame:
        # Per key, the first metric of ``metrics`` it has: watermarks (peaks between samples) are what a
        # claim about buffering means; occupancy is the fallback for devices reporting only the instant.
        order = {metric: index for index, metric in enumerate(metrics)}
        # The columns read only, as ``_event_seconds``.
        s = inputs.samples.select(key, "metric", "bucket", "count")
        s = s.filter(pl.col(key).is_not_null() & pl.col("metric").is_in(list(metrics)))
        s = s.with_columns(preference=pl.col("metric").replace_strict(order, return_dtype=pl.Int32()))
        return _quantile(s.filter(pl.col("preference") == pl.col("preference").min().over(key)), key, q)

    return compute


def _quantile(frame: pl.DataFrame, key: str, q: float) -> pl.DataFrame:
    """The q-quantile per key from histogram rows: ``analyzer.quantiles``, the one definition of a p99."""
    return quantiles.quantile(frame, key, q)


def _exposure(q: float | None) -> Compute:
    def compute(inputs: MeasureInputs, key: str) -> pl.DataFrame:
        per_step = exposure_per_step(_attribution(inputs, key).lazy(), inputs.steps.lazy(), key)
        value = (
            pl.col("exposed_seconds").sum() if q is None else pl.col("exposed_seconds").quantile(q, "linear")
        )
        return per_step.group_by(key).agg(value=value).collect()

    return compute


def _inflation_ratio(inputs: MeasureInputs, key: str) -> pl.DataFrame:
    baseline = inputs.steps["baseline_seconds"].sum()
    a = _attribution(inputs, key).filter(pl.col(key).is_not_null())
    if not baseline:
        return pl.DataFrame(schema={key: pl.String(), "value": pl.Float64()})
    return a.group_by(key).agg(value=1.0 + pl.col("attributed_seconds").sum() / baseline)


def _gpu_hours(inputs: MeasureInputs, key: str) -> pl.DataFrame:
    total = _exposure(None)(inputs, key)
    if not inputs.gpus:
        return total.clear()
    return total.with_columns(value=pl.col("value") * inputs.gpus / 3600)


def _event_seconds(kinds: tuple[str, ...], per_hour: bool) -> Compute:
    def compute(inputs: MeasureInputs, key: str) -> pl.DataFrame:
        # Only the columns read (a selection shares them; a filter of the whole table copied all of it: 0.3
        # GB per measure and scope at millions of events).
        e = inputs.events.select(key, "kind", "start_time", "end_time")
        e = e.filter(pl.col(key).is_not_null() & pl.col("kind").is_in(list(kinds)))
        hours = _observed_hours(inputs, key)
        # Overlapping events (drops and ECN of one episode, two queues) are one period: merged, not summed.
        seconds = covered_seconds(e, key).rename({"seconds": "value"})
        out = hours.join(seconds, on=key, how="left").with_columns(pl.col("value").fill_null(0.0))
        if per_hour:
            out = out.with_columns(value=pl.col("value") / pl.col("hours"))
        return out.filter(pl.col("hours") > 0).select(key, "value")

    return compute


def _observed_hours(inputs: MeasureInputs, key: str) -> pl.DataFrame:
    t = inputs.totals.filter(pl.col(key).is_not_null())
    span = (pl.col("last").max() - pl.col("first").min()).dt.total_nanoseconds() / 3.6e12
    return t.group_by(key).agg(hours=span)


def _event_count(inputs: MeasureInputs, key: str) -> pl.DataFrame:
    hours = _observed_hours(inputs, key).select(key)
    counts = inputs.events.select(key).filter(pl.col(key).is_not_null()).group_by(key).agg(value=pl.len())
    out = hours.join(counts, on=key, how="left").with_columns(pl.col("value").fill_null(0))
    return out.with_columns(pl.col("value").cast(pl.Float64()))


MEASURES: dict[str, Measure] = {
    "dropped_packets_per_terabyte": _per_terabyte_measure(
        "packets/TB",
        "Queue drops per 10^12 bytes transmitted on the same interfaces.",
        DROPPED,
        TX_BYTES,
        "drops",
        by_class=True,
    ),
    "ecn_marked_packets_per_terabyte": _per_terabyte_measure(
        "packets/TB", "ECN-marked packets per 10^12 bytes transmitted.", ECN, TX_BYTES, "ecn", by_class=True
    ),
    "fcs_errors_per_terabyte": _per_terabyte_measure(
        "frames/TB", "Frames received with a bad FCS per 10^12 bytes received.", FCS, RX_BYTES, "fcs"
    ),
    "pfc_pause_seconds_per_hour": Measure(
        "s/h",
        "PFC pause time (directions summed) per hour of observation, on the job's priority (every priority "
        "with traffic_class: all).",
        _pfc_per_hour,
        reads=(PFC_SECONDS,),
        kinds=("pfc",),
        by_class=True,
    ),
    "queue_watermark_p99_bytes": Measure(
        "bytes",
        "99th percentile of queue watermark readings (occupancy where no watermark is reported).",
        _sample_quantile(SAMPLE_METRICS, 0.99),
        reads=SAMPLE_METRICS,
        kinds=("queue",),
    ),
    "link_utilization_p99": Measure(
        "ratio",
        "99th percentile of transmit rate / interface speed, rates over 10 s windows (at most 1).",
        _sample_quantile((UTILIZATION,), 0.99),
        reads=(TX_BYTES, SPEED),
    ),
    "pre_fec_ber_max": _extreme_measure(
        "ratio", "Largest pre-FEC bit error ratio reported.", PRE_FEC, True, ("ber",)
    ),
    "post_fec_ber_max": _extreme_measure(
        "ratio", "Largest post-FEC bit error ratio reported.", POST_FEC, True, ("ber", "fec_uncorrectable")
    ),
    "osnr_min_db": _extreme_measure(
        "dB", "Smallest optical signal-to-noise ratio reported.", OSNR, False, ("osnr",)
    ),
    "exposed_latency_total_seconds": Measure(
        "s",
        "Step time attributed to the network, summed over steps (mean over ranks).",
        _exposure(None),
        from_steps=True,
    ),
    "exposed_latency_p50_seconds": Measure(
        "s",
        "Median over all steps of the step time attributed to the network.",
        _exposure(0.5),
        from_steps=True,
    ),
    "exposed_latency_p99_seconds": Measure(
        "s",
        "99th percentile over all steps of the step time attributed to the network.",
        _exposure(0.99),
        from_steps=True,
    ),
    "step_time_inflation_ratio": Measure(
        "ratio",
        "1 + attributed step time / baseline step time, over every step and rank.",
        _inflation_ratio,
        from_steps=True,
    ),
    "gpu_hours_lost": Measure(
        "GPU-h", "Exposed latency total x the job's GPU count (--gpus).", _gpu_hours, from_steps=True
    ),
    "congestion_seconds_per_hour": Measure(
        "s/h",
        "Time with a drop, ECN, PFC or queue episode open (overlaps counted once) per hour of observation.",
        _event_seconds(CONGESTION, True),
        reads=(DROPPED, ECN, PFC_SECONDS, WATERMARK),
        kinds=CONGESTION,
    ),
    "wave_down_seconds": Measure(
        "s",
        "Time some interface was operationally down (overlapping outages counted once).",
        _event_seconds(("wave_down",), False),
        reads=(OPER_UP,),
        kinds=("wave_down",),
    ),
    "event_count": Measure("events", "Congestion and health episodes detected.", _event_count),
}


def steps_hurt(attribution: pl.DataFrame) -> int:
    """Steps the network hurt: the one definition the summary, the report and the terminal use, the links'
    "steps affected" (``correlate.link_exposure``: network time attributed to the step) over every link."""
    return int(attribution.filter(pl.col("attributed_seconds") > 0)["step"].n_unique())


def scopes(label_names: list[str]) -> dict[str, str]:
    """Scope name -> key column: link, device, one per target label, and the whole run.

    Args:
        label_names: the label columns available (from the collector config).

    Returns:
        The mapping, in report order.
    """
    return {"link": "link", "device": "device", **{f"label:{n}": n for n in label_names}, "run": "run"}


def compute_all(inputs: MeasureInputs, label_names: list[str]) -> pl.DataFrame:
    """Every measure for every scope.

    Args:
        inputs: the tables, each with ``link``, ``device``, ``run`` and the label columns.
        label_names: the label columns.

    Returns:
        ``schemas.MEASURES`` rows.
    """
    parts = []
    for scope, key in scopes(label_names).items():
        for name, measure in MEASURES.items():
            values = measure.compute(inputs, key)
            parts.append(
                values.select(
                    scope=pl.lit(scope),
                    key=pl.col(key).cast(pl.String()),
                    measure=pl.lit(name),
                    value=pl.col("value").cast(pl.Float64()),
                    unit=pl.lit(measure.unit),
                )
            )
    if inputs.job_class is not None:
        job = _job_class_only(inputs, inputs.job_class)
        for name, measure in MEASURES.items():
            if measure.by_class:
                values = measure.compute(job, "device")
                parts.append(
                    values.select(
                        scope=pl.lit(JOB_CLASS_SCOPE),
                        key=pl.col("device").cast(pl.String()),
                        measure=pl.lit(name),
                        value=pl.col("value").cast(pl.Float64()),
                        unit=pl.lit(measure.unit),
                    )
                )
    frame = pl.concat(parts) if parts else pl.DataFrame(schema=schemas.MEASURES)
    return frame.cast(schemas.MEASURES)


JOB_CLASS_SCOPE = "device:job_class"
"""The scope of the by-class measures per device on the job's traffic class alone (queue counters of that
queue; interface counters, which have no class, as they are)."""


def _job_class_only(inputs: MeasureInputs, job_class: str) -> MeasureInputs:
    def keep(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(pl.col("queue").is_null() | (pl.col("queue") == job_class))

    return replace(inputs, totals=keep(inputs.totals), samples=keep(inputs.samples))
