"""What each fitted rule of the method is worth: recorded random runs re-analysed with the rule off.

Issue 30's ablation. ``bench_generalization.py --out DIR`` keeps every run it records (the archive, the step
log, ``truth.json``); this bench re-analyses each of them with the method as it is, then once more per fitted
rule of ``analyzer/attribution/rules.py`` that declares an ``off`` value (the method without that rule:
``spanwatch analyze --truth`` with ``SPANWATCH_RULES_OFF`` naming it), scores every analysis with its
control, and prints per rule the share of runs that meet every goal with and
without it, and the runs whose verdict the rule flips. A fitted rule that does not raise the share is a
candidate to leave; one that does should be restated from a principle.

Re-analysing is deterministic, so the same runs give the same table; only the recordings are random. Two
analyses at a time by default (this machine has two cores).

Run: ``.venv/bin/python bench/bench_ablation.py DIR [DIR ...] [--rules A,B] [--jobs 2] [--rows FILE.jsonl]``,
each DIR a run folder or a folder of them; ``--report FILE.jsonl`` prints the table of rows already written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_generalization import FIGURES

from analyzer.attribution.rules import OFF_VARIABLE, RULES

AS_IS = "(as is)"  # the row of the method with every rule on
LOGS = ("steps.jsonl", "megatron.log", "torchtitan.log")
RUN_TIMEOUT_S = 1800.0  # an analysis past this is a hang, its own failure


def fitted_offs() -> dict[str, float]:
    """Every fitted rule that can be turned off, with its off value."""
    return {r.name: r.off for r in RULES.values() if r.off is not None}  # only fitted ones have one


def analyse_one(run: Path, rule: str | None) -> dict[str, Any]:
    """One run analysed and scored by ``spanwatch analyze --truth`` with ``rule`` off (None: as is), into a
    scratch folder; its verdict, figures and clock skew."""
    truth = json.loads((run / "truth.json").read_text())
    log = next((run / name for name in LOGS if (run / name).exists()), None)
    if log is None:
        return {"run": _label(run), "rule": rule or AS_IS, "error": f"no step log ({', '.join(LOGS)})"}
    scratch = Path(tempfile.mkdtemp(prefix="ablation-"))
    cmd = [sys.executable, "-m", "spanwatch.cli", "--log-level", "error", "analyze"]
    cmd += ["--archive", str(run / "archive"), "--logs", str(log), "--config", str(run / "config.yaml")]
    cmd += ["--job-bytes-per-step", str(sum(link["job_bytes_per_step"] for link in truth["links"].values()))]
    cmd += ["--job-traffic-class", str(truth["job"]["traffic_class"])]
    cmd += ["--truth", str(run / "truth.json"), "--out", str(scratch)]
    env = {**os.environ, OFF_VARIABLE: rule or ""}
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, check=False, env=env, timeout=RUN_TIMEOUT_S
        )
        if done.returncode != 0:  # one run's failure is its row, never the bench's end
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return {
                "run": _label(run),
                "rule": rule or AS_IS,
                "error": f"exit {done.returncode}: {tail[:200]}",
            }
        result = json.loads((scratch / "score.json").read_text())
        skew = json.loads((scratch / "summary.json").read_text()).get("skew_seconds")
    except subprocess.TimeoutExpired:
        return {"run": _label(run), "rule": rule or AS_IS, "error": f"timed out after {RUN_TIMEOUT_S:g} s"}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    failed = sorted(name.split(":")[0] for name in result["why"])
    figures = {name: result[name] for name in FIGURES}
    return {
        "run": _label(run),
        "rule": rule or AS_IS,
        "passed": bool(result["passed"]),
        "failed": failed,
        "skew_seconds": skew,
        **figures,
    }


def _label(run: Path) -> str:
    """A run's name in the table: its folder and its parent's (two recordings of one scenario differ)."""
    return f"{run.parent.name}/{run.name}"


def run_folders(paths: list[Path]) -> list[Path]:
    """Each path that is a run (it holds ``truth.json``), or the runs inside it."""
    runs: list[Path] = []
    for path in paths:
        runs += (
            [path] if (path / "truth.json").exists() else sorted(p.parent for p in path.glob("*/truth.json"))
        )
    return runs


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The Markdown table: per rule, the share meeting every goal with it and without it."""
    by_rule: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        by_rule[row["rule"]][row["run"]] = row
    base = by_rule.get(AS_IS, {})
    runs = sorted(base)
    met = sum(bool(base[r].get("passed")) for r in runs)
    out = [
        f"Runs: {len(runs)}. The method as is meets every goal on **{met} of {len(runs)}**.",
        "",
        "| rule off | value -> off | meet every goal without it | change | figure goals met, with -> without |"
        " runs that fail without it | runs that pass only without it |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in sorted(r for r in by_rule if r != AS_IS):
        rows_off = by_rule[name]
        done = [r for r in runs if r in rows_off]  # a bench cut short: compare on the runs both have
        with_it = sum(bool(base[r].get("passed")) for r in done)
        without = sum(bool(rows_off[r].get("passed")) for r in done)
        saves = [r for r in done if base[r].get("passed") and not rows_off[r].get("passed")]
        costs = [r for r in done if rows_off[r].get("passed") and not base[r].get("passed")]
        goals = f"{_goals_met([base[r] for r in done])} -> {_goals_met([rows_off[r] for r in done])}"
        rule = RULES[name]
        out.append(
            f"| `{name}` | {rule.value} -> {rule.off} | {without} of {len(done)} | {without - with_it:+d} | "
            f"{goals} | {', '.join(saves) or '-'} | {', '.join(costs) or '-'} |"
        )
    errors = [f"- {r['rule']} on {r['run']}: {r['error']}" for r in rows if "error" in r]
    return out + (["", "Errors:", *errors] if errors else [])


def _goals_met(rows: list[dict[str, Any]]) -> int:
    """Figures meeting their goal, summed over the runs: finer than the runs meeting every goal (a failed
    control is not a figure)."""
    return sum(len(FIGURES) - len(set(row.get("failed", FIGURES)) & set(FIGURES)) for row in rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", type=Path, nargs="*", help="run folders, or folders of them")
    p.add_argument("--rules", default=None, help="comma-separated rule names (default: every fitted rule)")
    p.add_argument("--jobs", type=int, default=2, help="analyses at once")
    p.add_argument("--rows", type=Path, default=None, help="also append one JSON row per analysis here")
    p.add_argument("--report", type=Path, default=None, help="only print the table of a rows file")
    args = p.parse_args()
    if args.report:
        print("\n".join(table([json.loads(line) for line in args.report.read_text().splitlines() if line])))
        return
    offs = fitted_offs()
    if args.rules:
        unknown = set(args.rules.split(",")) - set(offs)
        if unknown:
            p.error(f"not a fitted rule with an off value: {', '.join(sorted(unknown))}")
        offs = {name: offs[name] for name in args.rules.split(",")}
    runs = run_folders(args.runs)
    if not runs:
        p.error("no run folder (one holding truth.json) found")
    tasks: list[tuple[Path, str | None]] = [(run, None) for run in runs]
    tasks += [(run, name) for name in offs for run in runs]
    print(f"{len(runs)} runs x {len(offs) + 1} variants, {args.jobs} at a time", file=sys.stderr)
    rows = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for row in pool.map(analyse_one, *zip(*tasks, strict=True)):
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if args.rows:
                with args.rows.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
