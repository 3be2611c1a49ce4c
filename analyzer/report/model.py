"""The typed content of the vendor-comparison report: every number the report shows, and nothing rendered.

``analyzer.report.data.build_report`` fills a ``ReportData``; ``markdown`` and ``html`` only format it, and
``report.json`` is ``to_json(data)`` (validated by ``schema.json``). Times are RFC 3339 strings; plotted
series are columns (``t`` seconds since the run's start, ``y`` values) so the JSON stays compact.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

SCHEMA_VERSION = 2
Verdict = Literal["pass", "fail", "insufficient data", "no data"]
Status = Literal["ok", "warning", "over limit", "outage", "no data"]


@dataclass(frozen=True)
class LinkInfo:
    """An inter-DC link of the collector config."""

    name: str
    site_a: str
    site_b: str
    distance_km: float
    members: int
    rtt_seconds: float
    # What the run measured, beside the fibre's figures (None where the archive has none): the fastest
    # and the median probed round trip, the fibre length the optics' chromatic dispersion implies, and
    # whether the fastest round trip is over 10 % above the fibre's (a route longer than the fibre).
    measured_rtt_min_seconds: float | None = None
    measured_rtt_median_seconds: float | None = None
    dispersion_km: float | None = None
    route_longer_than_fibre: bool | None = None


@dataclass(frozen=True)
class Glance:
    """The run at a glance.

    Attributes:
        start / end: first step start and last step end (else the telemetry's span), or None.
        duration_seconds: end - start.
        steps / ranks: distinct step numbers and ranks in the step logs.
        gpus: the job's GPU count (``--gpus``), or None.
        step_median_seconds: median step duration.
        hurt_steps: steps the network hurt (``analyzer.measures.steps_hurt``: the links' "steps affected"
            definition, over every link).
        links: the config's inter-DC links.
        distance_km: the longest link's fibre route, or None without a config.
        events: congestion and health episodes detected.
        exposed_total_seconds: step time attributed to the network (mean over ranks), summed over steps.
        exposed_share: that over the summed step time.
        gpu_hours_lost: exposed time x GPUs, or None without ``--gpus``.
    """

    start: str | None
    end: str | None
    duration_seconds: float | None
    steps: int
    ranks: int
    gpus: int | None
    step_median_seconds: float | None
    hurt_steps: int
    links: list[LinkInfo]
    distance_km: float | None
    events: int
    exposed_total_seconds: float
    exposed_share: float | None
    gpu_hours_lost: float | None


@dataclass(frozen=True)
class EventRef:
    """A detected event cited as evidence."""

    event_id: int
    kind: str
    link: str | None
    device: str
    interface: str | None
    start: str
    duration_seconds: float
    worst: float | None


@dataclass(frozen=True)
class Evidence:
    """What a measured value rests on.

    Attributes:
        basis: what ``samples`` counts (``"steps"`` or ``"readings of dci_..."``).
        samples: how many of them.
        start / end / span_seconds: the time they cover, or None when there are none.
        event_count: the events of the measure's kinds on the vendor's devices.
        events: the first of them (at most ``EVIDENCE_EVENTS``), longest first.
        coverage: the share of the run the vendor's devices had telemetry (None without steps: the run is
            then the telemetry itself).
        no_signal: optical readings left out because the wave had no signal (an outage, not optics).
        minimum_samples: the fewest samples a verdict on this measure needs.
    """

    basis: str
    samples: int
    start: str | None
    end: str | None
    span_seconds: float | None
    event_count: int
    events: list[EventRef]
    coverage: float | None = None
    no_signal: int = 0
    minimum_samples: int = 0


@dataclass(frozen=True)
class ClaimResult:
    """One claim beside its measurement.

    Attributes:
        measured: the worst value over the vendor's devices (the claim must hold on each), or None.
        verdict: pass, fail, or no data.
        reason: why, in words (for no data: what was missing).
        worst_device: the device ``measured`` comes from.
        per_device: every matched device's value (None where it has no data).
    """

    id: str
    text: str
    measure: str
    unit: str
    op: str
    claimed: float
    measured: float | None
    verdict: Verdict
    reason: str
    worst_device: str | None
    per_device: dict[str, float | None]
    evidence: Evidence


@dataclass(frozen=True)
class VendorReport:
    """A vendor, its devices and its claims' verdicts."""

    name: str
    match: dict[str, str]
    devices: list[str]
    claims: list[ClaimResult]
    passed: int
    failed: int
    no_data: int
    insufficient: int = 0


@dataclass(frozen=True)
class Band:
    """An event as a shaded span of the timeline (seconds since the run's start)."""

    link: str
    category: Literal["congestion", "optical", "down"]
    kind: str
    device: str
    interface: str | None
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Timeline:
    """Step time over the run, with events shaded per link.

    Attributes:
        start: time zero of ``t`` and of the bands.
        t: each step's start (seconds since ``start``); ``step_seconds`` its duration (mean over ranks);
            ``baseline_seconds`` the analysis's clean-step baseline.
        bands: events, per link.
    """

    start: str | None
    step: list[int]
    t: list[float]
    step_seconds: list[float]
    baseline_seconds: list[float]
    bands: list[Band]


@dataclass(frozen=True)
class LinkExposure:
    """Per link: what it exposed to the job, and by which kind of event."""

    link: str
    steps_affected: int
    exposed_total_seconds: float
    exposed_p50_seconds: float
    exposed_p99_seconds: float
    share_of_run: float | None
    gpu_hours_lost: float | None
    by_kind: dict[str, float]


@dataclass(frozen=True)
class Cdf:
    """An empirical distribution as its quantiles at 0, 1, ..., 100 % (``values``), from ``n`` values."""

    n: int
    values: list[float]


@dataclass(frozen=True)
class VendorDistributions:
    """Per vendor: per-step network time attributed to its devices, and its queue watermark readings."""

    vendor: str
    step_inflation_seconds: Cdf
    queue_watermark_bytes: Cdf


@dataclass(frozen=True)
class OpticsRow:
    """One optical interface against its thresholds."""

    device: str
    interface: str
    vendor: str | None
    pre_fec_ber_max: float | None
    ber_margin_decades: float | None
    osnr_min_db: float | None
    osnr_margin_db: float | None
    status: Status
    no_signal_readings: int = 0


@dataclass(frozen=True)
class OpticsSeries:
    """One interface's readings of one optical metric over time (downsampled)."""

    device: str
    interface: str
    metric: str
    t: list[float]
    y: list[float]


@dataclass(frozen=True)
class Optics:
    """Optical health: pre-FEC BER against the FEC limit, OSNR against the required OSNR."""

    fec_limit_ber: float
    ber_event_level: float
    osnr_required_db: float
    osnr_event_level_db: float
    rows: list[OpticsRow]
    series: list[OpticsSeries]


@dataclass(frozen=True)
class PlanRow:
    """A planned figure beside the measured one."""

    quantity: str
    unit: str
    planned: float | None
    measured: float | None
    note: str


@dataclass(frozen=True)
class PlanComparison:
    """``spanwatch plan``'s figures for the run's distance and links, beside the measured ones."""

    distance_km: float
    links: int
    link_gbps: float
    bytes_per_step: float
    rows: list[PlanRow]


@dataclass(frozen=True)
class InputNote:
    """An input the analysis could not use, wholly or partly (``summary.json`` ``warnings``)."""

    input: str
    problem: str


@dataclass(frozen=True)
class VendorVerdicts:
    """One vendor's line of the verdict summary."""

    vendor: str
    passed: int
    failed: int
    insufficient: int
    no_data: int
    failing: list[str]


@dataclass(frozen=True)
class LinkAnswer:
    """One link's line of the summary: what it cost the job."""

    link: str
    exposed_total_seconds: float
    share_of_run: float | None
    coverage: float | None


@dataclass(frozen=True)
class Summary:
    """The answer first: verdicts per vendor and exposed time per link."""

    vendors: list[VendorVerdicts]
    links: list[LinkAnswer]


@dataclass(frozen=True)
class LinkCoverage:
    """How much of the run a link (or device) had telemetry.

    Attributes:
        name: the link or device.
        telemetry_seconds: seconds of the run within ``MAX_GAP_SECONDS`` of a reading.
        run_seconds: the run's span (the steps', else the telemetry's).
        share: telemetry over run seconds.
        readings: readings behind it.
    """

    name: str
    telemetry_seconds: float
    run_seconds: float | None
    share: float | None
    readings: int


@dataclass(frozen=True)
class Coverage:
    """Telemetry coverage per link and device, and the minimums a verdict needs."""

    max_gap_seconds: float
    minimum_share: float
    links: list[LinkCoverage]
    devices: list[LinkCoverage]


@dataclass(frozen=True)
class Methodology:
    """What was measured, how blame was assigned, and what stayed unexplained (seconds summed over steps,
    mean over ranks)."""

    measured: list[str]
    blame: list[str]
    rules: list[str]
    step_seconds: float
    inflation_seconds: float
    attributed_seconds: float
    unexplained_seconds: float | None
    steady_seconds: float | None


@dataclass(frozen=True)
class BusBandwidthRow:
    """One nccl-tests result: bus bandwidth at one message size."""

    source: str
    collective: str
    size_bytes: float
    time_seconds: float | None
    busbw_gbps: float | None
    busbw_in_place_gbps: float | None
    ranks: int | None


@dataclass(frozen=True)
class BusBandwidth:
    """nccl-tests bus bandwidth beside the link's capacity and the plan's goodput (GB/s, 10^9 bytes/s)."""

    rows: list[BusBandwidthRow]
    link_capacity_gbps: float | None
    planned_goodput_gbps: float | None


@dataclass(frozen=True)
class RankRow:
    """One of the slowest ranks.

    Attributes:
        rank: the rank.
        steps: its steps in the logs.
        step_mean_seconds: its mean step time.
        over_median_seconds: that less the median rank's mean step time.
        network_seconds: its step time attributed to the network, summed over its steps.
    """

    rank: int
    steps: int
    step_mean_seconds: float
    over_median_seconds: float
    network_seconds: float


@dataclass(frozen=True)
class Ranks:
    """The ranks rolled up (``analyzer.report.ranks``): how many, the median and slowest rank's mean step
    time, and the slowest ranks named (never one row per rank)."""

    count: int
    step_mean_median_seconds: float | None
    step_mean_max_seconds: float | None
    worst: list[RankRow]


@dataclass(frozen=True)
class ReportData:
    """Everything the report shows (``report.json``)."""

    schema_version: int
    title: str
    sources: dict[str, str | None]
    glance: Glance
    vendors: list[VendorReport]
    timeline: Timeline
    link_exposure: list[LinkExposure]
    ranks: Ranks
    distributions: list[VendorDistributions]
    optics: Optics
    plan: PlanComparison | None
    notes: list[str]
    warnings: list[InputNote]
    summary: Summary
    coverage: Coverage
    methodology: Methodology
    bus_bandwidth: BusBandwidth | None


SIGNIFICANT_DIGITS = 9
"""A figure's digits in ``report.json``: the tables' own agreement between engines (``analyzer.compare``:
1e-9 relative). Past them a float's last digits tell only the order its sum was taken in (a group-by's rows
come in any order, and the Ray engine's batches in another), not the network."""


def to_json(data: ReportData) -> dict[str, Any]:
    """The report's data as JSON-ready dicts and lists.

    Args:
        data: the report.

    Returns:
        ``asdict(data)`` with every float to ``SIGNIFICANT_DIGITS``: only str, int, float, bool, None,
        list and dict inside.
    """
    rounded = _rounded(asdict(data))
    assert isinstance(rounded, dict)
    return rounded


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}") if math.isfinite(value) else value
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(item) for item in value]
    return value
