"""The shipped scenarios' demos, run in parallel, each announced on the terminal as it ends: the whole set
takes minutes, and a line per scenario says the run is alive."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import pytest

from spanwatch.sim import scenario as sc


@dataclass
class Run:
    out: Path
    returncode: int
    stderr: str
    seconds: float


def run_demo(path: Path, out: Path) -> Run:
    """``spanwatch demo --scenario PATH --out OUT`` at the scenario's duration."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "spanwatch.cli", "demo", "--scenario", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=sc.load(path).duration + 180,
    )
    return Run(out, done.returncode, done.stderr[-4000:], time.monotonic() - start)


def run_all(
    paths: Sequence[Path],
    base: Path,
    jobs: int,
    announce: Callable[[str], None],
    run: Callable[[Path, Path], Run] = run_demo,
) -> dict[str, Run]:
    """Each scenario's run (by file stem) into ``base / stem``, ``jobs`` at a time, each announced as it
    ends with its exit code, its time and how many of the set have ended."""
    done: dict[str, Run] = {}
    with ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(run, p, base / p.stem): p.stem for p in paths}
        for future in as_completed(futures):
            name = futures[future]
            done[name] = ended = future.result()
            announce(
                f"scenario {name}: exit {ended.returncode} after {ended.seconds:.0f} s ({len(done)}/{len(paths)})"
            )
    return done


def terminal_line(config: pytest.Config) -> Callable[[str], None]:
    """Write a line to pytest's terminal now, while a fixture or test runs.

    The terminal reporter alone is not enough: its stream is fd 1, which pytest's capture redirects while
    the fixture runs, so the line would only show with a failure's captured output."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def write(line: str) -> None:
        if reporter is None:
            return
        if capture is None:
            reporter.write_line(line)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    return write
