"""``build_report``: every number the report shows, computed from an analysis directory (pure; no rendering).

Reads what ``spanwatch analyze`` wrote (``steps``, ``events``, ``attribution``, ``links``, ``measures``
Parquet files and ``summary.json``), the archive it analysed (for reading counts, watermarks and optics;
see ``readings``), the collector config (device labels for vendor matching, links) and the claims file, and
returns a ``ReportData``. Nothing here recomputes the analysis: the report re-renders from its outputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from analyzer import quantiles, schemas
from analyzer.analysis import FILES, AnalysisResult
from analyzer.claims import Claims, match_vendors
from analyzer.correlate import exposure_per_step
from analyzer.errors import InputError
from analyzer.kinds import KINDS
from analyzer.measures import steps_hurt
from analyzer.plan import PlanInput
from analyzer.report import optics as optics_section
from analyzer.report import planned, sections
from analyzer.report.model import (
    SCHEMA_VERSION,
    Band,
    Cdf,
    Glance,
    InputNote,
    LinkExposure,
    LinkInfo,
    ReportData,
    Timeline,
    VendorDistributions,
)
from analyzer.report.ranks import ranks
from analyzer.report.readings import Readings, read_archive
from analyzer.report.units import iso, span_seconds
from analyzer.report.verdicts import Tables, vendor_reports
from analyzer.thresholds import Thresholds
from collector import storage
from collector.config import Config
from collector.contracts.fibre import length_from_dispersion_km, one_way_delay_s

OPTIONAL_TABLES = {"bus_bandwidth": schemas.BUS_BANDWIDTH}  # absent from older analysis folders
TABLES = tuple(name for name in FILES if name not in OPTIONAL_TABLES)
CATEGORIES = {kind.name: kind.family for kind in KINDS.values()}  # the timeline's band colours
QUANTILES = np.linspace(0.0, 1.0, 101)


@dataclass
class AnalysisFiles(AnalysisResult):
    """What ``spanwatch analyze`` wrote into its ``--out`` folder: the result's tables and summary, read back."""

    folder: Path = Path()

    def input_path(self, name: str) -> Path | None:
        """A path the analysis recorded in ``summary.json`` (``archive``, ``config``, ``claims``), or None.

        Recorded paths are relative to the analysis folder; a folder written before that recorded them
        relative to analyze's working directory, which is tried when the folder-relative one is absent.
        """
        value = self.summary.get("inputs", {}).get(name)
        if value is None:
            return None
        recorded = Path(value)
        in_folder = self.folder / recorded
        return (
            in_folder if recorded.is_absolute() or in_folder.exists() or not recorded.exists() else recorded
        )


def load_analysis(folder: Path) -> AnalysisFiles:
    """Read an analysis directory.

    Args:
        folder: ``spanwatch analyze``'s ``--out``.

    Returns:
        Its tables and summary.

    Raises:
        InputError: a file is missing or unreadable.
    """
    missing = [f"{n}.parquet" for n in TABLES if not (folder / f"{n}.parquet").is_file()]
    if not (folder / "summary.json").is_file():
        missing.append("summary.json")
    if missing:
        raise InputError(
            folder, f"not an analysis directory (missing {', '.join(missing)}): run spanwatch analyze"
        )
    try:
        frames = {n: pl.read_parquet(folder / f"{n}.parquet") for n in TABLES}
        for name in OPTIONAL_TABLES:
            if (folder / f"{name}.parquet").is_file():
                frames[name] = pl.read_parquet(folder / f"{name}.parquet")
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
        raise InputError(folder, f"cannot read the analysis: {exc}") from None
    return AnalysisFiles(folder=folder, summary=summary, **frames)


def build_report(
    analysis: AnalysisFiles,
    config: Config | None,
    claims: Claims | None,
    plan: PlanInput | None = None,
    archive: Path | str | None = None,
) -> ReportData:
    """Compute the report's content.

    Args:
        analysis: the analysis directory's files (``load_analysis``).
        config: the collector config the run used, or None (no vendor matching, links or plan).
        claims: the claims file, or None (no vendor section).
        plan: the plan to set beside the run; None derives it from the config.
        archive: the archive to read raw readings from; None takes the one ``summary.json`` names.

    Returns:
        The report's data.

    Raises:
        InputError: a vendor matches no device, or claims are given without a config.
    """
    devices = match_vendors(claims, config) if claims is not None else {}
    recorded = analysis.summary.get("inputs", {}).get("archive")
    bucket = recorded if storage.is_url(recorded) else None  # a URL is no local path to test
    readings = read_archive(archive or bucket or _existing(analysis.input_path("archive")))
    thresholds = Thresholds.model_validate(analysis.summary.get("thresholds", {}))
    gpus = analysis.summary.get("gpus")
    run_start, run_end = analysis.steps["start_time"].min(), analysis.steps["end_time"].max()
    tables = Tables(
        analysis.steps,
        analysis.events,
        analysis.attribution,
        analysis.measures,
        readings,
        gpus,
        run_start,
        run_end,
        (analysis.summary.get("job_traffic_class") or {}).get("value"),
    )
    glance = _glance(analysis, config, readings, gpus)
    start = _start(analysis, readings)
    vendor_of = {d: name for name, names in devices.items() for d in names}
    run = {**_run_measures(analysis.measures), **_measured_steady(analysis)}
    job_bytes = analysis.summary.get("job_bytes_per_step")
    if plan is None and config is not None:
        plan = planned.plan_input(config, readings.link_speed_bytes, job_bytes)
    vendors = vendor_reports(claims, devices, tables) if claims is not None else []
    covered = sections.coverage(readings, run_start, run_end)
    comparison = planned.compare(plan, run) if plan is not None else None
    return ReportData(
        schema_version=SCHEMA_VERSION,
        title=f"spanwatch vendor comparison: {analysis.folder.name}",
        sources=_sources(analysis, config is not None, claims),
        glance=glance,
        vendors=vendors,
        timeline=_timeline(analysis, start),
        link_exposure=_link_exposure(analysis),
        ranks=ranks(analysis.steps, analysis.attribution),
        distributions=[_distributions(n, list(d), analysis, readings) for n, d in devices.items()],
        optics=optics_section.optics(readings.optics, start, thresholds, vendor_of, _profiles(config)),
        plan=comparison,
        notes=_notes(readings, config, job_bytes),
        warnings=_warnings(analysis.summary.get("warnings", [])),
        summary=sections.summary(vendors, analysis.links, covered),
        coverage=covered,
        methodology=sections.methodology(
            analysis.steps,
            analysis.links,
            analysis.summary.get("blame", {}).get("evidence"),
            analysis.summary.get("blame", {}),
        ),
        bus_bandwidth=sections.bus_bandwidth(analysis.bus_bandwidth, config, readings.link_speed_bytes, plan),
    )


WARNINGS_SHOWN = 20
"""Inputs not used listed in the report; past them one line counts the rest (a job of thousands of ranks
may bring thousands of unusable logs: summary.json lists every one)."""


def _warnings(recorded: list[dict[str, str]]) -> list[InputNote]:
    notes = [InputNote(w["input"], w["problem"]) for w in recorded[:WARNINGS_SHOWN]]
    if len(recorded) > WARNINGS_SHOWN:
        rest = len(recorded) - WARNINGS_SHOWN
        notes.append(
            InputNote(f"{rest} more input(s)", "not listed here: summary.json's warnings list every one")
        )
    return notes


def _notes(readings: Readings, config: Config | None, job_bytes: float | None) -> list[str]:
    notes = [readings.note] if readings.note else []
    if config is not None and config.links and not job_bytes:
        notes.append(
            "the job's bytes per step are unknown (analyze --job-bytes-per-step): no plan is set beside "
            "the run, rather than one for all the traffic the link carried"
        )
    return notes


def _measured_steady(analysis: AnalysisFiles) -> dict[str, float | None]:
    """Measured figures the plan compares with: per link round trip and serialization (means over links,
    when the analysis measured them), and per step the steady and exposed time (means over steps)."""
    links, steps = analysis.links, analysis.steps
    per_step = steps.group_by("step").agg(pl.col("steady_seconds").mean())
    count = steps["step"].n_unique()
    exposed = float(links["exposed_total_seconds"].sum()) / count if count else None
    steady = per_step["steady_seconds"].mean() if per_step["steady_seconds"].null_count() < count else None
    return {
        "round_trip_seconds": _mean(links, "round_trip_seconds"),
        "serialization_seconds": _mean(links, "serialization_seconds"),
        "steady_seconds_per_step": None if steady is None else float(steady),  # type: ignore[arg-type]
        "exposed_seconds_per_step": None
        if exposed is None
        else exposed + (float(steady) if steady is not None else 0.0),  # type: ignore[arg-type]
    }


def _mean(frame: pl.DataFrame, column: str) -> float | None:
    value = frame[column].drop_nulls().mean() if column in frame.columns else None
    return None if value is None else float(value)  # type: ignore[arg-type]


def _existing(path: Path | None) -> Path | None:
    return path if path is not None and path.exists() else None


def _profiles(config: Config | None) -> dict[str, str]:
    """device -> the optics profile of the link it is a member of."""
    links = config.links if config is not None else ()
    return {member.device: link.optics for link in links for member in link.members}


def _sources(analysis: AnalysisFiles, has_config: bool, claims: Claims | None) -> dict[str, str | None]:
    # File names only: the report travels (to a vendor), the analyst's folder layout need not.
    def name(path: Path | None) -> str | None:
        return None if path is None else path.name

    return {
        "analysis": analysis.folder.name,
        "archive": name(analysis.input_path("archive")),
        "config": name(analysis.input_path("config")) if has_config else None,
        "claims": None if claims is None else claims.path.name,
        "logs": _log_names(analysis.summary.get("inputs", {}).get("logs", [])),
    }


LOGS_NAMED = 8
"""Logs named in the report's sources; past them they are counted (a job of thousands of ranks has a log
per rank: summary.json lists every one)."""


def _log_names(logs: list[str]) -> str | None:
    names = [Path(p).name for p in logs[:LOGS_NAMED]]
    if len(logs) > LOGS_NAMED:
        names.append(f"and {len(logs) - LOGS_NAMED} more")
    return ", ".join(names) or None


def _run_measures(measures: pl.DataFrame) -> dict[str, float | None]:
    run = measures.filter(pl.col("scope") == "run")
    return dict(zip(run["measure"].to_list(), run["value"].to_list(), strict=True))


def _start(analysis: AnalysisFiles, readings: Readings) -> Any:
    """Time zero of the charts: the first step, else the first event, else the first reading."""
    for value in (
        analysis.steps["start_time"].min(),
        analysis.events["start_time"].min(),
        readings.counts["first"].min(),
    ):
        if value is not None:
            return value
    return None


def _glance(analysis: AnalysisFiles, config: Config | None, readings: Readings, gpus: int | None) -> Glance:
    steps = analysis.steps
    start, end = steps["start_time"].min(), steps["end_time"].max()
    if start is None:
        start, end = readings.counts["first"].min(), readings.counts["last"].max()
    links = _links(config, readings)
    exposed = float(analysis.links["exposed_total_seconds"].sum())
    # Summed in step order: a group-by's rows come in any order, and a float sum's last digit with them.
    mean_steps = steps.group_by("step").agg(pl.col("duration_seconds").mean()).sort("step")
    per_step = float(mean_steps["duration_seconds"].sum())
    median = steps["duration_seconds"].median()
    gpu_hours = analysis.links["gpu_hours_lost"].sum() if gpus else None
    return Glance(
        start=iso(start),
        end=iso(end),
        duration_seconds=span_seconds(start, end),
        steps=steps["step"].n_unique(),
        ranks=steps["rank"].n_unique(),
        gpus=gpus,
        step_median_seconds=None if median is None else float(median),  # type: ignore[arg-type]
        hurt_steps=steps_hurt(analysis.attribution),
        links=links,
        distance_km=max((link.distance_km for link in links), default=None),
        events=analysis.events.height,
        exposed_total_seconds=exposed,
        exposed_share=exposed / per_step if per_step else None,
        gpu_hours_lost=None if gpu_hours is None else float(gpu_hours),
    )


ROUTE_LONGER_FACTOR = 1.1  # as the boards and SpanwatchRouteLongerThanFibre


def _links(config: Config | None, readings: Readings) -> list[LinkInfo]:
    if config is None:
        return []
    measured = (
        {r["link"]: r for r in readings.links.iter_rows(named=True)} if readings.links is not None else {}
    )
    out = []
    for link in config.links:
        us_per_km = link.fibre_delay_us_per_km or config.defaults.fibre_delay_us_per_km
        rtt = 2 * one_way_delay_s(link.distance_km, us_per_km)
        m = measured.get(link.name, {})
        fastest, cd = m.get("rtt_min"), m.get("cd")
        out.append(
            LinkInfo(
                link.name,
                link.site_a,
                link.site_b,
                link.distance_km,
                len(link.members),
                rtt,
                fastest,
                m.get("rtt_median"),
                None if cd is None else length_from_dispersion_km(cd),
                None if fastest is None else fastest > ROUTE_LONGER_FACTOR * rtt,
            )
        )
    return out


def _seconds_since(column: str, start: Any) -> pl.Expr:
    return ((pl.col(column) - pl.lit(start)).dt.total_nanoseconds() / 1e9).round(3)


def _timeline(analysis: AnalysisFiles, start: Any) -> Timeline:
    if start is None:
        return Timeline(None, [], [], [], [], [])
    per_step = (
        analysis.steps.group_by("step")
        .agg(
            pl.col("start_time").min(),
            pl.col("duration_seconds").mean(),
            pl.col("baseline_seconds").mean(),
        )
        .sort("step")
        .with_columns(t=_seconds_since("start_time", start))
    )
    events = analysis.events.sort("start_time", "event_id").with_columns(
        start_s=_seconds_since("start_time", start), end_s=_seconds_since("end_time", start)
    )
    bands = [
        Band(
            e["link"] or "(no link)",
            CATEGORIES.get(e["kind"], "congestion"),
            e["kind"],
            e["device"],
            e["interface"],
            e["start_s"],
            e["end_s"],
        )
        for e in events.iter_rows(named=True)
    ]
    return Timeline(
        iso(start),
        per_step["step"].to_list(),
        per_step["t"].to_list(),
        per_step["duration_seconds"].to_list(),
        per_step["baseline_seconds"].to_list(),
        bands,
    )


def _link_exposure(analysis: AnalysisFiles) -> list[LinkExposure]:
    ranks = max(analysis.steps["rank"].n_unique(), 1)
    # Mean over ranks, as the per-link totals are: each rank's attributed time counts 1/ranks.
    kinds = analysis.attribution.group_by("link", "kind").agg(
        seconds=pl.col("attributed_seconds").sum() / ranks
    )
    out = []
    for row in analysis.links.sort("exposed_total_seconds", descending=True).iter_rows(named=True):
        mine = kinds.filter(pl.col("link") == row["link"]).sort("seconds", descending=True)
        out.append(
            LinkExposure(
                row["link"],
                row["steps_affected"],
                row["exposed_total_seconds"],
                row["exposed_p50_seconds"],
                row["exposed_p99_seconds"],
                row["share_of_run"],
                row["gpu_hours_lost"],
                dict(zip(mine["kind"].to_list(), mine["seconds"].to_list(), strict=True)),
            )
        )
    return out


def cdf(values: list[float]) -> Cdf:
    """An empirical distribution's quantiles at every percent.

    Args:
        values: the sample.

    Returns:
        ``n`` and 101 quantiles (linear interpolation), or no quantiles for an empty sample.
    """
    if not values:
        return Cdf(0, [])
    return Cdf(len(values), [float(v) for v in np.quantile(np.asarray(values, dtype=float), QUANTILES)])


def _distributions(
    vendor: str, devices: list[str], analysis: AnalysisFiles, readings: Readings
) -> VendorDistributions:
    mine = analysis.attribution.filter(pl.col("device").is_in(devices)).with_columns(vendor=pl.lit(vendor))
    # Every step counts, zero where nothing was attributed to this vendor's devices.
    per_step = exposure_per_step(mine.lazy(), analysis.steps.lazy(), "vendor").collect()
    inflation = per_step["exposed_seconds"].to_list()
    if not inflation and analysis.steps.height:
        inflation = [0.0] * analysis.steps["step"].n_unique()
    marks = readings.watermarks.filter(pl.col("device").is_in(devices))
    # The watermark quantiles come from the same histogram and rule as the claim's measure (one p99).
    watermark = Cdf(int(marks["count"].sum()), quantiles.quantiles(marks, list(QUANTILES)))
    return VendorDistributions(vendor, cdf(inflation), watermark)
