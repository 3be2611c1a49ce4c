"""The analysis facade: inputs in, every table and the summary out; rendering is someone else's job.

``Analysis(inputs).run()`` chains the pure stages: parse logs (``analyzer.ingest``) -> telemetry pass
(``analyzer.network``: signals, events, totals) -> correlation (``analyzer.correlate``) -> measures
(``analyzer.measures``), and returns an
``AnalysisResult`` whose ``write`` puts ``steps.parquet``, ``events.parquet``, ``attribution.parquet``,
``links.parquet``, ``measures.parquet``, ``bus_bandwidth.parquet`` (nccl-tests results) and ``summary.json``
in a folder; ``summary.json``'s ``warnings`` name every input that could not be used, and why. Logs alone still give the step
analysis; telemetry alone still gives the events and measures. Scoring against a simulated fabric's truth is
not the analyzer's business (``spanwatch.score`` reads these files).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from analyzer import (
    archive_source,
    bandwidth,
    blame,
    correlate,
    foreign,
    gpu_time,
    inputs,
    job_class,
    measures,
    network,
    prometheus,
    schemas,
    topology,
)
from analyzer.claims import validate_claims
from analyzer.errors import InputError
from analyzer.ingest import ParseResult, nccl_inspector
from analyzer.inputs import InputWarning
from analyzer.thresholds import Thresholds
from collector.config import Config

Progress = Callable[[str, int, int], None]
MALFORMED_SHOWN = 10
FILES = ("steps", "events", "attribution", "links", "measures", "bus_bandwidth")
# The parsed rows some stage reads: the steps, the profiler's per-step split, the benchmarks' and the
# Inspector's operations and NCCL's rank lists. The rest (a profiler trace's or TraceLens' kernels, NCCL's
# connections) are counted in ``summary.json``'s ``inputs.files`` and let go, so that thousands of traces
# cost the analysis their steps, not their kernels.
ROWS_READ = {
    "steps": pl.lit(True),
    "kineto_steps": pl.lit(True),
    "nccl_ranks": pl.lit(True),
    "collectives": pl.col("format").is_in([*bandwidth.BENCHMARKS, nccl_inspector.NAME]),
}


def _quiet(stage: str, done: int, total: int) -> None:
    """The default progress callback: nothing."""


@dataclass(frozen=True)
class AnalysisInputs:
    """Everything an analysis reads; every input is optional, but there must be logs or telemetry.

    Attributes:
        archive: the Parquet archive: a directory, or an ``s3://bucket/prefix`` URL.
        prometheus: a Prometheus base URL (used instead of the archive; needs ``start`` and ``end``).
        start: first time analysed (aware), or None.
        end: first time not analysed, or None.
        devices: devices to analyse, or None for all.
        logs: training logs (any registered format).
        log_format: force one format for every log, or None to detect.
        config: the collector's config (device labels, links' fibre), or None.
        claims: a vendor claims file, validated only.
        shift_logs_seconds: added to every parsed log time before correlation (the scorer's control run
            breaks the timing link between logs and telemetry with it).
        skew_seconds: the hosts' clock minus the switches', where known; None: read from Prometheus when
            given, else estimated by the blame (``analyzer.attribution.skew``).
        gpus: the job's GPU count, for GPU-hours lost.
        job_bytes_per_step: the bytes the job sends across the sites per step and direction, for the
            report's plan and the steady figures (never inferred from all the link carried).
        job_traffic_class: the job's traffic class (queue and PFC priority): only its queue is blamed;
            other classes are background.
        job_beat: the job's own periods (every, at: checkpoints, an outer sync) where the user knows them;
            None: found from its log (``analyzer.attribution.beat``).
        thresholds: detection levels.
        batch_rows: archive readings per batch (the memory budget).
    """

    archive: Path | str | None = None
    prometheus: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    devices: list[str] | None = None
    logs: tuple[Path, ...] = ()
    log_format: str | None = None
    config: Path | None = None
    claims: Path | None = None
    shift_logs_seconds: float = 0.0
    skew_seconds: float | None = None
    gpus: int | None = None
    job_bytes_per_step: float | None = None
    job_traffic_class: str | None = None
    job_beat: tuple[tuple[int, int], ...] | None = None
    thresholds: Thresholds = field(default_factory=lambda: Thresholds())
    batch_rows: int = network.DEFAULT_BATCH_ROWS


@dataclass
class AnalysisResult:
    """The computed data of one analysis (no rendering).

    Attributes:
        steps: ``schemas.STEP_ANALYSIS``.
        events: ``schemas.EVENTS``.
        attribution: ``schemas.ATTRIBUTION``.
        links: ``schemas.LINK_EXPOSURE``.
        measures: ``schemas.MEASURES``.
        summary: the JSON-ready summary.
        bus_bandwidth: ``schemas.BUS_BANDWIDTH`` (nccl-tests results).
    """

    steps: pl.DataFrame
    events: pl.DataFrame
    attribution: pl.DataFrame
    links: pl.DataFrame
    measures: pl.DataFrame
    summary: dict[str, Any]
    bus_bandwidth: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=schemas.BUS_BANDWIDTH))

    def write(self, out: Path) -> list[Path]:
        """Write every table as Parquet and the summary as JSON into ``out`` (created if missing).

        Args:
            out: the output folder.

        Returns:
            The files written.
        """
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name in FILES:
            path = out / f"{name}.parquet"
            getattr(self, name).write_parquet(path)
            written.append(path)
        summary = out / "summary.json"
        recorded = {**self.summary, "inputs": relative_inputs(self.summary.get("inputs", {}), out)}
        # Written piece by piece: at thousands of ranks the text is megabytes (4,096 files: 15 MB at once).
        with summary.open("w") as stream:
            json.dump(recorded, stream, indent=2, default=str)
            stream.write("\n")
        return [*written, summary]


INPUT_PATHS = ("archive", "config", "claims")  # summary.json's inputs that name one file or folder


def relative_inputs(recorded: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``summary.json``'s inputs with every path relative to the analysis folder, so that ``spanwatch report``
    finds them from any working directory, and in a copy of a folder that holds its inputs.

    Args:
        recorded: the summary's ``inputs`` (paths as given on the command line).
        folder: the analysis folder the summary is written into.

    Returns:
        A copy with ``archive``, ``config``, ``claims`` and each ``logs`` entry relative to ``folder``.
    """
    base = folder.absolute()

    def relative(path: str | None) -> str | None:
        return None if path is None else os.path.relpath(Path(path).absolute(), base)

    out = {key: relative(value) if key in INPUT_PATHS else value for key, value in recorded.items()}
    if "logs" in recorded:
        out["logs"] = [relative(p) for p in recorded["logs"]]
    return out


class Analysis:
    """Run one analysis.

    Args:
        inputs: what to read.
    """

    def __init__(self, inputs: AnalysisInputs) -> None:
        self.inputs = inputs

    def run(self, progress: Progress = _quiet) -> AnalysisResult:
        """Compute everything.

        Args:
            progress: called with ``(stage, done, total)`` as stages advance.

        Returns:
            The result.

        Raises:
            AnalyzerError: an input is unusable (message names it).
            ConfigError: the collector config is invalid.
        """
        claims = validate_claims(self.inputs.claims) if self.inputs.claims is not None else None
        config = topology.load_config(self.inputs.config) if self.inputs.config is not None else None
        frame = self._prometheus_frame(progress)
        job = self._job_class(config, frame)
        # Every stage below blames the class given or inferred.
        self.inputs = i = replace(self.inputs, job_traffic_class=job.value)
        # The telemetry pass first: the parsed logs (millions of step rows at thousands of ranks) are then
        # not held through it.
        net = self._network(config, frame, progress)
        net.events = topology.place_unlinked(net.events, topology.link_members(config))
        progress("logs", 0, 1)
        logs = self._parse_logs()
        inputs.require_something(logs, i.archive is not None or i.prometheus is not None)
        parsed = logs.result
        if i.shift_logs_seconds:  # the unshifted tables are not read again: not kept beside them
            logs.result = parsed = shift_times(parsed, i.shift_logs_seconds)
        progress("logs", 1, 1)
        net.events = foreign.with_foreign(
            net.events, net.physics, parsed.table("steps"), i.job_bytes_per_step, i.job_traffic_class
        )
        skew = self._skew()
        progress("correlate", 0, 1)
        steps, attribution, links, inspector, blamed = self._correlate(parsed, net, skew, config)
        progress("correlate", 1, 1)
        labels = topology.device_labels(config)
        table = self._measures(net, steps, attribution, labels, config)
        warnings = [*logs.warnings, *_telemetry_warnings(i, net, config), *_overlap_warnings(steps, net)]
        if job.value is None and (i.archive is not None or i.prometheus is not None):
            warnings.append(InputWarning("--job-traffic-class", f"no queue is blamed: {job.basis}"))
        summary = _summary(i, parsed, net, steps, links, table, skew, claims, inspector, attribution)
        summary["job_traffic_class"] = job.as_json()
        summary["blame"] = blamed.summary
        summary["skew_seconds"] = blamed.summary["skew_seconds"]
        summary["inputs"]["files"] = logs.files
        summary["warnings"] = inputs.as_json(warnings)
        busbw = bandwidth.bus_bandwidth(parsed.table("collectives"), parsed.table("nccl_ranks"))
        return AnalysisResult(steps, net.events, attribution, links, table, summary, busbw)

    def _prometheus_frame(self, progress: Progress) -> pl.LazyFrame | None:
        """The telemetry read from Prometheus (``--prometheus``), or None for an archive or no telemetry."""
        i = self.inputs
        if i.prometheus is None:
            return None
        if i.start is None or i.end is None:
            raise InputError("--prometheus", "a Prometheus source needs --start and --end")
        progress("telemetry", 0, 1)
        return prometheus.read_prometheus(i.prometheus, i.start, i.end, network.NEEDED, i.devices)

    def _job_class(self, config: Config | None, frame: pl.LazyFrame | None) -> job_class.JobClass:
        """The class given, else the one the queues show (``analyzer.job_class``), from either source."""
        i = self.inputs
        if i.job_traffic_class is not None:
            return job_class.given(i.job_traffic_class)
        members = topology.link_members(config)
        if frame is not None:
            return job_class.infer(job_class.bytes_per_queue(frame, members))
        if i.archive is None:
            return job_class.JobClass(None, "unknown", "no telemetry: pass --job-traffic-class")
        with archive_source.local_folder(i.archive, i.start, i.end) as root:
            return job_class.infer(job_class.bytes_per_queue(job_class.archive_readings(root), members))

    def _parse_logs(self) -> inputs.ParsedLogs:
        """Every log parsed on its own and merged (the Ray engine parses them in tasks)."""
        return inputs.parse_logs(self.inputs.logs, self.inputs.log_format, rows_read=ROWS_READ)

    def _archive_pass(self, root: Path, members: pl.DataFrame, progress: Progress) -> network.NetworkResult:
        """The telemetry pass over a local archive folder, batch by batch (the Ray engine runs it in tasks)."""
        i = self.inputs
        return network.analyse_archive(
            root,
            i.thresholds,
            members,
            i.start,
            i.end,
            i.devices,
            i.batch_rows,
            lambda done, total: progress("telemetry", done, total),
            i.job_traffic_class,
        )

    def _network(
        self, config: Config | None, frame: pl.LazyFrame | None, progress: Progress
    ) -> network.NetworkResult:
        i = self.inputs
        members = topology.link_members(config)
        if frame is not None:
            result = network.analyse_telemetry(frame, i.thresholds, members, i.job_traffic_class)
            progress("telemetry", 1, 1)
            return result
        if i.archive is None:
            return network.empty_result()
        # A bucket is copied (the hours asked for) into TMPDIR first, as the spill copies a local archive.
        with archive_source.local_folder(i.archive, i.start, i.end) as root:
            return self._archive_pass(root, members, progress)

    def _skew(self) -> float:
        i = self.inputs
        if i.skew_seconds is not None:
            return i.skew_seconds
        if i.prometheus is not None and i.start is not None and i.end is not None:
            return prometheus.clock_skew(i.prometheus, i.start, i.end)
        return 0.0

    def _correlate(
        self, parsed: ParseResult, net: network.NetworkResult, skew: float, config: Config | None
    ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame, blame.Blame]:
        """Steps, attribution and links (``analyzer.blame``); and the Inspector's operations placed on steps."""
        i = self.inputs
        kineto = parsed.table("kineto_steps")
        inspector = parsed.table("collectives").filter(pl.col("format") == nccl_inspector.NAME)
        per_step = None
        if inspector.height:  # placing nothing would still sort every step
            placed = correlate.prepare_steps(parsed.table("steps"))
            inspector = gpu_time.inspector_records(inspector.lazy(), placed).collect()
            per_step = gpu_time.inspector_step_communication(inspector.lazy()).collect()
            del placed
        evidence = _communication(kineto, per_step)
        job = blame.JobFigures(i.job_bytes_per_step, i.job_traffic_class)
        given = None if i.skew_seconds is None and i.prometheus is None else skew
        # The parsed steps are handed over, not kept: the blame drops them once it has read its lines
        # (millions of rows at thousands of ranks), and nothing after it reads them.
        blamed = blame.attribute(
            parsed.tables.pop("steps", schemas.empty("steps")),
            net.physics,
            net.ends,
            net.round_trips,
            topology.link_members(config),
            job,
            given,
            evidence,
            i.job_beat,
        )
        table = blamed.steps
        if kineto.height:
            exposed = kineto.group_by("step", "rank").agg(
                pl.col("communication_seconds").sum(), pl.col("exposed_communication_seconds").sum()
            )
            table = table.drop("communication_seconds", "exposed_communication_seconds").join(
                exposed, on=["step", "rank"], how="left"
            )
        if per_step is not None and per_step.height:
            table = table.drop("inspector_communication_seconds", "inspector_collectives").join(
                per_step, on=["step", "rank"], how="left"
            )
        table = schemas.conform_lazy(schemas.STEP_ANALYSIS, table.lazy()).collect()
        links = correlate.link_exposure(blamed.attribution.lazy(), table.lazy(), i.gpus).collect()
        links = _with_steady(links, blamed.steady)
        return table, blamed.attribution, links, inspector, blamed

    def _measures(
        self,
        net: network.NetworkResult,
        steps: pl.DataFrame,
        attribution: pl.DataFrame,
        labels: pl.DataFrame,
        config: Config | None,
    ) -> pl.DataFrame:
        def tag(frame: pl.DataFrame) -> pl.DataFrame:
            joined = frame.join(labels, on="device", how="left") if labels.width > 1 else frame
            return joined.with_columns(run=pl.lit("all"))

        inputs = measures.MeasureInputs(
            totals=tag(net.totals),
            samples=tag(net.samples),
            events=tag(net.events),
            attribution=tag(attribution),
            steps=steps,
            gpus=self.inputs.gpus,
            job_class=self.inputs.job_traffic_class,
            link_devices=topology.link_members(config),
        )
        return measures.compute_all(inputs, [c for c in labels.columns if c != "device"])


def _telemetry_warnings(
    i: AnalysisInputs, net: network.NetworkResult, config: Config | None
) -> list[InputWarning]:
    """The telemetry inputs that gave nothing, or less than all: no readings, skipped files, silent links."""
    source = i.archive if i.archive is not None else i.prometheus
    if source is None:
        return []
    out = [InputWarning(str(path), f"archive file not read: {why}") for path, why in net.skipped]
    if net.rows == 0:
        out.append(InputWarning(str(source), "no telemetry readings in the analysed range and devices"))
        return out
    seen = set(net.devices)
    for link in config.links if config is not None else ():
        silent = sorted({m.device for m in link.members} - seen)
        if silent:
            out.append(
                InputWarning(f"link {link.name}", f"no telemetry from member device(s) {', '.join(silent)}")
            )
    return out


def _overlap_warnings(steps: pl.DataFrame, net: network.NetworkResult) -> list[InputWarning]:
    """A warning when the steps and the telemetry never overlap in time: every step would read 0 s exposed
    for want of readings, not because the network was clean."""
    if steps.height == 0 or net.totals.height == 0:
        return []
    first, last = net.totals["first"].min(), net.totals["last"].max()
    start, end = steps["start_time"].min(), steps["end_time"].max()
    if first is None or last is None or start is None or end is None:
        return []
    if start <= last and first <= end:  # type: ignore[operator]
        return []
    return [
        InputWarning(
            "logs and telemetry",
            f"they do not overlap in time: the steps run {_iso(start)} to {_iso(end)}, the telemetry "
            f"{_iso(first)} to {_iso(last)}; "
            "no step can be blamed on the network (wrong archive or logs, a clock off, or --shift-logs)",
        )
    ]


def _iso(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _communication(kineto: pl.DataFrame, inspector: pl.DataFrame | None) -> pl.DataFrame | None:
    """Per (step, rank) the strongest communication evidence: Kineto's exposed communication, else the
    NCCL Inspector's summed collective time (a step log's own comes after both: ``blame.attribute``)."""
    parts = []
    if kineto.height:
        parts.append(
            kineto.group_by("step", "rank").agg(communication=pl.col("exposed_communication_seconds").sum())
        )
    if inspector is not None and inspector.height:
        parts.append(inspector.select("step", "rank", communication="inspector_communication_seconds"))
    if not parts:
        return None
    return pl.concat(parts).unique(["step", "rank"], keep="first", maintain_order=True)


def _with_steady(links: pl.DataFrame, steady: pl.DataFrame) -> pl.DataFrame:
    """The exposure per link with the steady figures beside it; every link with steady figures has a row."""
    figures = steady.select("link", "round_trip_seconds", "serialization_seconds")
    missing = figures.join(links.select("link"), on="link", how="anti").select("link")
    zeros = missing.with_columns(
        steps_affected=pl.lit(0, pl.Int64),
        exposed_total_seconds=pl.lit(0.0),
        exposed_p50_seconds=pl.lit(0.0),
        exposed_p99_seconds=pl.lit(0.0),
        share_of_run=pl.lit(0.0),
    )
    merged = pl.concat(
        [links.drop("round_trip_seconds", "serialization_seconds"), zeros], how="diagonal_relaxed"
    )
    table = merged.join(figures, on="link", how="left").sort("link")
    return schemas.conform_lazy(schemas.LINK_EXPOSURE, table.lazy()).collect()


def shift_times(parsed: ParseResult, seconds: float) -> ParseResult:
    """The parsed logs with every time moved by ``seconds`` (every datetime column of every table).

    Args:
        parsed: what the log parsers produced.
        seconds: the offset (positive: later).

    Returns:
        A new result; ``parsed`` is not changed.
    """
    offset = timedelta(seconds=seconds)
    tables = {name: frame.with_columns(pl.col(pl.Datetime) + offset) for name, frame in parsed.tables.items()}
    return replace(parsed, tables=tables)


def _malformed(parsed: ParseResult) -> dict[str, Any]:
    return {"count": len(parsed.problems), "first": [str(p) for p in parsed.problems[:MALFORMED_SHOWN]]}


def _nested(table: pl.DataFrame) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for scope, key, measure, value in table.select("scope", "key", "measure", "value").iter_rows():
        out.setdefault(scope, {}).setdefault(str(key), {})[measure] = value
    return out


def _summary(
    i: AnalysisInputs,
    parsed: ParseResult,
    net: network.NetworkResult,
    steps: pl.DataFrame,
    links: pl.DataFrame,
    table: pl.DataFrame,
    skew: float,
    claims: int | None,
    inspector: pl.DataFrame,
    attribution: pl.DataFrame,
) -> dict[str, Any]:
    by_kind = net.events.group_by("kind").agg(pl.len()).sort("kind")
    baselines = steps.group_by("rank").agg(pl.col("baseline_seconds").first()).sort("rank")
    return {
        "inputs": {
            "archive": None if i.archive is None else str(i.archive),
            "prometheus": i.prometheus,
            "logs": [str(p) for p in i.logs],
            "log_formats": sorted(set(parsed.formats)),
            "config": None if i.config is None else str(i.config),
            "claims": None if i.claims is None else str(i.claims),
            "claims_count": claims,
            "shift_logs_seconds": i.shift_logs_seconds,
        },
        "skew_seconds": skew,
        "gpus": i.gpus,
        "job_bytes_per_step": i.job_bytes_per_step,
        "thresholds": i.thresholds.model_dump(),
        "telemetry": {
            "rows": net.rows,
            "devices": net.devices,
            "skipped_files": {
                "count": len(net.skipped),
                "first": [f"{path}: {why}" for path, why in net.skipped[:MALFORMED_SHOWN]],
            },
        },
        "events": {"count": net.events.height, "by_kind": dict(by_kind.iter_rows())},
        "steps": {
            "rows": steps.height,
            "ranks": steps["rank"].n_unique(),
            "inflated": int(steps["inflated"].sum()),
            "hurt": measures.steps_hurt(attribution),
            "with_events": int((steps["events"] > 0).sum()),
            "baseline_seconds": dict(baselines.iter_rows()),
        },
        "links": links.to_dicts(),
        "measures": _nested(table),
        "malformed_lines": _malformed(parsed),
        "crosscheck": _crosscheck(steps),
        "inspector_crosscheck": _inspector_crosscheck(steps, inspector, parsed.counts),
    }


def _crosscheck(steps: pl.DataFrame) -> dict[str, Any] | None:
    """Inflation vs Kineto's exposed communication beyond its clean-step median, where traces cover steps."""
    both = steps.filter(pl.col("exposed_communication_seconds").is_not_null())
    if both.height == 0:
        return None
    clean = both.filter(pl.col("events") == 0)["exposed_communication_seconds"].median()
    base = float(clean) if clean is not None else float(both["exposed_communication_seconds"].min())  # type: ignore[arg-type]
    excess = (both["exposed_communication_seconds"] - base).clip(lower_bound=0.0)
    difference = (excess - both["inflation_seconds"]).abs()
    return {
        "steps": both.height,
        "exposed_communication_median_seconds": base,
        "mean_abs_difference_seconds": float(difference.mean()),  # type: ignore[arg-type]
    }


def _inspector_crosscheck(
    steps: pl.DataFrame, records: pl.DataFrame, counts: dict[str, int]
) -> dict[str, Any] | None:
    """What the NCCL Inspector covered, and its communication time per (step, rank) against Kineto's.

    Both sides measure NCCL kernel time, so where a Kineto trace and Inspector output cover the same step
    and rank they should agree; the relative difference is ``|inspector - kineto| / kineto``. The Inspector
    sums operations where Kineto takes the union, and it may miss operations (``missing_sequence_numbers``
    between those it wrote, ``dropped_by_inspector`` as its ring-overflow counts say), so a difference is
    expected when communicators overlap or records were lost.
    """
    if records.height == 0:
        return None
    # Collectives and P2P operations are numbered apart (coll_sn, p2p_sn) on each communicator of a process.
    p2p = pl.col("collective").is_in(["Send", "Recv"]).alias("p2p")
    per_comm = records.group_by("host", "pid", "source_file", "process_group", p2p).agg(
        missing=pl.col("sequence").max()
        - pl.col("sequence").min()
        + 1
        - pl.col("sequence").drop_nulls().n_unique()
    )
    covered = steps.filter(pl.col("inspector_communication_seconds").is_not_null())
    both = covered.filter(pl.col("communication_seconds") > 0)
    kineto = pl.col("communication_seconds")
    difference = both.select((pl.col("inspector_communication_seconds") - kineto).abs() / kineto).to_series()
    return {
        "records": records.height,
        "assigned_to_steps": int(records["step"].is_not_null().sum()),
        "timed_by": {str(k): v for k, v in records.group_by("timed_by").len().sort("timed_by").iter_rows()},
        "timing_sources": {
            str(k): v for k, v in records.group_by("timing_source").len().sort("timing_source").iter_rows()
        },
        "missing_sequence_numbers": int(per_comm["missing"].sum()),
        "dropped_by_inspector": counts.get("inspector_dropped", 0),
        "steps": covered.height,
        "communication_median_seconds": covered["inspector_communication_seconds"].median(),
        "kineto_steps": both.height,
        "kineto_relative_difference_median": difference.median() if both.height else None,
        "kineto_relative_difference_max": difference.max() if both.height else None,
    }
