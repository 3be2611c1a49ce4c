"""Benchmark of the simulated fabric: model speed and the whole demo's CPU use.

1. The model alone: simulated seconds per wall second at 1 ms steps, for 4 and 32 waves, with the default
   episodes (goal: at least 20x real time for 32 waves on one core).
2. ``spanwatch demo --duration D``: CPU seconds (user + system, children included) per wall second.

Run: ``.venv/bin/python bench/bench_sim.py [--seconds 20] [--demo 20]``.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time

from spanwatch.sim.fabric import Fabric
from spanwatch.sim.scenario import builtin


def model_speed(waves: int, seconds: float) -> float:
    """Simulated seconds per wall second (process CPU time, so other load on the machine does not count)."""
    f = Fabric(builtin(seconds, waves=waves))
    start = time.process_time()
    f.advance(seconds)
    return seconds / (time.process_time() - start)


def demo_cpu(duration: float) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one ``spanwatch demo`` run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [sys.executable, "-m", "spanwatch.cli", "demo", "--duration", str(duration), "--out", out],
            check=True,
            capture_output=True,
        )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=20.0, help="simulated seconds per model run")
    p.add_argument("--demo", type=float, default=20.0, help="demo duration (0: skip)")
    args = p.parse_args()
    for waves in (4, 32):
        print(
            f"model, {waves:2d} waves, 1 ms steps: {model_speed(waves, args.seconds):6.1f}x real time (CPU)"
        )
    if args.demo:
        wall, cpu = demo_cpu(args.demo)
        print(
            f"demo --duration {args.demo:g}: wall {wall:.1f} s, CPU {cpu:.1f} s ({100 * cpu / wall:.0f}% of one core)"
        )


if __name__ == "__main__":
    main()
