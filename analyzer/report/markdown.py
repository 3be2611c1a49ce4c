"""The report as Markdown (``report.md``): the same content as the HTML, tables instead of charts.

Deterministic for given data (golden-tested: ``tests/golden/report.md``).
"""

from __future__ import annotations

from collections.abc import Iterable

from analyzer.report.model import ClaimResult, Glance, LinkInfo, ReportData, VendorReport
from analyzer.report.units import data_bytes, format_value, number, seconds

VERDICT = {"pass": "PASS", "fail": "FAIL", "insufficient data": "INSUFFICIENT DATA", "no data": "NO DATA"}
OPTICS_STATUS = {
    "ok": "ok",
    "warning": "warning",
    "over limit": "**over limit**",
    "outage": "outage",
    "no data": "no data",
}


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    cells = list(header)
    out = ["| " + " | ".join(cells) + " |", "|" + "---|" * len(cells)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return [*out, ""]


def _maybe(value: float | None, render: object) -> str:
    return "-" if value is None else render(value)  # type: ignore[operator]


def _round_trip(link: LinkInfo) -> str:
    """The measured round trip beside the fibre's (distance x 4.9 us/km, and the length CD gives)."""
    if link.measured_rtt_min_seconds is None and link.dispersion_km is None:
        return ""
    out = f"; fibre round trip {seconds(link.rtt_seconds)}"
    if link.measured_rtt_min_seconds is not None:
        out += f", measured {seconds(link.measured_rtt_min_seconds)} fastest"
        if link.measured_rtt_median_seconds is not None:
            out += f" / {seconds(link.measured_rtt_median_seconds)} median"
    if link.dispersion_km is not None:
        out += f"; {link.dispersion_km:.0f} km of fibre by chromatic dispersion"
    if link.route_longer_than_fibre:
        out += "; ROUTE LONGER THAN THE FIBRE"
    return out


def glance_rows(g: Glance) -> list[tuple[str, str]]:
    """The run-at-a-glance figures as (label, text), shared with the HTML.

    Args:
        g: the glance section.

    Returns:
        The rows, in reading order.
    """
    links = ", ".join(
        f"{link.name} ({link.distance_km:g} km, {link.members} member interfaces{_round_trip(link)})"
        for link in g.links
    )
    share = "" if g.exposed_share is None else f" ({g.exposed_share:.1%} of step time)"
    return [
        ("Run", f"{g.start or '-'} to {g.end or '-'} ({_maybe(g.duration_seconds, seconds)})"),
        (
            "Steps",
            f"{g.steps} steps x {g.ranks} rank(s); median step {_maybe(g.step_median_seconds, seconds)}",
        ),
        ("GPUs", "-" if g.gpus is None else str(g.gpus)),
        ("Links", links or "-"),
        ("Distance", "-" if g.distance_km is None else f"{g.distance_km:g} km"),
        ("Events detected", str(g.events)),
        ("Steps the network hurt", str(g.hurt_steps)),
        ("Exposed network time", f"{seconds(g.exposed_total_seconds)}{share}"),
        ("GPU-hours lost", _maybe(g.gpu_hours_lost, lambda v: f"{v:.3g}")),
    ]


def claim_cells(c: ClaimResult) -> list[str]:
    """One claim as table cells: claim, measure, claimed, measured, verdict, why, evidence."""
    e = c.evidence
    span = "" if e.span_seconds is None else f" over {seconds(e.span_seconds)}"
    evidence = f"{e.samples} {e.basis}{span}"
    if e.no_signal:
        evidence += f" ({e.no_signal} without signal left out: outage)"
    if e.coverage is not None:
        evidence += f"; telemetry {e.coverage:.0%} of the run"
    evidence += f"; {e.event_count} event(s)"
    if e.events:
        evidence += ": " + ", ".join(
            f"#{r.event_id} {r.kind} {r.device} {r.interface or ''}".rstrip() for r in e.events[:3]
        )
    return [
        f"{c.id}: {c.text}",
        c.measure,
        f"{c.op} {format_value(c.claimed, c.unit)}",
        format_value(c.measured, c.unit),
        VERDICT[c.verdict],
        c.reason,
        evidence,
    ]


def _vendor(v: VendorReport) -> list[str]:
    match = ", ".join(f"{k}={val}" for k, val in v.match.items())
    out = [
        f"### {v.name}",
        "",
        f"Matched by {match}: {', '.join(v.devices)}. {v.passed} pass, {v.failed} fail, "
        f"{v.insufficient} insufficient data, {v.no_data} no data.",
        "",
    ]
    header = ("Claim", "Measure", "Claimed", "Measured (worst device)", "Verdict", "Why", "Evidence")
    return out + _table(header, (claim_cells(c) for c in v.claims))


def render(data: ReportData) -> str:
    """The whole report as Markdown.

    Args:
        data: the report's data.

    Returns:
        The document, ending with a newline.
    """
    lines = [f"# {data.title}", ""]
    lines += [f"Sources: {', '.join(f'{k} `{v}`' for k, v in data.sources.items() if v)}.", ""]
    lines += _summary(data)
    lines += [f"> {note}" for note in data.notes] + ([""] if data.notes else [])
    lines += _warnings(data)
    lines += ["## The run at a glance", "", *_table(("", ""), glance_rows(data.glance))]
    lines += _coverage(data)
    lines += ["## Vendor claims", ""]
    for vendor in data.vendors:
        lines += _vendor(vendor)
    if not data.vendors:
        lines += ["No claims file was given.", ""]
    lines += (
        _exposure(data)
        + _ranks(data)
        + _distributions(data)
        + _optics(data)
        + _plan(data)
        + _bus_bandwidth(data)
    )
    lines += _methodology(data) + _timeline(data)
    return "\n".join(lines).rstrip() + "\n"


def summary_lines(data: ReportData) -> list[str]:
    """The answer in sentences: verdicts per vendor, exposed time per link (shared with the HTML)."""
    out = []
    for v in data.summary.vendors:
        failing = f" (failed: {', '.join(v.failing)})" if v.failing else ""
        out.append(
            f"{v.vendor}: {v.passed} pass, {v.failed} fail{failing}, {v.insufficient} insufficient data, "
            f"{v.no_data} no data."
        )
    for link in data.summary.links:
        share = "" if link.share_of_run is None else f" ({link.share_of_run:.1%} of the run)"
        seen = "" if link.coverage is None else f"; telemetry covered {link.coverage:.0%} of the run"
        out.append(
            f"Link {link.link}: {seconds(link.exposed_total_seconds)} of step time exposed{share}{seen}."
        )
    if not out:
        out.append("No claims and no link exposure to report.")
    return out


def _summary(data: ReportData) -> list[str]:
    return ["## Verdict summary", "", *(f"- {line}" for line in summary_lines(data)), ""]


def _warnings(data: ReportData) -> list[str]:
    if not data.warnings:
        return []
    rows = ((w.input, w.problem) for w in data.warnings)
    return ["## Inputs not used", "", *_table(("Input", "Problem"), rows)]


def coverage_rows(data: ReportData) -> list[tuple[str, ...]]:
    """Coverage per link and device as table cells (shared with the HTML)."""
    return [
        (
            kind,
            c.name,
            seconds(c.telemetry_seconds),
            _maybe(c.run_seconds, seconds),
            _maybe(c.share, lambda v: f"{v:.1%}"),
            str(c.readings),
        )
        for kind, items in (("link", data.coverage.links), ("device", data.coverage.devices))
        for c in items
    ]


def _coverage(data: ReportData) -> list[str]:
    c = data.coverage
    intro = (
        f"Seconds of the run with telemetry (a reading within {c.max_gap_seconds:g} s); a PASS needs "
        f"{c.minimum_share:.0%} on the vendor's devices."
    )
    header = ("Scope", "Name", "Telemetry", "Run", "Covered", "Readings")
    rows = coverage_rows(data)
    if not rows:
        return ["## Coverage", "", "No telemetry: every verdict that rests on it reads no data.", ""]
    return ["## Coverage", "", intro, "", *_table(header, rows)]


def bus_rows(data: ReportData) -> list[tuple[str, ...]]:
    """nccl-tests results as table cells (shared with the HTML)."""
    b = data.bus_bandwidth
    if b is None:
        return []
    capacity = b.link_capacity_gbps
    return [
        (
            r.source,
            r.collective,
            data_bytes(r.size_bytes),
            _maybe(r.time_seconds, seconds),
            _maybe(r.busbw_gbps, lambda v: f"{v:.2f}"),
            _maybe(r.busbw_in_place_gbps, lambda v: f"{v:.2f}"),
            "-" if r.busbw_gbps is None or not capacity else f"{r.busbw_gbps / capacity:.1%}",
        )
        for r in b.rows
    ]


def _bus_bandwidth(data: ReportData) -> list[str]:
    b = data.bus_bandwidth
    if b is None:
        return []
    intro = (
        "nccl-tests bus bandwidth per message size (GB/s), beside the link's capacity "
        f"({_maybe(b.link_capacity_gbps, lambda v: f'{v:.4g} GB/s')}) and the plan's goodput "
        f"({_maybe(b.planned_goodput_gbps, lambda v: f'{v:.4g} GB/s')})."
    )
    rows = bus_rows(data)
    header = ("File", "Collective", "Size", "Time", "Bus bw", "Bus bw in place", "Of link capacity")
    return ["## Collective bandwidth (nccl-tests)", "", intro, "", *_table(header, rows)]


def methodology_rows(data: ReportData) -> list[tuple[str, str]]:
    """The methodology's seconds as (label, text) (shared with the HTML)."""
    m = data.methodology
    return [
        ("Step time", seconds(m.step_seconds)),
        ("Inflation over the clean baseline", seconds(m.inflation_seconds)),
        ("Attributed to links", seconds(m.attributed_seconds)),
        ("Unexplained (no link blamed)", _maybe(m.unexplained_seconds, seconds)),
        ("Steady network cost (propagation, serialization)", _maybe(m.steady_seconds, seconds)),
    ]


def _methodology(data: ReportData) -> list[str]:
    m = data.methodology
    figures = methodology_rows(data)
    lines = ["## Methodology", "", "What was measured:", ""] + [f"- {t}" for t in m.measured]
    lines += ["", "How blame was assigned:", ""] + [f"- {t}" for t in m.blame]
    lines += ["", "Rules of evidence:", ""] + [f"- {t}" for t in m.rules]
    return [*lines, "", *_table(("Seconds, summed over steps (mean over ranks)", ""), figures)]


def _exposure(data: ReportData) -> list[str]:
    rows = (
        (
            r.link,
            str(r.steps_affected),
            seconds(r.exposed_total_seconds),
            seconds(r.exposed_p50_seconds),
            seconds(r.exposed_p99_seconds),
            _maybe(r.share_of_run, lambda v: f"{v:.1%}"),
            ", ".join(f"{k} {seconds(v)}" for k, v in r.by_kind.items() if v > 0) or "-",
        )
        for r in data.link_exposure
    )
    header = (
        "Link",
        "Steps affected",
        "Exposed total",
        "p50 per step",
        "p99 per step",
        "Share of run",
        "By kind",
    )
    return ["## Exposed latency per link", "", *_table(header, rows)]


def _ranks(data: ReportData) -> list[str]:
    r = data.ranks
    if not r.count:
        return []
    intro = (
        f"{r.count} rank(s); mean step time {_maybe(r.step_mean_median_seconds, seconds)} for the median "
        f"rank, {_maybe(r.step_mean_max_seconds, seconds)} for the slowest. The slowest {len(r.worst)}:"
    )
    rows = (
        (
            str(w.rank),
            str(w.steps),
            seconds(w.step_mean_seconds),
            seconds(w.over_median_seconds),
            seconds(w.network_seconds),
        )
        for w in r.worst
    )
    header = ("Rank", "Steps", "Mean step", "Over the median rank", "Network (summed over steps)")
    return ["## Ranks", "", intro, "", *_table(header, rows)]


def _distributions(data: ReportData) -> list[str]:
    def q(values: list[float], p: int, render: object) -> str:
        return render(values[p]) if values else "-"  # type: ignore[operator]

    rows = []
    for d in data.distributions:
        s, w = d.step_inflation_seconds, d.queue_watermark_bytes
        rows.append(
            (
                d.vendor,
                str(s.n),
                q(s.values, 50, seconds),
                q(s.values, 99, seconds),
                str(w.n),
                q(w.values, 50, data_bytes),
                q(w.values, 99, data_bytes),
            )
        )
    header = (
        "Vendor",
        "Steps",
        "Inflation p50",
        "Inflation p99",
        "Watermarks",
        "Watermark p50",
        "Watermark p99",
    )
    return ["## Distributions per vendor", "", *_table(header, rows)]


def _optics(data: ReportData) -> list[str]:
    o = data.optics
    lines = [
        "## Optical health",
        "",
        f"FEC limit (pre-FEC BER) {number(o.fec_limit_ber)}, event level {number(o.ber_event_level)}; "
        f"required OSNR {o.osnr_required_db:g} dB, event level {o.osnr_event_level_db:g} dB.",
        "",
    ]
    rows = (
        (
            r.device,
            r.interface,
            r.vendor or "-",
            _maybe(r.pre_fec_ber_max, number),
            _maybe(r.ber_margin_decades, lambda v: f"{v:.2f}"),
            _maybe(r.osnr_min_db, lambda v: f"{v:.1f}"),
            _maybe(r.osnr_margin_db, lambda v: f"{v:+.1f}"),
            OPTICS_STATUS[r.status],
            str(r.no_signal_readings),
        )
        for r in o.rows
        if r.status != "no data"
    )
    header = (
        "Device",
        "Interface",
        "Vendor",
        "Worst pre-FEC BER",
        "Margin (decades)",
        "Worst OSNR (dB)",
        "OSNR margin (dB)",
        "Status",
        "Readings without signal",
    )
    return lines + _table(header, rows)


def _plan(data: ReportData) -> list[str]:
    p = data.plan
    if p is None:
        return [
            "## Planned versus measured",
            "",
            "No plan: it needs a collector config with links and the job's bytes per step.",
            "",
        ]
    intro = (
        f"`spanwatch plan` for {p.distance_km:g} km, {p.links} x {p.link_gbps:g} Gb/s waves, "
        f"{data_bytes(p.bytes_per_step)} per step and direction (the job's bytes)."
    )
    rows = (
        (r.quantity, format_value(r.planned, r.unit), format_value(r.measured, r.unit), r.note)
        for r in p.rows
    )
    return [
        "## Planned versus measured",
        "",
        intro,
        "",
        *_table(("Quantity", "Planned", "Measured", "Note"), rows),
    ]


def _timeline(data: ReportData) -> list[str]:
    t = data.timeline
    header = ("Link", "Kind", "Device", "Interface", "From (s)", "To (s)")
    rows = (
        (b.link, b.kind, b.device, b.interface or "-", f"{b.start_s:.1f}", f"{b.end_s:.1f}") for b in t.bands
    )
    intro = f"Events over the run, in seconds since {t.start or 'the start'} ({len(t.step)} steps plotted in the HTML)."
    return ["## Timeline of events", "", intro, "", *_table(header, rows)]
