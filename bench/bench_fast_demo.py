"""``spanwatch demo --fast`` end to end on a 120 s scenario, this checkout beside a baseline one (issue 29).

Issue 29's target: a 120 s scenario recorded, analysed and scored in <= 10 s on this 2-core machine. Each
run is one subprocess (``spanwatch/fast_phases.py``, run by path on the checkout PYTHONPATH names) doing
what ``demo --fast`` does (record, claims, analysis, report and score) on a fixed epoch, so that two checkouts
given the same scenario must write the same files; it reports wall and CPU seconds per phase. After timing, the outputs of the two checkouts are compared (``compare``): the same
truth, step log, archive rows and score, or the speed-up changed the model.

Run (the baseline: a checkout of main, e.g. ``git worktree add /tmp/base main``)::

    PYTHONPATH=$PWD .venv/bin/python bench/bench_fast_demo.py --baseline /tmp/base [--runs 2]
    .venv/bin/python bench/bench_fast_demo.py compare REF_DIR NEW_DIR   # two output folders

Figures are noisy on a shared machine: the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

HERE = Path(__file__).resolve().parent.parent
SCENARIO = HERE / "examples" / "scenarios" / "diloco-four-sites.yaml"
BUILTIN = "builtin"  # ``--scenario builtin``: the demo's default (no file)
DRIVER = (
    HERE / "spanwatch" / "fast_phases.py"
)  # one run, its phases timed (it drives the shell: not imported)
DURATION_S = 120.0
EPOCH_S = 1_790_000_000.25  # a fixed start: the analysis bins on absolute time, so both runs share it
RELATIVE = 1e-9  # float round-off allowed between two checkouts (sums in another order)
PHASES = ("record", "analysis", "report+score")  # the report renders beside the score (demo --fast)


def run_checkout(checkout: Path, scenario_path: Path, length: str, out: Path) -> dict[str, Any]:
    """One run on ``checkout``'s code: its phases, and the process's wall and CPU seconds (start-up too)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    # By path, so that ``checkout``'s spanwatch (PYTHONPATH) is what it runs, this checkout's driver or not.
    cmd = [sys.executable, str(DRIVER), str(scenario_path), length, str(out), str(EPOCH_S)]
    done = subprocess.run(cmd, env=env, cwd=checkout, check=True, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "phases": json.loads(done.stdout.splitlines()[-1])}


# -- equality of two output folders ----------------------------------------------------------------------
def _close(a: Any, b: Any, where: str, problems: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            problems.append(f"{where}: keys differ ({sorted(a.keys() ^ b.keys())[:5]})")
        for k in a.keys() & b.keys():
            _close(a[k], b[k], f"{where}.{k}", problems)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            problems.append(f"{where}: {len(a)} vs {len(b)} items")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _close(x, y, f"{where}[{i}]", problems)
    elif isinstance(a, float) and isinstance(b, float | int) and not isinstance(b, bool):
        if not (math.isclose(a, b, rel_tol=RELATIVE, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))):
            problems.append(f"{where}: {a!r} vs {b!r}")
    elif a != b:
        problems.append(f"{where}: {a!r} vs {b!r}")


def _archive(out: Path) -> pl.DataFrame:
    frame = pl.read_parquet(str(out / "archive" / "**" / "*.parquet"), hive_partitioning=True)
    return frame.sort(frame.columns, nulls_last=True)


def _jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _report(out: Path, name: str) -> str:
    """A report file with its folder's path made neutral (the report names where it was written)."""
    return (out / name).read_text().replace(str(out.parent), "<parent>")


def compare(ref: Path, new: Path) -> list[str]:
    """What differs between two output folders: truth, step logs, score, report, archive rows (empty: the
    same). The folders should share their name: the report's title is the folder's."""
    problems: list[str] = []
    for name in ("truth.json", "score.json"):
        _close(json.loads((ref / name).read_text()), json.loads((new / name).read_text()), name, problems)
    if (ref / "report.json").is_file():
        _close(
            json.loads(_report(ref, "report.json")),
            json.loads(_report(new, "report.json")),
            "report.json",
            problems,
        )
        for name in ("report.md", "report.html"):
            if _report(ref, name) != _report(new, name):
                problems.append(f"{name}: differs")
    logs = sorted(p.name for p in ref.glob("*.jsonl")) + sorted(p.name for p in ref.glob("*.log"))
    for name in logs:
        _close(
            _jsonl(ref / name) if name.endswith(".jsonl") else (ref / name).read_text(),
            _jsonl(new / name) if name.endswith(".jsonl") else (new / name).read_text(),
            name,
            problems,
        )
    a, b = _archive(ref), _archive(new)
    if a.columns != b.columns or a.height != b.height:
        problems.append(f"archive: {a.shape} {a.columns} vs {b.shape} {b.columns}")
        return problems
    for column in a.columns:
        x, y = a[column], b[column]
        if x.dtype.is_float():
            bad = ~(
                ((x - y).abs() <= RELATIVE * x.abs().clip(lower_bound=1e-300)) | (x.is_nan() & y.is_nan())
            )
            bad = bad.fill_null(x.is_null() != y.is_null())
            if bad.any():
                problems.append(f"archive.{column}: {int(bad.sum())} of {a.height} rows differ")
        elif not x.equals(y, null_equal=True):
            problems.append(f"archive.{column}: rows differ")
    return problems


# -- the bench ---------------------------------------------------------------------------------------------
def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "compare":
        problems = compare(Path(sys.argv[2]), Path(sys.argv[3]))
        print("\n".join(problems) if problems else "the same")
        sys.exit(1 if problems else 0)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", type=Path, help="a checkout to compare with (e.g. main's)")
    p.add_argument("--scenario", type=Path, default=SCENARIO, help=f"a scenario file, or {BUILTIN!r}")
    p.add_argument("--duration", type=float, default=DURATION_S)
    p.add_argument(
        "--time-scale", type=float, help="stretch the scenario file by this (instead of --duration)"
    )
    p.add_argument("--runs", type=int, default=1, help="runs per checkout (the median is shown)")
    p.add_argument("--keep", type=Path, help="keep the outputs here (default: a temporary folder)")
    args = p.parse_args()
    checkouts = {"this": HERE} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
        length = f"x{args.time_scale:g}" if args.time_scale else f"{args.duration:g}"
        what = f"time scale {args.time_scale:g}" if args.time_scale else f"{args.duration:g} s"
        load_before = os.getloadavg()[0]
        for k in range(args.runs):
            for name, checkout in checkouts.items():  # alternate, so load drifts hit both alike
                scenario = args.scenario if str(args.scenario) == BUILTIN else args.scenario.resolve()
                out = root / f"{name}-{k}" / "demo"  # one folder name: the report's title
                results[name].append(run_checkout(checkout, scenario, length, out))
        print(
            f"demo --fast, {args.scenario.name} ({what}), {args.runs} run(s) each, load average "
            f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} cores (medians, seconds)"
        )
        print("| checkout | wall | CPU | " + " | ".join(f"{p} CPU" for p in PHASES) + " |")
        print("|---|---|---|" + "---|" * len(PHASES))
        med: dict[str, dict[str, float]] = {}
        for name, runs in results.items():
            med[name] = {
                "wall": statistics.median(r["wall"] for r in runs),
                "cpu": statistics.median(r["cpu"] for r in runs),
                **{p: statistics.median(r["phases"][p]["cpu"] for r in runs) for p in PHASES},
            }
            m = med[name]
            print(
                f"| {name} | {m['wall']:.1f} | {m['cpu']:.1f} | "
                + " | ".join(f"{m[p]:.1f}" for p in PHASES)
                + " |"
            )
        if args.baseline:
            b, t = med["baseline"], med["this"]
            print(
                f"| **ratio** (baseline / this) | x{b['wall'] / t['wall']:.2f} | x{b['cpu'] / t['cpu']:.2f} | "
                + " | ".join(f"x{b[p] / max(t[p], 1e-9):.2f}" for p in PHASES)
                + " |"
            )
            problems = compare(root / "baseline-0" / "demo", root / "this-0" / "demo")
            print(
                "outputs: "
                + ("the same (truth, step log, archive, score, report)" if not problems else "DIFFER")
            )
            for line in problems[:20]:
                print("  " + line)


if __name__ == "__main__":
    main()
