"""The driver's peak memory stage by stage: each stage of the analysis and of the blame
(``analyzer.attribution.pipeline``) wrapped, the process's high-water mark (VmHWM) reset as each begins
(``/proc/self/clear_refs``) and read as it ends, so that each stage's peak is its own and a stage's peak
includes what the stages inside it reached. Linux only.

    PYTHONPATH=$PWD .venv/bin/python bench/profile_stages.py --archive /tmp/dist/archive \\
        --logs /tmp/dist/logs --out /tmp/dist/profiled [--ray-cpus 2]

Prints one line per stage as it ends (its peak, the resident memory it left and how much of that is shared
memory, e.g. Ray's object store mapped), then the run's peak. With ``--ray-cpus`` the Ray engine's driver
is profiled (its tasks report their own peaks to ``bench_distributed.py``).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

GB = 1e9
_STACK: list[str] = []
PEAKS: dict[str, int] = {}


def _status(field: str) -> int:
    """A ``/proc/self/status`` figure in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _credit(peak: int) -> None:
    """The high-water mark so far counts for every stage still running."""
    for name in _STACK:
        PEAKS[name] = max(PEAKS.get(name, 0), peak)


def _reset() -> None:
    _credit(_status("VmHWM"))
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS


def staged(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with its peak recorded under ``name``."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _reset()
        _STACK.append(name)
        start = time.monotonic()
        try:
            return function(*args, **kwargs)
        finally:
            _credit(_status("VmHWM"))
            _STACK.pop()
            print(
                f"{name:28s} peak {PEAKS[name] / GB:5.2f} GB, left {_status('VmRSS') / GB:5.2f} GB "
                f"({_status('RssShmem') / GB:4.2f} shared), {time.monotonic() - start:6.1f} s",
                file=sys.stderr,
                flush=True,
            )

    return wrapper


def wrap_stages() -> None:
    """Wrap the analysis' and the blame's stages where their callers look them up."""
    from analyzer import analysis, distributed, inputs, network
    from analyzer.attribution import pipeline

    for name in (
        "by_ranks",
        "in_order",
        "rhythm",
        "joined",
        "read_lines",
        "expand",
        "read_grid",
        "end_rates",
        "read_amounts",
        "steady",
        "grid_physics",
        "find_skew",
        "physics_per_step",
        "lines_with_physics",
        "judge",
        "network_time",
        "steps_placed",
        "outputs",
    ):
        if hasattr(pipeline, name):  # the stages of this version of the blame
            setattr(pipeline, name, staged(name, getattr(pipeline, name)))
    if hasattr(pipeline, "StepParts"):  # the parts put together (a function before)
        pipeline.StepParts.joined = staged("joined", pipeline.StepParts.joined)  # type: ignore[method-assign]
    inputs.parse_logs = staged("parse_logs", inputs.parse_logs)
    network.analyse_archive = staged("telemetry", network.analyse_archive)
    for method in ("_network", "_parse_logs"):
        setattr(
            distributed.RayAnalysis, method, staged(f"ray{method}", getattr(distributed.RayAnalysis, method))
        )
    # ``blame.attribute`` is left unwrapped: a wrapper would keep the parsed steps it is handed and lets go.
    for method in ("_correlate", "_measures"):
        setattr(analysis.Analysis, method, staged(method, getattr(analysis.Analysis, method)))
    analysis.AnalysisResult.write = staged("write", analysis.AnalysisResult.write)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archive", required=True)
    p.add_argument("--logs", type=Path, required=True, help="a folder of *.jsonl step logs")
    p.add_argument("--batch-rows", type=int, default=4_000_000)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--ray-cpus", type=int, help="run on a local Ray of this many CPUs (the driver's stages)")
    args = p.parse_args()
    wrap_stages()
    from analyzer.analysis import Analysis, AnalysisInputs

    inputs = AnalysisInputs(
        archive=args.archive, logs=tuple(sorted(args.logs.glob("*.jsonl"))), batch_rows=args.batch_rows
    )
    start = time.monotonic()
    # The whole run as a stage too: the resets lower the kernel's own maximum (ru_maxrss) with VmHWM.
    if args.ray_cpus:
        from analyzer import distributed

        distributed.start_local(args.ray_cpus)
        run = distributed.RayAnalysis(inputs).run
    else:
        run = Analysis(inputs).run
    staged("all", lambda: run().write(args.out))()
    print(
        json.dumps(
            {"seconds": round(time.monotonic() - start, 1), "peak_rss_gb": round(PEAKS["all"] / GB, 3)}
        )
    )


if __name__ == "__main__":
    main()
