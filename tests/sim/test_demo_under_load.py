"""``spanwatch demo`` ends on a busy machine: with the CPU held by one busy loop per core, the run stops
within its duration plus a bounded margin (the collector's stop, ``STOP_GRACE_S``, then its cancellation)
and leaves its truth, or says clearly that the collector did not stop, instead of hanging in the
collector's shutdown while the fabric, far behind real time, keeps stepping. A second test holds the
event loop from the fabric itself, deterministically, and needs no busy machine to fail on a demo that keeps
the fabric stepping past the run's end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from spanwatch.demo import CANCEL_GRACE_S, STOP_GRACE_S
from spanwatch.sim.fabric import STEP_S
from spanwatch.sim.runtime import CHUNK_S

DURATION_S = 10.0
START_UP_S = 40.0  # imports, fabric and collector start, the summary: slow on a loaded 2-core machine
BOUND_S = DURATION_S + STOP_GRACE_S + CANCEL_GRACE_S + START_UP_S
DEMO = (sys.executable, "-m", "spanwatch.cli", "demo")
BUSY = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
# The demo with every model step holding the event loop for HELD_STEP_S from HELD_FROM_S of model time on,
# half-way through the run: the fabric then needs 200 times real time and, catching up, holds the loop for a
# whole chunk (10 s) per turn, through the rest of the run and whatever follows it.
HELD_STEP_S = 0.2
HELD_CHUNK_S = CHUNK_S / STEP_S * HELD_STEP_S
HELD_FROM_S = DURATION_S / 2
HELD_DEMO = f"""
import sys, time
from spanwatch import cli
from spanwatch.sim.fabric import Fabric

step = Fabric.step

def held_step(self):
    step(self)
    if self.t >= {HELD_FROM_S}:
        time.sleep({HELD_STEP_S})  # on the event loop's thread: the loop is held, as by a starved CPU

Fabric.step = held_step
sys.exit(cli.main(["demo", *sys.argv[1:]]))
"""


def test_the_demo_ends_within_its_bound_with_the_cpu_held_busy(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    # Each loop ends by itself after the bound, and is killed at the end of the test anyway.
    busy = [
        subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=BOUND_S + 30)])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        started = time.monotonic()
        run = subprocess.run(
            [*DEMO, "--duration", f"{DURATION_S:g}", "--no-analysis", "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=BOUND_S + 60,  # a hang fails here, with the process killed
        )
        took = time.monotonic() - started
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert took <= BOUND_S, f"{took:.0f} s > {BOUND_S:.0f} s\n{run.stderr[-2000:]}"
    assert (out / "truth.json").is_file()
    if run.returncode != 0:
        assert "spanwatch: the collector did not stop within" in run.stderr, run.stderr[-2000:]
    else:
        assert (out / "metrics.txt").is_file()


def test_the_demo_ends_within_its_bound_when_the_fabric_holds_the_event_loop(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    # The run's end is seen up to two held chunks late: a timer that fell due during a chunk runs after the
    # fabric's next turn, which was queued first.
    bound = BOUND_S + 2 * HELD_CHUNK_S
    started = time.monotonic()
    try:
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                HELD_DEMO,
                "--duration",
                f"{DURATION_S:g}",
                "--no-analysis",
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=bound + 10,
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the demo did not end within {bound + 10:.0f} s") from e
    took = time.monotonic() - started
    assert took <= bound, f"{took:.0f} s > {bound:.0f} s\n{run.stderr[-2000:]}"
    assert (out / "truth.json").is_file(), run.stderr[-2000:]
    if run.returncode != 0:
        assert "spanwatch: the collector did not stop within" in run.stderr, run.stderr[-2000:]
    else:
        assert (out / "metrics.txt").is_file()
