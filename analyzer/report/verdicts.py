"""Each vendor claim beside its measured value: verdict (pass / fail / no data, with why) and evidence.

A claim is about a vendor's equipment, so it must hold on every device the vendor matches: the measured
value shown is the worst device's (the largest for ``<``/``<=``, the smallest for ``>``/``>=``, the farthest
for ``==``), and every device's value is kept beside it. Values come from the analysis's device-scope
measures (``measures.parquet``); a step-based measure (``Measure.from_steps``) with no row for a device that
reported telemetry while steps were logged measured zero: nothing was attributed to it.

A verdict needs enough evidence (``coverage``: the minimum samples, and telemetry over most of the run for a
PASS); short of it the claim reads "insufficient data", never PASS. Optics claims rest on readings with
signal only: readings of a down wave are counted apart, and the optical events of an outage are not cited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from analyzer.claims import Claim, Claims, Vendor
from analyzer.measures import JOB_CLASS_SCOPE, MEASURES, Measure
from analyzer.report import coverage
from analyzer.report.model import ClaimResult, EventRef, Evidence, VendorReport, Verdict
from analyzer.report.readings import Readings
from analyzer.report.units import format_value, iso, span_seconds

EVIDENCE_EVENTS = 10


@dataclass(frozen=True)
class Tables:
    """The analysis tables the verdicts read."""

    steps: pl.DataFrame
    events: pl.DataFrame
    attribution: pl.DataFrame
    measures: pl.DataFrame
    readings: Readings
    gpus: int | None
    run_start: Any = None  # the steps' span (aware datetimes), None without steps
    run_end: Any = None
    job_class: str | None = None  # the job's traffic class the analysis blamed (summary.json)


def vendor_reports(
    claims: Claims, devices: Mapping[str, tuple[str, ...]], tables: Tables
) -> list[VendorReport]:
    """Every vendor's claims checked against the measurements.

    Args:
        claims: the claims file.
        devices: vendor name -> its devices (``analyzer.claims.match_vendors``).
        tables: the analysis tables.

    Returns:
        One report per vendor, in file order.
    """
    return [_vendor(v, list(devices[v.name]), tables) for v in claims.vendors]


def _vendor(vendor: Vendor, devices: list[str], tables: Tables) -> VendorReport:
    results = [evaluate(claim, devices, tables) for claim in vendor.claims]
    count = {
        verdict: sum(r.verdict == verdict for r in results)
        for verdict in ("pass", "fail", "no data", "insufficient data")
    }
    return VendorReport(
        vendor.name,
        dict(vendor.match),
        devices,
        results,
        count["pass"],
        count["fail"],
        count["no data"],
        count["insufficient data"],
    )


def device_values(claim: Claim, devices: list[str], tables: Tables) -> dict[str, float | None]:
    """Each device's value of the claim's measure, None where it has none (see the module docstring).

    Args:
        claim: the claim.
        devices: the vendor's devices.
        tables: the analysis tables.

    Returns:
        Device -> value or None.
    """
    rows = tables.measures.filter(
        pl.col("scope") == _scope(claim, tables), pl.col("measure") == claim.measure
    )
    found = dict(zip(rows["key"].to_list(), rows["value"].to_list(), strict=True))
    measure = MEASURES[claim.measure]
    seen = set(tables.readings.counts["device"].to_list()) | set(tables.events["device"].to_list())
    zero_ok = (
        measure.from_steps and tables.steps.height > 0 and (claim.measure != "gpu_hours_lost" or tables.gpus)
    )
    return {d: found.get(d, 0.0 if zero_ok and d in seen else None) for d in devices}


def _scope(claim: Claim, tables: Tables) -> str:
    """The measures' scope the claim reads: its devices on the job's class alone when it is about the job's
    class and the analysis measured one, else its devices with every class."""
    on_class = tables.measures.filter(pl.col("scope") == JOB_CLASS_SCOPE).height > 0
    return JOB_CLASS_SCOPE if claim.traffic_class == "job" and on_class else "device"


def _class_note(claim: Claim, tables: Tables) -> str:
    """What the measured value covers, when the claim is about a traffic class."""
    if claim.traffic_class != "job":
        return ""
    if _scope(claim, tables) == JOB_CLASS_SCOPE:
        return f" (the job's traffic class {tables.job_class}; other classes are not the claim's)"
    return " (every traffic class: the analysis knew no job's class)"


def _worst(claim: Claim, values: dict[str, float]) -> str:
    if claim.op in ("<", "<="):
        return max(values, key=lambda d: values[d])
    if claim.op in (">", ">="):
        return min(values, key=lambda d: values[d])
    return max(values, key=lambda d: abs(values[d] - claim.value))


def evaluate(claim: Claim, devices: list[str], tables: Tables) -> ClaimResult:
    """One claim's verdict, measured value and evidence.

    Args:
        claim: the claim.
        devices: the vendor's devices.
        tables: the analysis tables.

    Returns:
        The result.
    """
    measure = MEASURES[claim.measure]
    per_device = device_values(claim, devices, tables)
    known = {d: v for d, v in per_device.items() if v is not None}
    evidence = _evidence(measure, claim.measure, devices, tables, _scope(claim, tables) == JOB_CLASS_SCOPE)
    if not known:
        return _result(
            claim,
            measure,
            None,
            "no data",
            _why_none(claim, measure, devices, tables),
            None,
            per_device,
            evidence,
        )
    worst = _worst(claim, known)
    failing = [d for d, v in known.items() if not claim.holds(v)]
    verdict: Verdict = "fail" if failing else "pass"
    bound = f"{claim.op} {format_value(claim.value, measure.unit)}"
    if failing:
        reason = f"{', '.join(failing)} measured {format_value(known[worst], measure.unit)}, claim {bound}"
    else:
        reason = f"{bound} holds on {'every device' if len(known) > 1 else worst}"
    short = _insufficient(evidence, verdict)
    if short is not None:
        verdict, reason = "insufficient data", f"{short} (measured: {reason})"
    reason += _class_note(claim, tables)
    missing = [d for d, v in per_device.items() if v is None]
    if missing:
        reason += f"; no data from {', '.join(missing)}"
    return _result(claim, measure, known[worst], verdict, reason, worst, per_device, evidence)


def _result(
    claim: Claim,
    measure: Measure,
    measured: float | None,
    verdict: Verdict,
    reason: str,
    worst: str | None,
    per_device: dict[str, float | None],
    evidence: Evidence,
) -> ClaimResult:
    return ClaimResult(
        claim.id,
        claim.text,
        claim.measure,
        measure.unit,
        claim.op,
        claim.value,
        measured,
        verdict,
        reason,
        worst,
        per_device,
        evidence,
    )


def _insufficient(evidence: Evidence, verdict: Verdict) -> str | None:
    """Why the evidence cannot carry this verdict, or None (rules: ``analyzer.report.coverage``)."""
    if evidence.samples < evidence.minimum_samples:
        return f"only {evidence.samples} {evidence.basis}, {evidence.minimum_samples} needed"
    if verdict == "pass" and evidence.coverage is not None and evidence.coverage < coverage.MIN_COVERAGE:
        return (
            f"telemetry covered {evidence.coverage:.1%} of the run, "
            f"{coverage.MIN_COVERAGE:.0%} needed to vouch for it"
        )
    return None


def _why_none(claim: Claim, measure: Measure, devices: list[str], tables: Tables) -> str:
    names = ", ".join(devices)
    if claim.measure == "gpu_hours_lost" and not tables.gpus:
        return "needs the job's GPU count (analyze --gpus)"
    if measure.from_steps and tables.steps.height == 0:
        return "no training steps in the logs"
    if measure.reads and tables.readings.note is None:
        return f"no readings of {' or '.join(measure.reads)} from {names}"
    if tables.readings.note is not None and not measure.from_steps:
        return f"nothing measured on {names} ({tables.readings.note.split(':')[0]})"
    return f"nothing measured on {names}"


def _evidence(
    measure: Measure, name: str, devices: list[str], tables: Tables, job_class_only: bool = False
) -> Evidence:
    no_signal = 0
    if measure.from_steps:
        steps = tables.steps
        basis, samples = "steps", steps["step"].n_unique()
        start, end = steps["start_time"].min(), steps["end_time"].max()
        events = _attributed_events(devices, tables)
    else:
        counts = tables.readings.counts.filter(pl.col("device").is_in(devices))
        if measure.reads:
            counts = counts.filter(pl.col("metric").is_in(list(measure.reads)))
        basis = f"readings of {', '.join(measure.reads)}" if measure.reads else "readings"
        no_signal = int(counts["no_signal"].sum()) if measure.kinds and set(measure.kinds) & OPTICAL else 0
        if no_signal:
            basis = f"readings with signal of {', '.join(measure.reads)}"
        samples, start, end = int(counts["n"].sum()) - no_signal, counts["first"].min(), counts["last"].max()
        events = tables.events.filter(pl.col("device").is_in(devices))
        if job_class_only:  # events raised by other queues are not the job's class's
            queues = pl.col("queue").str.split(",")
            events = events.filter(pl.col("queue").is_null() | queues.list.contains(tables.job_class or ""))
        if measure.kinds:
            events = events.filter(pl.col("kind").is_in(list(measure.kinds)))
            if set(measure.kinds) & OPTICAL:
                events = outside_outages(events, tables.events)
    span = span_seconds(start, end)
    return Evidence(
        basis,
        samples,
        iso(start),
        iso(end),
        span,
        events.height,
        event_refs(events),
        _coverage(devices, tables),
        no_signal,
        coverage.minimum_samples(name),
    )


OPTICAL = frozenset({"ber", "osnr", "fec_uncorrectable", "fcs"})


def outside_outages(events: pl.DataFrame, every: pl.DataFrame) -> pl.DataFrame:
    """The events that do not overlap a wave-down event of their device (a down wave's optics are an
    outage, evidenced by the wave-down event, not an optics degradation)."""
    down = every.filter(pl.col("kind") == "wave_down").select(
        "device", down_start="start_time", down_end="end_time"
    )
    if down.height == 0 or events.height == 0:
        return events
    during = events.join(down, on="device").filter(
        pl.col("start_time") < pl.col("down_end"), pl.col("end_time") > pl.col("down_start")
    )
    return events.filter(~pl.col("event_id").is_in(during["event_id"].unique().to_list()))


def _coverage(devices: list[str], tables: Tables) -> float | None:
    """Share of the steps' span during which some device of the vendor had telemetry; None without steps."""
    start, end = tables.run_start, tables.run_end
    if start is None or end is None:
        return None
    run = span_seconds(start, end)
    if not run:
        return None
    mine = tables.readings.stamps.filter(pl.col("device").is_in(devices)).with_columns(vendor=pl.lit("v"))
    seen = coverage.covered_seconds(mine, "vendor", start, end).get("v", 0.0)
    return min(seen / run, 1.0)


def _attributed_events(devices: list[str], tables: Tables) -> pl.DataFrame:
    a = tables.attribution.filter(pl.col("device").is_in(devices), pl.col("attributed_seconds") > 0)
    return tables.events.filter(pl.col("event_id").is_in(a["event_id"].unique().to_list()))


def event_refs(events: pl.DataFrame) -> list[EventRef]:
    """The longest events (at most ``EVIDENCE_EVENTS``) as evidence references.

    Args:
        events: ``schemas.EVENTS`` rows.

    Returns:
        The references, longest first (ties by start time).
    """
    top = events.sort(["duration_seconds", "start_time"], descending=[True, False]).head(EVIDENCE_EVENTS)
    return [
        EventRef(
            int(r["event_id"]),
            r["kind"],
            r["link"],
            r["device"],
            r["interface"],
            iso(r["start_time"]) or "",
            float(r["duration_seconds"]),
            r["worst"],
        )
        for r in top.iter_rows(named=True)
    ]
