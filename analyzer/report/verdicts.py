"""Each vendor claim beside its measured value: verdict (pass / fail / no data, with why) and evidence.

A claim is about a vendor's equipment, so it must hold on every device the vendor matches: the measured
value shown is the worst device's (the largest for ``<``/``<=``, the smallest for ``>``/``>=``, the farthest
for ``==``), and every device's value is kept beside it. Values come from the analysis's device-scope
measures (``measures.parquet``); a step-based measure (``Measure.from_steps``) with no row for a device that
reported telemetry while steps were logged measured zero: nothing was attributed to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from analyzer.claims import Claim, Claims, Vendor
from analyzer.measures import MEASURES, Measure
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
    count = {verdict: sum(r.verdict == verdict for r in results) for verdict in ("pass", "fail", "no data")}
    return VendorReport(
        vendor.name, dict(vendor.match), devices, results, count["pass"], count["fail"], count["no data"]
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
    rows = tables.measures.filter(pl.col("scope") == "device", pl.col("measure") == claim.measure)
    found = dict(zip(rows["key"].to_list(), rows["value"].to_list(), strict=True))
    measure = MEASURES[claim.measure]
    seen = set(tables.readings.counts["device"].to_list()) | set(tables.events["device"].to_list())
    zero_ok = (
        measure.from_steps and tables.steps.height > 0 and (claim.measure != "gpu_hours_lost" or tables.gpus)
    )
    return {d: found.get(d, 0.0 if zero_ok and d in seen else None) for d in devices}


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
    evidence = _evidence(measure, devices, tables)
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


def _evidence(measure: Measure, devices: list[str], tables: Tables) -> Evidence:
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
        samples, start, end = int(counts["n"].sum()), counts["first"].min(), counts["last"].max()
        events = tables.events.filter(pl.col("device").is_in(devices))
        if measure.kinds:
            events = events.filter(pl.col("kind").is_in(list(measure.kinds)))
    span = span_seconds(start, end)
    return Evidence(basis, samples, iso(start), iso(end), span, events.height, event_refs(events))


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
