"""The method on scenarios it has never seen: N random scenario files, each recorded, analysed and scored.

The files are drawn by ``spanwatch scenarios sample`` from fresh seeds (printed, so a run can be repeated
with ``--seed``); each runs through ``spanwatch demo --fast`` (the fabric in simulated time, no sockets) or,
with ``--path real``, the real-time demo over real SNMP and gNMI. Two at a time by default (this machine has
two cores). Printed, as Markdown:

- per figure of the scoring table: the share of runs that meet its goal, p50, p90 and the worst value;
- the control: the share of runs with network cost whose control fails (quiet runs have none);
- the share of runs that meet every goal (``passed``), the figure that counts;
- every failing seed with its failed figures and what the scenario holds (the shape of the failure),
  and the failure shapes counted;
- the failing runs counted by the scorer's diagnosis (``detail.diagnosis``): right per logged line but
  misplaced inside lines, the clock skew off by more than a second, no line's true cost above the noise.

Run: ``.venv/bin/python bench/bench_generalization.py [--count 200] [--seed S] [--jobs 2] [--path fast|real]
[--out DIR] [--rows FILE.jsonl]``; ``--report FILE.jsonl`` prints the report of rows already written (each
run's row is appended as it ends).

A method change is judged on the same recordings: ``--reanalyse DIR`` (a bench's ``--out``) analyses and
scores every kept run again with this checkout's analyzer, into ``DIR/runs/<run>/reanalysed-<oracle>/``
(the recording is deterministic, the analysis too: two checkouts' rows differ only by the method).
``--oracle skew|beat|both`` tells the analyzer what the truth knows (the clock skew: ``--skew``; the job's
beat, its checkpoints and outer sync: ``--job-beat``), to measure how much of the failure each accounts for.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from spanwatch.sim import families
from spanwatch.sim import scenario as sc

# A run past this is a failure of its own (a hang). The fast path takes 0.5-3 CPU minutes a run on a quiet
# 2-core machine; a loaded one stretches that several times over.
RUN_TIMEOUT_S = {"fast": 1800.0, "real": 1800.0}
# The scoring table's figures, in its order; their goals are read from each score.json (``goals``): the
# bench reads the scorer's files, as the scorer reads the analyzer's.
FIGURES = (
    "step_error",
    "false_blame",
    "link_error",
    "misplaced_blame",
    "event_recall",
    "event_precision",
    "steady_error",
)


def fresh_seed() -> int:
    """A seed nobody chose: 6 digits, so it is easy to quote."""
    return int.from_bytes(os.urandom(4), "big") % 900_000 + 100_000


def shape(path: Path) -> str:
    """What a scenario holds, in a few words: its job, log, links and episode kinds."""
    s = sc.load(path)
    job = s.job.parallelism + (f"/{s.job.sync_every}" if s.job.parallelism == "diloco" else "")
    kinds = Counter(e.kind for e in s.episodes)
    lossy = sum(not link.lossless for link in s.links)
    return (
        f"{job}, {s.job.log.format}/{s.job.log.every}, skew {s.job.clock_skew:+.1f}s, {len(s.links)} links "
        f"({lossy} lossy), " + ", ".join(f"{k}x{n}" for k, n in sorted(kinds.items()))
    )


def run_one(path: Path, out: Path, mode: str) -> dict[str, Any]:
    """Record, analyse and score one file; its figures, whether it passed and its wall time."""
    cmd = [sys.executable, "-m", "spanwatch.cli", "--log-level", "warning", "demo", "--scenario", str(path)]
    return scored_run(path, out, [*cmd, "--out", str(out), *(["--fast"] if mode == "fast" else [])], mode)


def reanalyse_one(path: Path, run: Path, oracle: str) -> dict[str, Any]:
    """Analyse and score a kept run (``run``, recorded from the scenario file ``path``) again, as the demo
    does, with what ``oracle`` tells the analyzer from the truth (``oracle_options``)."""
    truth = json.loads((run / "truth.json").read_text())
    out = run / f"reanalysed-{oracle}"
    cmd = [sys.executable, "-m", "spanwatch.cli", "--log-level", "error", "analyze"]
    cmd += ["--archive", str(run / "archive"), "--logs", str(run / truth["job"]["log_file"])]
    cmd += ["--config", str(run / "config.yaml"), "--job-traffic-class", str(truth["job"]["traffic_class"])]
    # The job's cross-site bytes per step as the demo gives them (``spanwatch.demo.analysis_inputs``).
    cmd += ["--job-bytes-per-step", str(sum(link["job_bytes_per_step"] for link in truth["links"].values()))]
    cmd += ["--truth", str(run / "truth.json"), "--out", str(out), *oracle_options(path, oracle)]
    return scored_run(path, out, cmd, "fast")


def oracle_options(path: Path, oracle: str) -> list[str]:
    """The ``analyze`` options that give it what the scenario ``path`` sets: the hosts' clock skew
    (``skew``), the job's beat (``beat``: its checkpoints, DiLoCo's outer sync; the log numbers steps from 1,
    so the sim's step k is the log's k + 1 and both fall on multiples of their period), or both."""
    job = sc.load(path).job
    options = []
    if oracle in ("skew", "both"):
        options.append(f"--skew={job.clock_skew:g}s")
    beat = [job.checkpoint.every] if job.checkpoint.every > 1 else []
    beat += [job.sync_every] if job.parallelism == "diloco" and job.sync_every > 1 else []
    if oracle in ("beat", "both") and beat:
        options += ["--job-beat", *map(str, beat)]
    return options


def scored_run(path: Path, out: Path, cmd: list[str], mode: str) -> dict[str, Any]:
    """Run ``cmd`` (which writes ``out``, its score included) and read its row."""
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=RUN_TIMEOUT_S[mode])
        rc, err = done.returncode, done.stderr
    except subprocess.TimeoutExpired:
        rc, err = -1, f"timed out after {RUN_TIMEOUT_S[mode]:g} s"
    row: dict[str, Any] = {
        "seed": int(path.stem.split("-")[-1]),
        "wall_s": round(time.monotonic() - start, 1),
    }
    row["shape"] = shape(path)
    try:
        result = json.loads((out / "score.json").read_text())
    except (OSError, ValueError):
        tail = err.strip().splitlines()[-1:] or ["no output"]
        return {**row, "passed": False, "failed": [f"run: exit {rc}: {tail[0][:200]}"]}
    control = result["control"]
    row.update({name: result[name] for name in FIGURES})
    row["goals"] = result["goals"]
    row["met"] = {name: name not in result["failed"] for name in FIGURES}
    row["passed"] = bool(result["passed"])
    row["quiet"] = "not_applicable" in control
    row["control_fails"] = None if row["quiet"] else bool(control.get("fails_timing_goal"))
    row["failed"] = list(result["failed"]) + (
        ["control"] if not row["quiet"] and not control.get("fails_timing_goal") else []
    )
    return {**row, **diagnosed_by(result)}


def diagnosed_by(result: dict[str, Any]) -> dict[str, Any]:
    """A score's diagnosis (``detail.diagnosis``) and whether every episode it missed is one that did not
    slow the job (``harmless_only``), or one the network never showed (``unshown_only``: the truth's
    ``shown``, where the simulator wrote it)."""
    events = result["detail"]["events"]
    missed = len(events["episodes_missed"])
    harmless = sum(events["missed_harmless"].values())
    unshown = events.get("missed_unshown", 0)
    return {
        **result["detail"]["diagnosis"],
        "harmless_only": missed > 0 and harmless == missed,
        "unshown_only": missed > 0 and unshown == missed,
    }


def diagnosis(out: Path) -> dict[str, Any]:
    """The diagnosis of a run folder (``diagnosed_by``: the error per logged line, the skew's error,
    whether any line's true cost stands above the step noise, whether only harmless episodes were missed);
    a score written before the scorer said all of it is computed again with ``spanwatch score``."""
    try:
        result = json.loads((out / "score.json").read_text())
        return diagnosed_by(result)
    except (OSError, ValueError):
        return {}
    except KeyError:
        cmd = [sys.executable, "-m", "spanwatch.cli", "score", "--truth", str(out / "truth.json")]
        cmd += ["--analysis", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        return diagnosed_by(json.loads(done.stdout)) if done.returncode == 0 else {}


def diagnosed(rows: list[dict[str, Any]]) -> list[str]:
    """The failing costly runs counted by what the diagnosis says of them (a run may show several)."""
    failing = [r for r in rows if not r["passed"] and not r.get("quiet") and "line_error" in r]
    if not failing:
        return []
    goal = float(failing[0]["goals"]["step_error"].split()[-1])
    inside = [
        r for r in failing if r["line_error"] is not None and r["line_error"] <= goal < (r["step_error"] or 0)
    ]
    # Off by more than the usual 1 s poll: the physics then lands on other steps than the excess.
    skewed = [r for r in failing if abs(r.get("skew_error_seconds") or 0.0) > 1.0]
    hidden = [r for r in failing if r.get("truth_visible") is False]
    unseen = [
        r for r in rows if not r["passed"] and r.get("failed") == ["event_recall"] and r.get("harmless_only")
    ]
    unshown = [
        r for r in rows if not r["passed"] and r.get("failed") == ["event_recall"] and r.get("unshown_only")
    ]

    def seeds(group: list[dict[str, Any]]) -> str:
        return ", ".join(str(r["seed"]) for r in group) or "-"

    return [
        f"Diagnosis of the {len(failing)} failing runs with network cost (a run may show several):",
        "",
        f"- right per logged line, misplaced inside lines (line_error <= {goal:g} < step_error): "
        f"{len(inside)} ({seeds(inside)})",
        f"- clock skew off by more than 1 s: {len(skewed)} ({seeds(skewed)})",
        f"- no logged line's true cost 3 sigma above the step noise (only the physics can show it): "
        f"{len(hidden)} ({seeds(hidden)})",
        f"- failing event_recall alone, every missed episode one that did not slow the job (an incast, in the "
        f"simulator, shows only through the job traffic it holds back): {len(unseen)} ({seeds(unseen)})",
        f"- failing event_recall alone, every missed episode one the network never showed (no queue of its "
        f"class past the marking threshold, no drop, no pause, no light lost: the truth's shown): "
        f"{len(unshown)} ({seeds(unshown)})",
        "",
    ]


def placed_inside_lines(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failing runs whose only failed figures are the ones read per step (``step_error``,
    ``misplaced_blame``) while their cost per logged line is right (``line_error`` within the goal): no
    telemetry read once a second can place an interval line's cost on one of its sub-second steps."""
    per_step = {"step_error", "misplaced_blame"}
    out = []
    for r in rows:
        if r["passed"] or r.get("line_error") is None or not set(r["failed"]) <= per_step:
            continue
        if r["line_error"] <= float(r["goals"]["step_error"].split()[-1]):
            out.append(r)
    return out


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def figure_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per figure: pass rate, p50, p90 and worst (missing figures fail and are left out of the quantiles)."""
    lines = ["| figure | goal | meets goal | p50 | p90 | worst |", "|---|---|---|---|---|---|"]
    scored = [r for r in rows if "step_error" in r]
    goals = scored[0]["goals"] if scored else {}
    for name in FIGURES:
        goal = goals.get(name, "?")
        values = [r[name] for r in scored if r[name] is not None]
        passing = sum(r["met"][name] for r in scored)
        if goal.startswith(
            ">="
        ):  # the worst of a figure that must be high is its lowest: quantiles from below
            p50, p90, worst = (
                (_quantile(values, 0.5), _quantile(values, 0.1), min(values)) if values else (None,) * 3
            )
        else:
            p50, p90, worst = (
                (_quantile(values, 0.5), _quantile(values, 0.9), max(values)) if values else (None,) * 3
            )
        share = f"{passing / len(rows):.0%} ({passing}/{len(rows)})"
        lines.append(f"| {name} | {goal} | {share} | {_num(p50)} | {_num(p90)} | {_num(worst)} |")
    costly = [r for r in scored if not r["quiet"]]
    fails = sum(bool(r["control_fails"]) for r in costly)
    lines.append(f"| control fails (runs with network cost) | must fail | {fails}/{len(costly)} | | | |")
    return lines


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def report(rows: list[dict[str, Any]], seed: int, mode: str) -> list[str]:
    passed = sum(r["passed"] for r in rows)
    walls = [r["wall_s"] for r in rows]
    out = [
        f"## {len(rows)} random scenarios (seeds {seed}..{max(r['seed'] for r in rows)}), {mode}",
        "",
        f"**Meet every goal: {passed / len(rows):.1%} ({passed} of {len(rows)})**; quiet runs: "
        f"{sum(bool(r.get('quiet')) for r in rows)}; wall per run p50 {_quantile(walls, 0.5):.1f} s, "
        f"p90 {_quantile(walls, 0.9):.1f} s.",
        "",
        *figure_table(rows),
        "",
        "Failure shapes (the failed figures together), most common first:",
        "",
    ]
    shapes = Counter(" + ".join(r["failed"]) for r in rows if not r["passed"])
    out += [f"- {n} x {what}" for what, n in shapes.most_common()]
    inside = placed_inside_lines(rows)
    out += [
        "",
        f"Failing only where a figure is read per step inside interval lines (step_error and misplaced_blame "
        f"alone, with line_error within the step_error goal): {len(inside)}; with them the share would be "
        f"{(passed + len(inside)) / len(rows):.1%} (a diagnosis: the spec scores per step).",
        "",
    ]
    out += [*diagnosed(rows), "Failing seeds:", ""]
    out += [f"- {r['seed']}: {', '.join(r['failed'])} ({r['shape']})" for r in rows if not r["passed"]]
    return out


def from_rows(path: Path, runs: Path | None) -> None:
    """Print the report of a rows file (a bench cut short, or one run elsewhere); with ``runs`` (the bench's
    ``--out``), rows written before the diagnosis existed are diagnosed from their kept folders."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if runs is not None:
        rows = [{**diagnosis(runs / "runs" / f"random-{r['seed']}"), **r} for r in rows]
    print("\n".join(report(sorted(rows, key=lambda r: r["seed"]), min(r["seed"] for r in rows), "recorded")))


def reanalyse(base: Path, oracle: str, jobs: int, rows_path: Path | None) -> None:
    """Every run kept under ``base`` (``runs/random-S`` beside ``scenarios/random-S.yaml``) analysed and
    scored again (``reanalyse_one``); the report as for a recording bench."""
    runs = sorted(p for p in (base / "runs").glob("random-*") if (p / "truth.json").is_file())
    if not runs:
        sys.exit(f"{base}/runs: no recorded runs (a bench's --out holds runs/ and scenarios/)")
    if rows_path is not None:
        rows_path.write_text("")

    def one(run: Path) -> dict[str, Any]:
        row = reanalyse_one(base / "scenarios" / f"{run.name}.yaml", run, oracle)
        if rows_path is not None:
            with rows_path.open("a") as f:
                f.write(json.dumps(row) + "\n")
        return row

    print(f"{len(runs)} kept runs, re-analysed, oracle {oracle}, {jobs} at a time", file=sys.stderr)
    with ThreadPoolExecutor(jobs) as pool:
        rows = list(pool.map(one, runs))
    first = min(r["seed"] for r in rows)
    print("\n".join(report(rows, first, f"re-analysed (oracle: {oracle})")))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=200, help="how many random scenarios")
    p.add_argument("--seed", type=int, default=None, help="the first seed (default: a fresh one)")
    p.add_argument("--jobs", type=int, default=2, help="runs at once")
    p.add_argument("--path", choices=("fast", "real"), default="fast", help="the recording path")
    p.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    p.add_argument("--rows", type=Path, default=None, help="also write one JSON row per run here")
    p.add_argument(
        "--reanalyse",
        type=Path,
        default=None,
        metavar="DIR",
        help="analyse and score again the runs a bench kept (its --out) with this checkout's analyzer",
    )
    p.add_argument(
        "--oracle",
        choices=("none", "skew", "beat", "both"),
        default="none",
        help="with --reanalyse: tell the analyzer the scenario's clock skew, the job's beat, or both",
    )
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        help="only print the report of a rows file (with --out: diagnosed)",
    )
    args = p.parse_args()
    if args.report is not None:
        from_rows(args.report, args.out)
        return
    if args.reanalyse is not None:
        reanalyse(args.reanalyse, args.oracle, args.jobs, args.rows)
        return
    seed = fresh_seed() if args.seed is None else args.seed
    print(f"seed {seed}: {args.count} scenarios, {args.path} path, {args.jobs} at a time", file=sys.stderr)
    if args.rows is not None:
        args.rows.write_text("")

    def one(path: Path) -> dict[str, Any]:
        row = run_one(path, base / "runs" / path.stem, args.path)
        if args.rows is not None:  # as each run ends, so a long bench cut short still has its rows
            with args.rows.open("a") as f:
                f.write(json.dumps(row) + "\n")
        return row

    with tempfile.TemporaryDirectory() as tmp:
        base = args.out or Path(tmp)
        paths = families.write(seed, args.count, base / "scenarios")
        with ThreadPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(one, paths))
    print("\n".join(report(rows, seed, f"{args.path} path")))


if __name__ == "__main__":
    main()
