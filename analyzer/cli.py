"""``spanwatch analyze``: arguments, progress display and output (the computing is ``analyzer.analysis``).

Progress is one log line per stage step. Malformed log lines are reported on stderr
(count and the first few, with file:line) as well as in summary.json. Bad inputs raise ``AnalyzerError`` or
``ConfigError``, which the ``spanwatch`` entry point prints without a traceback (exit 1).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from analyzer import archive_source
from analyzer.analysis import MALFORMED_SHOWN, Analysis, AnalysisInputs, AnalysisResult, Progress
from analyzer.errors import InputError
from analyzer.ingest import FORMATS
from analyzer.ingest._common import parse_wallclock
from analyzer.inputs import describe_all as describe_inputs
from analyzer.report import command as report_command
from analyzer.thresholds import load_thresholds
from collector.durations import parse_duration

log = logging.getLogger("spanwatch.analyze")
ENGINES = ("local", "ray")


def arguments(p: argparse.ArgumentParser) -> None:
    """Declare the ``analyze`` options.

    Args:
        p: the subcommand's parser.
    """
    p.add_argument(
        "--archive",
        type=archive_source.location,
        help="the collector's Parquet archive: a directory or s3://bucket/prefix (AWS_* environment)",
    )
    p.add_argument("--prometheus", metavar="URL", help="read telemetry from a Prometheus server instead")
    p.add_argument("--logs", type=Path, nargs="+", default=[], metavar="FILE", help="training logs, traces")
    p.add_argument("--log-format", choices=sorted(FORMATS), help="force a log format (default: detect)")
    p.add_argument("--config", type=Path, help="the collector config (device labels, link fibre)")
    p.add_argument("--claims", type=Path, help="a vendor claims file: writes report.html/.md/.json")
    p.add_argument(
        "--shift-logs",
        metavar="DURATION",
        help="add this to every log time before correlation, e.g. 600s (a control run with broken timing)",
    )
    p.add_argument(
        "--skew",
        help="the hosts' clock minus the switches', where known, e.g. 50ms or -1.5s (--skew=-1.5s) "
        "(default: read from Prometheus with --prometheus, else estimated from the logs against the telemetry)",
    )
    p.add_argument("--gpus", type=int, help="the job's GPU count, for GPU-hours lost")
    p.add_argument(
        "--job-bytes-per-step",
        type=float,
        metavar="BYTES",
        help="bytes the job sends across the sites per step and direction (the report's plan)",
    )
    p.add_argument(
        "--job-traffic-class",
        metavar="CLASS",
        help="the job's traffic class (queue / PFC priority, e.g. 3): only its queue is blamed "
        "(default: inferred from the bytes per queue on the links, analyzer/job_class.py)",
    )
    p.add_argument(
        "--job-beat",
        nargs="+",
        metavar="EVERY[:AT]",
        help="the job's own beat where known, instead of finding it in the log: a checkpoint or an outer "
        "(DiLoCo) sync every EVERY steps, on the steps numbered AT mod EVERY (default 0), e.g. 100 500:499",
    )
    p.add_argument("--start", help="first time analysed (RFC 3339)")
    p.add_argument("--end", help="end of the time analysed (RFC 3339)")
    p.add_argument("--devices", nargs="+", metavar="NAME", help="only these devices")
    p.add_argument("--thresholds", type=Path, help="a YAML file overriding detection thresholds")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="local",
        help="local: this process; ray: the same stages as Ray tasks (pip install spanwatch[ray])",
    )
    p.add_argument("--ray-address", metavar="ADDRESS", help="a Ray cluster to join (default: start one here)")


def _time(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_wallclock(text)
    except ValueError:
        raise InputError(option, f"not an RFC 3339 time: {text!r}") from None


def option_seconds(text: str | None, option: str, signed: bool = False) -> float | None:
    """A duration option (``2s``, ``500ms``; ``-1.5s`` where ``signed``) in seconds, None when not given;
    InputError names the option."""
    if text is None:
        return None
    negative = signed and text.strip().startswith("-")
    try:
        seconds = parse_duration(text.strip().removeprefix("-") if negative else text)
    except ValueError as exc:
        raise InputError(option, str(exc)) from None
    return -seconds if negative else seconds


def job_beat(texts: list[str] | None) -> tuple[tuple[int, int], ...] | None:
    """``--job-beat``'s periods as (every, at), None when not given; InputError names a bad one."""
    if texts is None:
        return None
    periods = []
    for text in texts:
        every, _, at = text.partition(":")
        try:
            period = int(every), int(at or 0)
        except ValueError:
            raise InputError("--job-beat", f"not EVERY or EVERY:AT (whole steps): {text!r}") from None
        if period[0] < 2 or not 0 <= period[1] < period[0]:
            raise InputError("--job-beat", f"EVERY must be at least 2 and AT in 0..EVERY-1: {text!r}")
        periods.append(period)
    return tuple(periods)


def inputs_from(args: argparse.Namespace) -> AnalysisInputs:
    """Check the options and turn them into analysis inputs.

    Args:
        args: the parsed command line.

    Returns:
        The inputs.

    Raises:
        InputError: an option is invalid or a named file does not exist.
    """
    if args.archive is None and args.prometheus is None and not args.logs:
        raise InputError("analyze", "nothing to analyse: give --archive, --prometheus or --logs")
    for option in ("archive", "config", "claims", "thresholds"):
        path = getattr(args, option)
        if isinstance(path, Path) and not path.exists():
            raise InputError(path, f"--{option}: not found")
    for path in args.logs:
        if not path.is_file():
            raise InputError(path, "--logs: file not found")
    skew = option_seconds(args.skew, "--skew", signed=True)
    shift = option_seconds(args.shift_logs, "--shift-logs")
    if args.gpus is not None and args.gpus <= 0:
        raise InputError("--gpus", "must be a positive number")
    if args.job_bytes_per_step is not None and not args.job_bytes_per_step > 0:
        raise InputError("--job-bytes-per-step", "must be a positive number of bytes")
    return AnalysisInputs(
        archive=args.archive,
        prometheus=args.prometheus,
        start=_time(args.start, "--start"),
        end=_time(args.end, "--end"),
        devices=args.devices,
        logs=tuple(args.logs),
        log_format=args.log_format,
        config=args.config,
        claims=args.claims,
        shift_logs_seconds=shift or 0.0,
        skew_seconds=skew,
        gpus=args.gpus,
        job_bytes_per_step=args.job_bytes_per_step,
        job_traffic_class=args.job_traffic_class,
        job_beat=job_beat(args.job_beat),
        thresholds=load_thresholds(args.thresholds),
    )


@contextmanager
def _progress() -> Iterator[Progress]:
    def line(stage: str, done: int, total: int) -> None:
        log.info("%s %d/%d", stage, done, total)

    yield line


def report(result: AnalysisResult, written: list[Path]) -> None:
    """Print unusable inputs and malformed lines (stderr), what each input gave and where the outputs are (stdout).

    Args:
        result: the analysis.
        written: the files written.
    """
    for warning in result.summary.get("warnings", []):
        print(f"spanwatch analyze: warning: {warning['input']}: {warning['problem']}", file=sys.stderr)
    malformed = result.summary["malformed_lines"]
    if malformed["count"]:
        print(f"spanwatch analyze: {malformed['count']} malformed log line(s); first:", file=sys.stderr)
        for problem in malformed["first"][:MALFORMED_SHOWN]:
            print(f"  {problem}", file=sys.stderr)
    job = result.summary.get("job_traffic_class")
    if job is not None and job["value"] is not None:
        print(f"job traffic class {job['value']} ({job['source']}: {job['basis']})")
    for line in describe_inputs(result.summary["inputs"].get("files", [])):
        print(f"input {line}")
    print(
        f"{result.events.height} events, {result.steps.height} step rows, "
        f"{int(result.steps['inflated'].sum())} inflated; wrote {written[-1].parent}"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``spanwatch analyze``.

    Args:
        args: the parsed command line.

    Returns:
        The exit status (0).

    Raises:
        AnalyzerError: an input is unusable.
        ConfigError: the collector config is invalid.
    """
    inputs = inputs_from(args)
    if inputs.claims is not None:
        report_command.check_claims(inputs.claims, inputs.config)
    with _progress() as progress:
        if getattr(args, "engine", "local") == "ray":
            from analyzer import distributed

            result = distributed.analyse(inputs, args.ray_address, progress)
        else:
            result = Analysis(inputs).run(progress)
    report(result, result.write(args.out))
    if inputs.claims is not None:
        print(f"report: {report_command.write_report(args.out, inputs.config, inputs.claims)[0]}")
    return 0
