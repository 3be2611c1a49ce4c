"""A small random family through the fast path: the method must meet every goal on at least as many of these
scenarios as it did when the family was fixed (issue 29 measured today's share; raising it is the method's
work, and this number may only go up).

The seeds are the first eight from 2900 whose run is at most 120 s: random on every other axis of the space
(``spanwatch.sim.families``), short so that CI's share stays a few minutes. The full yardstick is
``bench/bench_generalization.py`` on fresh seeds (its tables: ``bench/README.md``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from analyzer import compare
from analyzer.analysis import Analysis
from spanwatch.demo import analysis_inputs
from spanwatch.sim import families

pytestmark = pytest.mark.integration

SEEDS = (2901, 2906, 2910, 2918, 2919, 2921, 2922, 2935)
# Measured when the family was fixed (issue 29): 2 of 8 (2910 and 2922, both quiet runs); the six others
# fail on step_error / misplaced_blame (the cost placed on the wrong steps: interval lines, skew past the
# search, overlapping episodes), event_recall and steady_error. See the module docstring. Since incasts
# stay in the job's class (spanwatch.sim.families) 2901 draws another file; still 2 of 8 (2026-12-03).
PASSING_AT_LEAST = 2
RUN_TIMEOUT_S = 1800  # one run's CPU is 1-3 minutes on a quiet 2-core machine


def _run(seed: int, root: Path) -> dict[str, Any]:
    path = root / f"random-{seed}.yaml"
    path.write_text(yaml.safe_dump(families.sample(seed), sort_keys=False))
    out = root / f"run-{seed}"
    cmd = [sys.executable, "-m", "spanwatch.cli", "--log-level", "warning", "demo", "--fast"]
    try:
        done = subprocess.run(
            [*cmd, "--scenario", str(path), "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"seed": seed, "passed": False, "why": [f"no score within {RUN_TIMEOUT_S} s"]}
    if done.returncode != 0:  # a crash fails the scenario, and the others are still run and reported
        return {"seed": seed, "passed": False, "why": [f"exit {done.returncode}: {done.stderr[-2000:]}"]}
    result: dict[str, Any] = json.loads((out / "score.json").read_text())
    control = result["control"]
    return {
        "seed": seed,
        "out": out,
        "passed": result["passed"],
        "why": result["why"],
        "scored": True,
        "control_fails": "not_applicable" in control or control.get("fails_timing_goal"),
    }


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    root = tmp_path_factory.mktemp("family")
    assert all(float(families.sample(s)["duration"].removesuffix("s")) <= 120 for s in SEEDS)
    with ThreadPoolExecutor(2) as pool:  # two cores
        return list(pool.map(lambda s: _run(s, root), SEEDS))


@pytest.mark.timeout(len(SEEDS) * RUN_TIMEOUT_S)
def test_the_method_meets_every_goal_on_as_many_random_scenarios_as_it_did(
    family: list[dict[str, Any]],
) -> None:
    passed = [r["seed"] for r in family if r["passed"]]
    report = "\n".join(f"{r['seed']}: {'passed' if r['passed'] else '; '.join(r['why'])}" for r in family)
    assert all(r.get("scored") for r in family), report  # every file recorded, analysed and scored
    assert all(r["control_fails"] for r in family), report  # a control with network cost always fails
    assert len(passed) >= PASSING_AT_LEAST, report


def test_a_recording_analysed_twice_gives_the_same_tables(family: list[dict[str, Any]]) -> None:
    # An instrument reads one recording one way, on every thread count: an order of equal values (members
    # read at one time, rows tied in a sort) must decide nothing. The first run that blamed something.
    blamed = [r["out"] for r in family if r.get("scored") and (r["out"] / "attribution.parquet").exists()]
    out = next(o for o in blamed if Analysis(_inputs(o)).run().attribution.height)
    first, second = Analysis(_inputs(out)).run(), Analysis(_inputs(out)).run()
    assert compare.differences(first, second) == []


def _inputs(out: Path) -> Any:
    truth = json.loads((out / "truth.json").read_text())
    return analysis_inputs(out, out / truth["job"]["log_file"])
