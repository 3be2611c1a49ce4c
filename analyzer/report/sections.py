"""The report's summary, coverage, methodology and nccl-tests sections, computed from the analysis tables."""

from __future__ import annotations

from typing import Any

import polars as pl

from analyzer.attribution.rules import MAX_SKEW_SECONDS, SKEW_RANGE_STANDARD_ERRORS
from analyzer.plan import PlanInput, plan
from analyzer.report import coverage as rules
from analyzer.report.model import (
    BusBandwidth,
    BusBandwidthRow,
    Coverage,
    LinkAnswer,
    LinkCoverage,
    Methodology,
    Summary,
    VendorReport,
    VendorVerdicts,
)
from analyzer.report.readings import Readings
from analyzer.report.units import span_seconds
from collector.config import Config


def coverage(readings: Readings, start: Any, end: Any) -> Coverage:
    """Telemetry seconds per link and device against the run's seconds.

    Args:
        readings: the archive's readings (``stamps``).
        start: the steps' first start, or None (then each key's own span is the run).
        end: the steps' last end, or None.

    Returns:
        The coverage section.
    """
    run = span_seconds(start, end)
    per_reading = readings.counts.group_by("device").agg(pl.col("n").sum())
    readings_of = dict(per_reading.iter_rows())
    stamps = readings.stamps

    def rows(key: str) -> list[LinkCoverage]:
        seen = rules.covered_seconds(stamps, key, start, end)
        spans = (
            stamps.filter(pl.col(key).is_not_null())
            .group_by(key)
            .agg(first=pl.col("second").min(), last=pl.col("second").max())
        )
        own = {str(k): span_seconds(a, b) for k, a, b in spans.iter_rows()}
        out = []
        for name in sorted(seen):
            total = run if run else own.get(name)
            count = (
                readings_of.get(name, 0)
                if key == "device"
                else sum(readings_of.get(d, 0) for d in _devices_of(stamps, name))
            )
            share = min(seen[name] / total, 1.0) if total else None
            out.append(LinkCoverage(name, seen[name], total, share, int(count)))
        return out

    return Coverage(rules.MAX_GAP_SECONDS, rules.MIN_COVERAGE, rows("link"), rows("device"))


def _devices_of(stamps: pl.DataFrame, link: str) -> list[str]:
    return stamps.filter(pl.col("link") == link)["device"].unique().to_list()


def summary(vendors: list[VendorReport], links: pl.DataFrame, covered: Coverage) -> Summary:
    """The answer first: each vendor's verdict counts and failing claims, each link's exposed time.

    Args:
        vendors: the vendor sections.
        links: ``links.parquet``.
        covered: the coverage section.

    Returns:
        The summary.
    """
    share = {c.name: c.share for c in covered.links}
    return Summary(
        [
            VendorVerdicts(
                v.name,
                v.passed,
                v.failed,
                v.insufficient,
                v.no_data,
                [c.id for c in v.claims if c.verdict == "fail"],
            )
            for v in vendors
        ],
        [
            LinkAnswer(r["link"], r["exposed_total_seconds"], r["share_of_run"], share.get(r["link"]))
            for r in links.sort("exposed_total_seconds", descending=True).iter_rows(named=True)
        ],
    )


MEASURED = [
    "Steps: each (step, rank) with its start, end and duration, from the training logs (times as logged).",
    "Telemetry: every reading of the collector's archive on the link member interfaces (counters as "
    "reset-aware rates; utilisation over 10 s windows; optical readings without signal counted as outage).",
    "Events: congestion (drops, ECN, PFC, queue depth) and health (BER, OSNR, FCS, FEC, wave down) episodes "
    "detected per interface against the analysis's thresholds.",
]
BLAME = [
    "A step's excess is its measure (its communication time where measured, else its duration) above its "
    "rank's clean baseline (the median of steps with no physical cause on any link, per position in the "
    "job's communication cycle); a line averaging N iterations is one interval of N steps, its iterations "
    "placed in it by where the physics fell (a stall to the iteration whose collective it held).",
    "Each link's cost per step comes from the physics of the job's queue (other traffic in its class, a "
    "queue standing in its egress, PFC pauses, lost bytes, waves down, the far end holding the job's "
    "bytes), scaled per link by the excess it explained where it was the only cause and the physics showed "
    "(past a step's noise, or over its whole episode); links late in the same step share it as a shared "
    "runway is shared (the slowest decides). A step longer than usual is read where its collective may "
    "have run.",
    "A step is blamed its scaled physics weighed against its excess by their errors (the physics' read "
    "from the run, and how much it changes within one telemetry interval), never more than the excess "
    "allows, nothing within the step-time noise; the rest (a checkpoint, a straggler) stays unexplained, "
    "never a link's. The host clock's skew is estimated by correlation and applied.",
    "The steady cost of distance and capacity (propagation, serialization) is reported apart, never hidden "
    "in the baseline.",
]


def evidence_text(evidence: dict[str, int]) -> str:
    """Which measure each logged line was judged by (``analyzer.blame``'s summary counts)."""
    timed = evidence.get("communication", 0)
    alone = evidence.get("step_time", 0)
    return (
        f"Evidence: {timed:,} logged line(s) judged by their measured communication time (a profiler "
        f"trace's exposed communication, NCCL timings, or the step log's own comm_seconds), {alone:,} by "
        "their duration alone."
    )


def clock_text(blame: dict[str, Any]) -> str | None:
    """How the hosts' clock was set against the switches', and what the logs allowed (``summary.json``'s
    ``blame``: ``skew_seconds``, ``skew_given``, ``skew_correlation``, ``skew_range_seconds``)."""
    if "skew_given" not in blame:
        return None
    skew = float(blame.get("skew_seconds") or 0.0)
    if blame["skew_given"]:
        return f"The hosts' clock was taken as {skew:+.2f} s off the switches' (hosts minus switches, given)."
    allowed = blame.get("skew_range_seconds")
    if allowed is None:
        return (
            "The hosts' clock could not be read from the logs (no telemetry episode lined up with them) and "
            "was taken as the switches'. Give the offset (--skew) where NTP or PTP knows it."
        )
    low, high = allowed
    text = (
        f"The hosts' clock was read as {skew:+.2f} s off the switches' (hosts minus switches) by lining the "
        "logged lines up with the telemetry"
    )
    if high - low <= 0:
        return text + "."
    return text + (
        f"; the logs fit as well (within {SKEW_RANGE_STANDARD_ERRORS:g} standard errors of the best fit) "
        f"anywhere from {low:+.2f} s to {high:+.2f} s of the +-{MAX_SKEW_SECONDS:g} s searched, so within a "
        "line averaging several iterations the network time may belong to an iteration up to that far from "
        "where it is placed. Give the offset (--skew) where NTP or PTP knows it."
    )


def placement_text(blame: dict[str, Any]) -> str | None:
    """How finely the network time inside a line averaging several iterations can be placed: to a fraction
    of the telemetry's poll, so where an iteration is shorter than the poll the iteration given a stall may
    not be the one it held (``summary.json``'s ``blame``: ``interval_lines``, ``poll_seconds``,
    ``typical_step_seconds``). None where no line averages several iterations or they are longer than a
    poll."""
    lines = int(blame.get("interval_lines") or 0)
    poll, step = blame.get("poll_seconds"), blame.get("typical_step_seconds")
    if not lines or not poll or not step or step >= poll:
        return None
    return (
        f"{lines:,} logged line(s) average several iterations each. Where in such a line the network held "
        f"an iteration is read from telemetry polled every {poll:.2g} s, to a fraction of a poll, and a "
        f"typical iteration takes {step:.2g} s: the iteration given a stall may be one or more off the one "
        "it held. Each line's total does not depend on it; per-iteration figures do. A log line per "
        "iteration, or the communication time per iteration (a profiler trace, NCCL timings, the step "
        "log's comm_seconds), removes the ambiguity."
    )


def methodology(
    steps: pl.DataFrame,
    links: pl.DataFrame,
    evidence: dict[str, int] | None = None,
    blame: dict[str, Any] | None = None,
) -> Methodology:
    """What was measured, how blame was assigned, and the time that stayed unexplained.

    Seconds are summed over steps, mean over ranks (as the per-link totals are).

    Args:
        steps: ``steps.parquet`` (``inflation_seconds``, ``unexplained_seconds``, ``steady_seconds``).
        links: ``links.parquet``.
        evidence: the blame's count of lines per measure (``summary.json``'s ``blame.evidence``).
        blame: ``summary.json``'s ``blame`` (its clock: ``clock_text``; placement in lines:
            ``placement_text``).

    Returns:
        The methodology section.
    """
    ranks = max(steps["rank"].n_unique(), 1)

    def total(column: str) -> float | None:
        if column not in steps.columns or steps[column].null_count() == steps.height:
            return None
        return float(steps[column].sum()) / ranks

    rules_text = [
        f"A verdict rests on at least {rules.MIN_SAMPLES} samples ({rules.MIN_QUANTILE_SAMPLES} for a "
        "99th percentile); with fewer it reads 'insufficient data'.",
        f"A PASS needs telemetry from the vendor's devices over {rules.MIN_COVERAGE:.0%} of the run (a "
        f"second counts when a reading follows within {rules.MAX_GAP_SECONDS:g} s); a FAIL with enough "
        "samples stands, the violation having been observed.",
        "Quantiles of readings come from distinct readings (a reading repeating its series' device time is "
        "one measurement) in 1 % log buckets, the same way in every table.",
        "Optics claims use readings with signal only: a down wave (BER 0.5, OSNR 0 dB) is an outage, "
        "counted by the wave-down measure.",
    ]
    return Methodology(
        MEASURED,
        ([evidence_text(evidence)] if evidence else [])
        + BLAME
        + [t for t in [clock_text(blame or {}), placement_text(blame or {})] if t],
        rules_text,
        total("duration_seconds") or 0.0,
        total("inflation_seconds") or 0.0,
        float(links["exposed_total_seconds"].sum()),
        total("unexplained_seconds"),
        total("steady_seconds"),
    )


def bus_bandwidth(
    table: pl.DataFrame, config: Config | None, link_speed_bytes: float | None, planned: PlanInput | None
) -> BusBandwidth | None:
    """nccl-tests bus bandwidth per size, beside the longest link's capacity and the plan's goodput.

    Args:
        table: ``bus_bandwidth.parquet``.
        config: the collector config (the link's waves), or None.
        link_speed_bytes: the member interfaces' speed, or None.
        planned: the plan's input, or None.

    Returns:
        The section, or None without nccl-tests results.
    """
    if table.height == 0:
        return None
    capacity = None
    if config is not None and config.links and link_speed_bytes:
        link = max(config.links, key=lambda item: item.distance_km)
        ends = [m.device for m in link.members]
        waves = min(ends.count(d) for d in set(ends))
        capacity = waves * link_speed_bytes / 1e9
    goodput = plan(planned).goodput_bytes_per_second / 1e9 if planned is not None else None
    rows = [
        BusBandwidthRow(
            str(r["source_file"]).rsplit("/", 1)[-1],
            r["collective"],
            r["size_bytes"],
            r["time_seconds"],
            r["busbw_gbps"],
            r["busbw_in_place_gbps"],
            r["ranks"],
        )
        for r in table.iter_rows(named=True)
    ]
    return BusBandwidth(rows, capacity, goodput)
