"""What each fitted rule of the method is worth: recorded random runs re-analysed with the rule off.

Issue 30's ablation. ``bench_generalization.py --out DIR`` keeps every run it records (the archive, the step
log, ``truth.json``); this bench re-analyses each of them with the method as it is, then once more per fitted
rule of ``analyzer/attribution/rules.py`` that declares an ``off`` value (the method without that rule),
scores every analysis with its control, and prints per rule the share of runs that meet every goal with and
without it, and the runs whose verdict the rule flips. A fitted rule that does not raise the share is a
candidate to leave; one that does should be restated from a principle.

Re-analysing is deterministic, so the same runs give the same table; only the recordings are random. Two
analyses at a time by default (this machine has two cores).

Run: ``.venv/bin/python bench/bench_ablation.py DIR [DIR ...] [--rules A,B] [--jobs 2] [--rows FILE.jsonl]``,
each DIR a run folder or a folder of them; ``--report FILE.jsonl`` prints the table of rows already written.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
import tempfile
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

AS_IS = "(as is)"  # the row of the method with every rule on
LOGS = ("steps.jsonl", "megatron.log", "torchtitan.log")
HOLDERS = ("analyzer.attribution.pipeline", "analyzer.physics")


def fitted_offs() -> dict[str, float]:
    """Every fitted rule that can be turned off, with its off value."""
    from analyzer.attribution.rules import RULES

    return {r.name: r.off for r in RULES.values() if r.off is not None and r.origin.startswith("fitted")}


def turned_off(name: str, off: float) -> list[tuple[Any, Any]]:
    """Set the rule's constant to ``off`` in every analyzer module that holds it; returns what to restore."""
    from analyzer.attribution.rules import RULES

    value = RULES[name].value
    changed = []
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("analyzer.") and getattr(module, name, None) == value:
            changed.append((module, value))
            setattr(module, name, off)
    return changed


def analyse_one(run: Path, rule: str | None, off: float | None) -> dict[str, Any]:
    """One run's analysis and score, with ``rule`` off (None: as is), in a scratch copy of the run."""
    for holder in HOLDERS:  # every module holding a rule, loaded before one is turned off
        importlib.import_module(holder)
    from analyzer.analysis import Analysis
    from spanwatch import demo, score
    from spanwatch.analyze import scored

    changed = turned_off(rule, off) if rule is not None and off is not None else []
    scratch = Path(tempfile.mkdtemp(prefix="ablation-"))
    try:
        out = scratch / run.name
        shutil.copytree(run, out, ignore=shutil.ignore_patterns("*.tmp", "report*", "control", "score.json"))
        log = next((out / name for name in LOGS if (out / name).exists()), None)
        inputs = demo.analysis_inputs(out, log)
        Analysis(inputs).run().write(out)
        result = scored(out / "truth.json", inputs, out)
        skew = json.loads((out / "summary.json").read_text()).get("skew_seconds")
    except Exception as error:  # one run's failure is its row, never the bench's end
        return {"run": run.name, "rule": rule or AS_IS, "error": f"{type(error).__name__}: {error}"}
    finally:
        for module, value in changed:
            setattr(module, rule, value)
        shutil.rmtree(scratch, ignore_errors=True)
    failed = sorted(name.split(":")[0] for name in result["why"])
    figures = {name: result[name] for name in score.GOALS}
    return {
        "run": run.name,
        "rule": rule or AS_IS,
        "passed": bool(result["passed"]),
        "failed": failed,
        "skew_seconds": skew,
        **figures,
    }


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
    from analyzer.attribution.rules import RULES

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
    """Figures meeting their goal, summed over the runs: finer than the runs meeting every goal."""
    from spanwatch import score

    return sum(len(score.GOALS) - len(row.get("failed", score.GOALS)) for row in rows)


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
    tasks: list[tuple[Path, str | None, float | None]] = [(run, None, None) for run in runs]
    tasks += [(run, name, off) for name, off in offs.items() for run in runs]
    print(f"{len(runs)} runs x {len(offs) + 1} variants, {args.jobs} at a time", file=sys.stderr)
    rows = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for row in pool.map(analyse_one, *zip(*tasks, strict=True)):
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if args.rows:
                with args.rows.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
