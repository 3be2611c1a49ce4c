"""``spanwatch analyze --engine ray``: the analysis's own stages as Ray tasks, merged by its own code.

What runs where:

- **logs, one task per file** (a rank's step log, NCCL log or Kineto trace): ``analyzer.ingest.parse_file``;
  the driver merges the results in the command line's order with ``inputs.parse_logs``, as the local engine.
- **telemetry, one task per device batch** (``network.batches`` over the same row budget): each task reads
  its devices' rows straight from the archive's files, local paths or ``s3://`` objects through polars'
  own cloud reader (credentials from the worker's ``AWS_*`` environment), and runs
  ``network.analyse_frame``; the driver merges the batches with ``network._combine``, as the local engine.
- **the join** (blame, per step and rank, with the events) runs on the driver: its clock-skew estimate and
  its link figures are taken over every rank at once, so splitting it would change the results.

Ray is an optional extra (``pip install spanwatch[ray]``); without it this engine says so and the local
engine is unaffected. Without ``--ray-address`` a local Ray is started for the run and stopped after it.
"""

from __future__ import annotations

import gc
import resource
import warnings
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from analyzer import inputs, network, schemas, spill, telemetry
from analyzer.analysis import ROWS_READ, Analysis, AnalysisInputs, AnalysisResult, Progress, _quiet
from analyzer.errors import IngestError, InputError
from analyzer.ingest import ParseResult, parse_file
from analyzer.thresholds import Thresholds
from collector import storage
from collector.contracts import archive as layout


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("--engine ray", "Ray is not installed (pip install spanwatch[ray])") from None
    return ray


def start_local(num_cpus: int | None = None) -> None:
    """Start a local Ray for this process (``ray.shutdown()`` stops it and every process it started).

    Raises:
        InputError: Ray is not installed, or its node did not come up (on a machine so loaded that the
            raylet gives up waiting for its agent, Ray says "timed out during startup").
    """
    ray = _ray()
    try:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    except Exception as e:  # Ray raises a bare Exception when its node does not start
        ray.shutdown()
        with warnings.catch_warnings():  # its half-started processes' Popen objects, already killed
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
        raise InputError("--engine ray", f"a local Ray could not start: {e}") from None


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def telemetry_task(
    files: list[str],
    devices: list[str],
    start: datetime | None,
    end: datetime | None,
    thresholds: Thresholds,
    members: pl.DataFrame,
    job_class: str | None,
) -> tuple[network.Batch, int]:
    """One device batch's telemetry pass, read from the archive's files; and this worker's peak RSS."""
    keep = spill.row_filter(start, end, devices, network.NEEDED)
    scan = pl.scan_parquet(files, missing_columns="insert", hive_partitioning=False)
    frame = schemas.conform_lazy(schemas.TELEMETRY, scan).filter(keep)
    return network.analyse_frame(frame, thresholds, members, job_class=job_class), _peak_rss_bytes()


def parse_task(path: Path, log_format: str | None) -> tuple[ParseResult | str, int]:
    """One log file parsed, or why it cannot be (the driver reports it as the local engine does: the
    problem travels as text, the exception class not being picklable)."""
    try:
        return parse_file(path, log_format), _peak_rss_bytes()
    except IngestError as exc:
        return exc.problem, _peak_rss_bytes()


def archive_files(archive: Path | str, start: datetime | None, end: datetime | None) -> list[str]:
    """The archive's data files of ``[start, end)``'s hours: local paths, or ``s3://`` URLs of a bucket."""
    if not storage.is_url(archive):
        return [str(p) for p in spill.files_in_range(Path(archive), start, end)]
    url = str(archive).rstrip("/")
    low = start.strftime("%Y-%m-%dT%H") if start is not None else ""
    high = end.strftime("%Y-%m-%dT%H") if end is not None else "~"
    try:
        keys = sorted(key for key, _ in storage.Bucket(url).objects() if layout.is_data_key(key))
    except Exception as e:  # obstore's errors for an unknown bucket, refused credentials, ...
        raise InputError(url, f"archive bucket unreadable: {type(e).__name__}: {e}") from None
    keys = [k for k in keys if low <= layout.hour_of(Path(k)) <= high]
    if not keys:
        raise InputError(url, "no Parquet files under [shard=I/]date=YYYY-MM-DD/hour=HH/")
    return [f"{url}/{key}" for key in sorted(keys, key=lambda k: (layout.hour_of(Path(k)), k))]


@dataclass
class TaskStats:
    """What the tasks of one run cost: how many, and the highest peak RSS a worker reported."""

    telemetry_tasks: int = 0
    log_tasks: int = 0
    peak_rss_bytes: list[int] = field(default_factory=list)


class RayAnalysis(Analysis):
    """``Analysis`` with its per-file and per-batch stages as Ray tasks (see the module docstring).

    Args:
        inputs: what to read.
    """

    def __init__(self, inputs: AnalysisInputs) -> None:
        super().__init__(inputs)
        self.stats = TaskStats()

    def _parse_logs(self) -> inputs.ParsedLogs:
        ray = _ray()
        i = self.inputs
        task = ray.remote(parse_task)
        # Each result fetched as the merge reaches its file and its reference let go: the driver holds the
        # merged tables and one group of files, as the local engine, not every file's result at once (4,096
        # ranks' logs: 0.6 GB, with their serialized copies mapped from the object store beside them).
        # ``parse_logs`` asks for the files in the order given, so the results are taken in that order.
        pending = [task.remote(path, i.log_format) for path in i.logs]
        pending.reverse()
        self.stats.log_tasks = len(pending)

        def parsed(path: Path, log_format: str | None) -> ParseResult:
            outcome, rss = ray.get(pending.pop())
            self.stats.peak_rss_bytes.append(rss)
            if isinstance(outcome, str):
                raise IngestError(path, outcome)
            return outcome  # type: ignore[no-any-return]

        return inputs.parse_logs(i.logs, i.log_format, parsed, ROWS_READ)

    def _network(self, config: Any, frame: pl.LazyFrame | None, progress: Progress) -> network.NetworkResult:
        i = self.inputs
        if i.archive is None or frame is not None:
            return super()._network(config, frame, progress)
        ray = _ray()
        from analyzer import topology

        members = topology.link_members(config)
        files = archive_files(i.archive, i.start, i.end)
        keep = spill.row_filter(i.start, i.end, i.devices, network.NEEDED)
        scan = schemas.conform_lazy(
            schemas.TELEMETRY, pl.scan_parquet(files, missing_columns="insert", hive_partitioning=False)
        )
        counts = scan.filter(keep).group_by("device").agg(rows=pl.len()).collect(engine="streaming")
        plan = list(network.batches(counts.drop_nulls("device"), i.batch_rows))
        task = ray.remote(telemetry_task)
        shared = ray.put(files), ray.put(members)
        pending = [
            task.remote(shared[0], batch, i.start, i.end, i.thresholds, shared[1], i.job_traffic_class)
            for batch in plan
        ]
        parts = []
        for done in range(1, len(plan) + 1):  # in order, each reference let go once its batch is read
            batch, rss = ray.get(pending.pop(0))
            parts.append(batch)
            self.stats.peak_rss_bytes.append(rss)
            progress("telemetry", done, len(plan))
        self.stats.telemetry_tasks = len(plan)
        result = network._combine(parts, sorted(counts["device"].drop_nulls().to_list()))
        if not storage.is_url(i.archive):
            result.skipped = telemetry.skipped_files(Path(i.archive))
        return result


def analyse(
    analysis_inputs: AnalysisInputs,
    address: str | None = None,
    progress: Progress = _quiet,
    num_cpus: int | None = None,
) -> AnalysisResult:
    """Run one analysis on Ray: join ``address``, or start a local Ray for the run (stopped after it).

    Args:
        analysis_inputs: what to read.
        address: a Ray cluster (``ray://host:10001``, ``auto``), or None for a local one.
        progress: as ``Analysis.run``.
        num_cpus: the local Ray's CPUs (None: this machine's).

    Returns:
        The same result as the local engine.
    """
    ray = _ray()
    started = not ray.is_initialized()
    if started:
        if address is None:
            start_local(num_cpus)
        else:
            ray.init(address=address, log_to_driver=False)
    try:
        return RayAnalysis(analysis_inputs).run(progress)
    finally:
        if started:
            ray.shutdown()
