"""``spanwatch follow``: what the network costs a training run now, per link, on its own ``/metrics``.

Every ``--interval`` it reads the lines appended to the training logs (``analyzer.ingest.tail``) and the
archive files the collector flushed (``analyzer.archive_tail``), keeps both over a sliding window
(``analyzer.live``) and runs the analyzer's blame on the window; the figures of the recent steps go to
``/metrics`` (``spanwatch_training_*``, ``collector.exporters.http.Exporter``).

Telemetry comes from the archive rather than the collector's ``/metrics``: the archive holds every reading
at full resolution with its device time, flushed every second by default, which is what the blame's
physics reads (counter increases between readings, PFC pause time, waves down); a scrape holds only the
latest value, so following it would mean re-implementing the collector's counter handling and losing
readings between scrapes. A reading reaches follow one poll plus one flush after it happened (about 2 s
with the shipped settings), well inside the 15 s an episode should take to show.

Bad log lines are counted (``spanwatch_training_malformed_lines_total``) and logged with their file and
line number, never fatal; a log that is missing waits for its file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from analyzer import archive_source, blame, live, topology
from analyzer.archive_tail import ArchiveTail
from analyzer.cli import option_seconds
from analyzer.errors import IngestError, InputError
from analyzer.ingest.tail import TAILABLE, LogTail
from analyzer.thresholds import Thresholds, load_thresholds
from collector.exporters.http import Exporter
from collector.lifecycle import Signals
from collector.lograte import RateLimitedLog
from collector.store import FullLabels, Store

log = logging.getLogger("spanwatch.follow")
_limited = RateLimitedLog(log)
DEFAULT_LISTEN = "127.0.0.1:9465"  # beside the collector's 9464


def arguments(p: argparse.ArgumentParser) -> None:
    """``spanwatch follow`` options."""
    p.add_argument(
        "--logs", type=Path, nargs="+", required=True, metavar="FILE", help="training logs to tail"
    )
    p.add_argument("--log-format", choices=TAILABLE, help="force a log format (default: detect)")
    p.add_argument(
        "--archive",
        type=archive_source.location,
        required=True,
        help="the collector's Parquet archive: a directory or s3://bucket/prefix (AWS_* environment)",
    )
    p.add_argument("--config", type=Path, required=True, help="the collector config (links and their fibre)")
    p.add_argument("--listen", default=DEFAULT_LISTEN, help=f"/metrics address (default {DEFAULT_LISTEN})")
    p.add_argument("--web-config", type=Path, help="an exporter-toolkit web.yml (TLS, basic auth)")
    p.add_argument("--window", default="60s", help="steps and telemetry analysed together (default 60s)")
    p.add_argument("--recent", default="5s", help="figures are over the steps that ended this recently (5s)")
    p.add_argument("--interval", default="1s", help="how often the window is analysed (default 1s)")
    p.add_argument(
        "--skew", help="known host-minus-switch clock skew, e.g. 2s or --skew=-1.5s (default: estimated)"
    )
    p.add_argument(
        "--job-traffic-class", metavar="CLASS", help="the job's traffic class: only its queue is blamed"
    )
    p.add_argument(
        "--job-bytes-per-step", type=float, metavar="BYTES", help="the job's bytes per step and direction"
    )
    p.add_argument("--thresholds", type=Path, help="a YAML file overriding detection thresholds")
    p.add_argument("--duration", default=None, help="stop after this long (default: until SIGINT/SIGTERM)")


def run(args: argparse.Namespace) -> int:
    """Follow until stopped (or ``--duration``); exit status 0."""
    settings = live.Settings(
        window_seconds=option_seconds(args.window, "--window") or 60.0,
        recent_seconds=option_seconds(args.recent, "--recent") or 5.0,
        skew_seconds=option_seconds(args.skew, "--skew", signed=True),
    )
    if settings.recent_seconds > settings.window_seconds:
        raise InputError("--recent", "must not be longer than --window")
    members = topology.link_members(topology.load_config(args.config))
    job = blame.JobFigures(args.job_bytes_per_step, args.job_traffic_class)
    follower = Follower(
        args.logs, args.log_format, args.archive, members, job, settings, load_thresholds(args.thresholds)
    )
    interval = option_seconds(args.interval, "--interval") or 1.0
    return asyncio.run(
        follower.serve(args.listen, args.web_config, interval, option_seconds(args.duration, "--duration"))
    )


class Follower:
    """The tails, the window and the store they feed (one tick at a time: ``tick``)."""

    def __init__(
        self,
        logs: list[Path],
        log_format: str | None,
        archive: Path | str,
        members: pl.DataFrame,
        job: blame.JobFigures,
        settings: live.Settings,
        thresholds: Thresholds,
    ) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="spanwatch-follow-")
        self.tails = [LogTail(path, log_format, Path(self._scratch.name)) for path in logs]
        self.archive = ArchiveTail(archive)
        self.window = live.Window(settings)
        self.members, self.job, self.thresholds = members, job, thresholds
        self.store = Store()
        self.steps_read = 0
        self.malformed = 0
        self._events: set[FullLabels] = set()
        # Every link reads 0 from the first scrape on, not only once the first steps are in.
        zeros = dict.fromkeys(sorted(set(members["link"])), 0.0)
        self.figures = live.Figures(network_seconds=zeros, network_peak_seconds=dict(zeros))
        self._publish(self.figures, 0.0)

    def tick(self) -> live.Figures:
        """Read what is new, analyse the window, update the store (nothing new: the figures stand)."""
        new = 0
        for tail in list(self.tails):
            try:
                chunk = tail.read()
            except IngestError as exc:
                log.error("not following %s", exc)
                self.tails.remove(tail)
                continue
            self.steps_read += chunk.steps.height
            self.malformed += len(chunk.problems)
            for problem in chunk.problems:  # each at debug; one a minute per file at warning
                log.debug("malformed log line %s", problem)
                _limited.log(logging.WARNING, ("malformed", tail.path), "malformed log line %s", problem)
            self.window.add_steps(chunk.steps)
            new += chunk.steps.height
        # Before the first step or reading, the archive is read from one window before the wall clock.
        since = self.window.cutoff() or datetime.now(UTC) - timedelta(
            seconds=self.window.settings.window_seconds
        )
        readings = self.archive.read(since)
        self.window.add_readings(readings)
        if not new and not readings.height:  # an idle tick costs no analysis
            return self.figures
        start = time.perf_counter()
        self.figures = live.compute(self.window, self.members, self.job, self.thresholds)
        self._publish(self.figures, time.perf_counter() - start)
        return self.figures

    def _publish(self, f: live.Figures, took: float) -> None:
        s = self.store
        for name, value in (
            ("spanwatch_training_step_seconds", f.step_seconds),
            ("spanwatch_training_step_baseline_seconds", f.baseline_seconds),
            ("spanwatch_training_communication_seconds", f.communication_seconds),
            ("spanwatch_training_unexplained_seconds", f.unexplained_seconds),
            ("spanwatch_training_last_step_timestamp_seconds", f.newest.timestamp() if f.newest else None),
        ):
            if value is not None:
                s.set(name, (), float(value))
        s.set("spanwatch_training_window_steps", (), f.steps)
        s.set("spanwatch_training_clock_skew_seconds", (), f.skew_seconds)
        s.set("spanwatch_training_steps_total", (), self.steps_read)
        s.set("spanwatch_training_malformed_lines_total", (), self.malformed)
        s.set("spanwatch_training_analysis_seconds", (), took)
        for link, seconds in f.network_seconds.items():
            s.set("spanwatch_training_network_seconds", (("link", link),), seconds)
        for link, seconds in f.network_peak_seconds.items():
            s.set("spanwatch_training_network_peak_seconds", (("link", link),), seconds)
        for link, (rtt, serialization) in f.steady.items():
            steady = (serialization or 0.0) + 2 * (rtt or 0.0)
            s.set("spanwatch_training_steady_seconds", (("link", link),), steady)
        # An event that ended still reads 0 rather than vanishing, so the board's line comes back down.
        now: dict[FullLabels, int] = {(("link", a), ("kind", b)): n for (a, b), n in f.events.items()}
        for labels in self._events | set(now):
            s.set("spanwatch_training_network_events", labels, now.get(labels, 0))
        self._events |= set(now)

    async def serve(
        self, listen: str, web_config: Path | None, interval: float, duration: float | None
    ) -> int:
        """Serve ``/metrics`` and tick every ``interval`` until a signal or ``duration``."""
        stop = asyncio.Event()

        async def no_reload() -> bool:
            return False

        Signals(stop.set, no_reload).install()
        exporter = Exporter(self.store)
        await exporter.apply(listen, web_config, None)
        end = None if duration is None else time.monotonic() + duration
        try:
            while not stop.is_set() and (end is None or time.monotonic() < end):
                began = time.monotonic()
                # The analysis is polars on worker threads: the loop keeps answering scrapes meanwhile.
                await asyncio.to_thread(self.tick)
                pause = max(0.0, interval - (time.monotonic() - began))
                if end is not None:
                    pause = min(pause, max(0.0, end - time.monotonic()))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=pause)
        finally:
            await exporter.close()
            self.close()
        return 0

    def close(self) -> None:
        """Remove the scratch files."""
        for tail in self.tails:
            tail.close()
        self._scratch.cleanup()
