"""The metric catalogue: every name spanwatch exports, defined once (spec: shared/spec/metrics.md).

Dashboards, alert rules, the archive and the analyzer all build on these names. Sources map OIDs and
YANG paths onto them through the tables in ``collector/mappings``; nothing derives a name from a path.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """Prometheus metric type."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


# Labels a device series may carry beyond ``device``, the target's static labels and ``link``;
# the same names are the archive's label columns.
SERIES_LABELS = ("interface", "queue", "priority", "lane", "direction", "pool", "component")

# OpenConfig stat containers (instant/avg/min/max): the plain name carries ``instant``.
STAT_SUFFIXES = ("_min", "_max", "_avg")


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One catalogue entry.

    Attributes:
        name: the exported name.
        kind: counter, gauge or histogram.
        unit: base unit (bytes, seconds, dbm, db, ratio, ...), empty for dimensionless.
        help: the HELP text.
        labels: labels beyond ``device`` (device metrics) or all labels (health and link metrics).
        stats: whether ``_min``/``_max``/``_avg`` variants exist (OpenConfig stat containers).
        optional: those of ``labels`` a series may leave out, where their absence has a meaning (a queue
            series without ``direction`` is an egress queue, as every queue source reported before
            ingress queues were mapped).
    """

    name: str
    kind: Kind
    unit: str
    help: str
    labels: tuple[str, ...] = ()
    stats: bool = False
    optional: tuple[str, ...] = ()

    @property
    def is_counter(self) -> bool:
        return self.kind is Kind.COUNTER


def _c(name: str, unit: str, help: str, *labels: str) -> MetricSpec:
    return MetricSpec(name, Kind.COUNTER, unit, help, labels)


def _g(name: str, unit: str, help: str, *labels: str, stats: bool = False) -> MetricSpec:
    return MetricSpec(name, Kind.GAUGE, unit, help, labels, stats)


_I = "interface"
_IQ = ("interface", "queue")
_IPD = ("interface", "priority", "direction")
_IQD = (*_IQ, "direction")
_D = ("direction",)
_IL = ("interface", "lane")

DEVICE_METRICS: tuple[MetricSpec, ...] = (
    _c("dci_interface_receive_bytes_total", "bytes", "Bytes received on the interface.", _I),
    _c("dci_interface_transmit_bytes_total", "bytes", "Bytes transmitted on the interface.", _I),
    _c("dci_interface_receive_packets_total", "packets", "Packets received on the interface.", _I),
    _c("dci_interface_transmit_packets_total", "packets", "Packets transmitted on the interface.", _I),
    _c("dci_interface_receive_discards_total", "packets", "Inbound packets discarded without error.", _I),
    _c("dci_interface_transmit_discards_total", "packets", "Outbound packets discarded without error.", _I),
    _c("dci_interface_receive_errors_total", "packets", "Inbound packets with errors.", _I),
    _c("dci_interface_transmit_errors_total", "packets", "Outbound packets with errors.", _I),
    _c("dci_interface_receive_fcs_errors_total", "frames", "Frames received with a bad FCS.", _I),
    _c("dci_interface_pause_frames_total", "frames", "IEEE 802.3x global pause frames.", _I, "direction"),
    _g("dci_interface_speed_bytes_per_second", "bytes_per_second", "Interface speed.", _I),
    _g("dci_interface_oper_up", "", "1 when the interface is operationally up.", _I),
    _c("dci_interface_fec_corrected_blocks_total", "blocks", "FEC blocks corrected.", _I),
    _c("dci_interface_fec_uncorrectable_blocks_total", "blocks", "FEC blocks not correctable.", _I),
    _c("dci_queue_transmit_packets_total", "packets", "Packets sent from the egress queue.", *_IQ),
    _c("dci_queue_transmit_bytes_total", "bytes", "Bytes sent from the egress queue.", *_IQ),
    _c("dci_queue_dropped_packets_total", "packets", "Packets dropped by the queue (tail and AQM).", *_IQ),
    _c("dci_queue_dropped_bytes_total", "bytes", "Bytes dropped by the queue (tail and AQM).", *_IQ),
    _c("dci_queue_ecn_marked_packets_total", "packets", "Packets ECN-marked (ECT to CE) by the queue.", *_IQ),
    # Queue lengths are also read on ingress queues (``direction="rx"``: a deep-buffer switch holding the
    # traffic it received, its VOQs or ingress priority groups); egress series carry no ``direction``.
    MetricSpec(
        "dci_queue_occupancy_bytes", Kind.GAUGE, "bytes", "Instantaneous queue length.", _IQD, optional=_D
    ),
    MetricSpec(
        "dci_queue_watermark_bytes",
        Kind.GAUGE,
        "bytes",
        "Peak queue length since the previous sample.",
        _IQD,
        optional=_D,
    ),
    _c("dci_pfc_pause_frames_total", "frames", "Priority flow control pause frames.", *_IPD),
    _c("dci_pfc_pause_duration_seconds_total", "seconds", "Time paused by priority flow control.", *_IPD),
    _c(
        "dci_pfc_watchdog_storms_total",
        "events",
        "PFC watchdog storm (stuck queue) detections.",
        _I,
        "priority",
    ),
    _g("dci_buffer_pool_occupancy_bytes", "bytes", "Shared buffer pool occupancy.", "pool"),
    _g("dci_buffer_pool_watermark_bytes", "bytes", "Shared buffer pool peak occupancy.", "pool"),
    _g("dci_optics_rx_power_dbm", "dbm", "Optical receive power (no lane: module total).", *_IL, stats=True),
    _g("dci_optics_tx_power_dbm", "dbm", "Optical transmit power (no lane: module total).", *_IL, stats=True),
    _g("dci_optics_laser_bias_current_amperes", "amperes", "Laser bias current.", *_IL, stats=True),
    _g("dci_optics_temperature_celsius", "celsius", "Optics module temperature.", _I, stats=True),
    _g("dci_optics_supply_voltage_volts", "volts", "Optics module supply voltage.", _I, stats=True),
    _g("dci_optics_pre_fec_ber", "ratio", "Bit error ratio before FEC.", _I, stats=True),
    _g("dci_optics_post_fec_ber", "ratio", "Bit error ratio after FEC.", _I, stats=True),
    _g("dci_optics_osnr_db", "db", "Optical signal-to-noise ratio.", _I, stats=True),
    _g("dci_optics_esnr_db", "db", "Electrical signal-to-noise ratio.", _I, stats=True),
    _g("dci_optics_q_factor_db", "db", "Q factor.", _I, stats=True),
    _g("dci_optics_chromatic_dispersion_ps_per_nm", "ps_per_nm", "Chromatic dispersion.", _I, stats=True),
    _g(
        "dci_optics_polarization_mode_dispersion_seconds",
        "seconds",
        "Polarization mode dispersion (differential group delay).",
        _I,
        stats=True,
    ),
    _g("dci_optics_polarization_dependent_loss_db", "db", "Polarization dependent loss.", _I, stats=True),
    _g("dci_optics_carrier_frequency_offset_hertz", "hertz", "Carrier frequency offset.", _I, stats=True),
    _g("dci_optics_frequency_hertz", "hertz", "Carrier (laser) frequency.", _I),
)

LINK_METRICS: tuple[MetricSpec, ...] = (
    _g(
        "dci_link_info",
        "",
        "Membership of an interface in an inter-DC link (always 1).",
        "link",
        "site_a",
        "site_b",
        "device",
        "interface",
    ),
    _g("dci_link_distance_meters", "meters", "Fibre route length of the link.", "link"),
    _g("dci_link_propagation_delay_seconds", "seconds", "One-way propagation delay of the fibre.", "link"),
    _g("dci_link_capacity_bytes_per_second", "bytes_per_second", "Sum of member speeds.", "link"),
    _g(
        "dci_link_bandwidth_delay_product_bytes",
        "bytes",
        "Capacity times round-trip propagation delay: the data in flight.",
        "link",
    ),
    # The limits of the link's optics profile (``links[].optics``), so alert rules and boards compare each
    # channel with its own link's figures (``on(link) group_left``) instead of one hard-coded number.
    _g("dci_link_optics_fec_ber_limit", "ratio", "Pre-FEC BER limit of the link's optics profile.", "link"),
    _g(
        "dci_link_optics_required_osnr_db",
        "db",
        "Required OSNR (0.1 nm) of the link's optics profile.",
        "link",
    ),
)

# Active probes along each link (``links[].probe``): ``method`` is ``twamp`` or ``icmp``, ``target`` the
# responder's configured name. The plain RTT name carries the latest probe, the stat variants the interval.
_LMT = ("link", "method", "target")
PROBE_METRICS: tuple[MetricSpec, ...] = (
    _g("dci_link_rtt_seconds", "seconds", "Measured round trip along the link.", *_LMT, stats=True),
    _g(
        "dci_link_rtt_jitter_seconds",
        "seconds",
        "Mean difference between consecutive round trips over the interval (RFC 3550 style).",
        *_LMT,
    ),
    _g(
        "dci_link_one_way_delay_seconds",
        "seconds",
        "One-way delay from TWAMP timestamps (forward: to the responder); needs synchronised clocks.",
        *_LMT,
        "direction",
        stats=True,
    ),
    _g("dci_link_probe_loss_ratio", "ratio", "Probes without an answer over the interval.", *_LMT),
    _c("spanwatch_probes_total", "", "Probes by outcome.", *_LMT, "status"),
)
PROBE_STATUSES = ("success", "timeout", "no_permission", "unreachable", "error")

_DS = ("device", "source")

HEALTH_METRICS: tuple[MetricSpec, ...] = (
    _g("spanwatch_target_up", "", "1 when the last poll or the stream of the target succeeded.", *_DS),
    _c("spanwatch_polls_total", "", "Polls by outcome.", *_DS, "status"),
    MetricSpec("spanwatch_poll_duration_seconds", Kind.HISTOGRAM, "seconds", "Poll duration.", _DS),
    _g("spanwatch_last_success_timestamp_seconds", "seconds", "Unix time of the last success.", *_DS),
    _c("spanwatch_gnmi_updates_total", "", "gNMI updates received.", "device"),
    _c("spanwatch_gnmi_reconnects_total", "", "gNMI stream redials.", "device"),
    _g(
        "spanwatch_gnmi_sample_interval_seconds",
        "seconds",
        "gNMI SAMPLE interval in effect: the configured one, or longer while the collector sheds load "
        "because it cannot ingest the target at its configured interval.",
        "device",
    ),
    _c(
        "spanwatch_gnmi_shed_updates_total",
        "",
        "gNMI updates the target would have sent at its configured interval and did not because it was "
        "shed (estimated from the updates it sent at the longer interval).",
        "device",
    ),
    _g(
        "spanwatch_gnmi_clock_offset_seconds",
        "seconds",
        "Device clock minus collector clock, estimated from notification timestamps.",
        "device",
    ),
    _c(
        "spanwatch_snmp_dropped_packets_total",
        "",
        "SNMP datagrams discarded by the receive checks (malformed, unmatched, wrong level, user, engine, "
        "digest, time window, request-id).",
        "device",
        "reason",
    ),
    _c("spanwatch_archive_rows_total", "", "Rows written to the archive."),
    _c("spanwatch_archive_write_errors_total", "", "Archive flushes that failed."),
    _c(
        "spanwatch_archive_upload_retries_total",
        "",
        "Uploads to an object-storage archive tried again after a failure (a flush fails after 3 tries).",
    ),
    _c("dci_counter_discontinuities_total", "", "Counter resets seen on the device.", "device", "metric"),
    _c(
        "spanwatch_invalid_values_total",
        "",
        "Readings dropped because the catalogue cannot hold them (negative or oversized counter, NaN, ...).",
        *_DS,
        "reason",
    ),
    _c("spanwatch_series_dropped_total", "", "New series dropped at the per-target series cap.", "device"),
    _c(
        "spanwatch_archive_rows_dropped_total",
        "",
        "Archive rows dropped without being written (buffer full, unwritable rows).",
        "reason",
    ),
    _c("spanwatch_http_connections_rejected_total", "", "Connections refused at the connection cap."),
    _c(
        "spanwatch_http_connections_evicted_total",
        "",
        "Connections closed to make room for a new one (idle between requests, or a request still incomplete).",
        "reason",
    ),
    MetricSpec(
        "spanwatch_ingest_lag_seconds",
        Kind.HISTOGRAM,
        "seconds",
        "Collector time when readings reached the store minus the notification (gNMI) or poll start (SNMP) "
        "time.",
        _DS,
    ),
    _g(
        "spanwatch_ingest_backlog_seconds",
        "seconds",
        "How far behind the target is. gNMI: the longest of the age of the oldest reading still waiting to "
        "be ingested and how late a reading was read after its timestamp (net of the device clock's "
        "offset), which shows a backlog held in gRPC's buffers or the device. SNMP: how late the current "
        "poll started.",
        *_DS,
    ),
    _c(
        "spanwatch_coalesced_samples_total",
        "",
        "Readings folded into a newer one of the same series because the target was more than one sample "
        "interval behind (counters keep the newest, gauges the interval's min, max and newest).",
        *_DS,
    ),
    _c("spanwatch_worker_restarts_total", "", "Collector worker processes restarted after dying.", "worker"),
)

# ``spanwatch follow``: the analyzer's blame over a sliding window of the training log and the archive,
# read over the steps that ended in the last few seconds ("recent steps").
TRAINING_METRICS: tuple[MetricSpec, ...] = (
    _g("spanwatch_training_step_seconds", "seconds", "Mean seconds per training step, recent steps."),
    _g(
        "spanwatch_training_step_baseline_seconds",
        "seconds",
        "Clean baseline of a step (median of steps no link's physics touched), recent steps' ranks.",
    ),
    _g(
        "spanwatch_training_communication_seconds",
        "seconds",
        "Network time per step: the clean network's (serialization and round trips of the slowest link) "
        "plus what episodes added, recent steps.",
    ),
    _g(
        "spanwatch_training_network_seconds",
        "seconds",
        "Seconds per step the network's episodes added on the link (evidence-based blame), recent steps.",
        "link",
    ),
    _g(
        "spanwatch_training_network_peak_seconds",
        "seconds",
        "The most one recent step lost on the link (mean over its ranks): a burst shorter than a step shows.",
        "link",
    ),
    _g(
        "spanwatch_training_steady_seconds",
        "seconds",
        "Seconds per step the clean link costs: serialization of the job's bytes and two round trips.",
        "link",
    ),
    _g(
        "spanwatch_training_unexplained_seconds",
        "seconds",
        "Step excess over the baseline that no link's physics explains (compute, stragglers), recent steps.",
    ),
    _g(
        "spanwatch_training_network_events",
        "",
        "Network events (analyzer rules) on the link overlapping the recent steps, by kind.",
        "link",
        "kind",
    ),
    _g("spanwatch_training_window_steps", "", "Step rows (step x rank) in the sliding window."),
    _g("spanwatch_training_last_step_timestamp_seconds", "seconds", "Unix time the newest step ended."),
    _g("spanwatch_training_clock_skew_seconds", "seconds", "Host-minus-switch clock skew applied to steps."),
    _c("spanwatch_training_steps_total", "", "Step rows read from the training logs."),
    _c("spanwatch_training_malformed_lines_total", "", "Training log lines that could not be parsed."),
    _g("spanwatch_training_analysis_seconds", "seconds", "Time the last window analysis took."),
)

POLL_STATUSES = ("success", "timeout", "unreachable", "auth_error", "invalid_response", "error")
POLL_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
INGEST_LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
HISTOGRAM_BUCKETS: dict[str, tuple[float, ...]] = {
    "spanwatch_poll_duration_seconds": POLL_DURATION_BUCKETS,
    "spanwatch_ingest_lag_seconds": INGEST_LAG_BUCKETS,
}
"""The bucket bounds of every histogram in the catalogue."""


def _expand(specs: tuple[MetricSpec, ...]) -> dict[str, MetricSpec]:
    out: dict[str, MetricSpec] = {}
    for spec in specs:
        out[spec.name] = spec
        for suffix in STAT_SUFFIXES if spec.stats else ():
            variant = MetricSpec(
                spec.name + suffix,
                spec.kind,
                spec.unit,
                f"{spec.help} ({suffix[1:]} over the interval)",
                spec.labels,
                optional=spec.optional,
            )
            out[variant.name] = variant
    return out


CATALOG: dict[str, MetricSpec] = _expand(
    DEVICE_METRICS + LINK_METRICS + PROBE_METRICS + HEALTH_METRICS + TRAINING_METRICS
)
"""Every exported name, ``_min/_max/_avg`` stat variants included."""


def spec(name: str) -> MetricSpec:
    """The catalogue entry for ``name``.

    Raises:
        KeyError: the name is not in the catalogue.
    """
    return CATALOG[name]
