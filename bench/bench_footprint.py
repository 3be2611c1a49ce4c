"""Did a missed episode leave any trace? Each run recorded again with the episode and with it neutralised.

Event recall counts every network episode of the truth (scenarios.md); the truth's ``shown`` says whether a
queue, a drop, a pause or a lit wave showed one (``spanwatch.sim.witness``), but not whether *anything* the
collector archives differed. This bench answers that by a counterfactual: for every episode the analysis of
a kept random run missed, it records the scenario on the fast path twice, as drawn and with that episode
neutralised (the same start and duration, no effect: a load of 1e-12, an incast replaced by a job-class
congestion of 1e-12, an OSNR drop of 1e-9 dB), and compares the two archives row by row: the same series
within 0.5 ms, the same value (a counter or byte gauge within one unit: a load of 1e-12 rounds to a byte).

- ``no trace``: no row differs. No instrument reading this archive could find the episode: a run with one
  misses it whatever the analyzer does (a run holds at most 8 network episodes, so its recall stays < 0.95).
- ``trace``: rows of the episode's link differ inside its time (+- 2 s): something could have seen it.
  Neutralising keeps every episode boundary, but it may still change how the fabric steps and so its
  random draws (``spanwatch.sim.fabric``): a trace over many links, optical readings and oper status
  included, is that divergence. "No trace" is conclusive either way (a divergence would show).

Run: ``.venv/bin/python bench/bench_footprint.py --runs DIR [--analysis NAME] [--seeds S ...] [--jobs 2]``,
DIR a ``bench_generalization.py --out`` folder (``runs/``, ``scenarios/``); the missed episodes are read from
each run's ``score.json``, or ``NAME/score.json`` with ``--analysis NAME``. Only runs that fail
``event_recall`` alone are checked unless ``--all``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import yaml

SERIES = ["device", "source", "metric", "interface", "queue", "priority", "lane", "direction", "pool"]
SERIES += ["component", "link"]
SAME_TIME_NS = 500_000  # two recordings' rows of one series within this are one reading
WINDOW_S = 2.0  # an episode's trace counts within its time and this either side (two polls)


def neutral(episode: dict[str, Any]) -> dict[str, Any]:
    """The episode at the same times with (almost) no effect."""
    if episode["kind"] in ("congestion", "burst"):
        return {**episode, "load": 1e-12}
    if episode["kind"] == "incast":
        keep = {k: episode[k] for k in ("start", "duration", "link")}
        return {"kind": "congestion", **keep, "load": 1e-12}
    if episode["kind"] == "optical_degradation":
        return {**episode, "osnr_drop_db": 1e-9}
    raise ValueError(f"no neutral {episode['kind']}")


def record(scenario: Path, out: Path) -> None:
    if not (out / "truth.json").exists():
        cmd = [
            sys.executable,
            "-m",
            "spanwatch.cli",
            "--log-level",
            "error",
            "demo",
            "--scenario",
            str(scenario),
        ]
        subprocess.run([*cmd, "--fast", "--no-analysis", "--out", str(out)], check=True, capture_output=True)


def archive(folder: Path) -> pl.DataFrame:
    """The archive's rows, time in ns from its first row, probe rows (whose send times jitter from run to run)
    numbered within their series instead."""
    rows = pl.read_parquet(folder / "archive" / "**" / "*.parquet").drop("received_time")
    rows = rows.with_columns(pl.col(k).fill_null("-") for k in SERIES)
    since = (pl.col("time") - pl.col("time").min()).dt.total_nanoseconds()
    order = pl.int_range(pl.len()).over(SERIES, order_by="time") * 10 * SAME_TIME_NS
    probe = pl.col("metric").str.starts_with("dci_link_")
    return rows.with_columns(t=pl.when(probe).then(-1 - order).otherwise(since)).drop("time").sort("t")


def differing(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """Rows of ``a`` that ``b`` does not hold: no reading of the series within ``SAME_TIME_NS``, or another
    value (a counter or a byte gauge by more than one unit, anything else by more than rounding)."""
    other = b.rename({"value": "other"}).select(*SERIES, "t", "other")
    both = a.join_asof(
        other, on="t", by=SERIES, strategy="nearest", tolerance=SAME_TIME_NS, check_sortedness=False
    )
    delta = (pl.col("value") - pl.col("other")).abs()
    whole = pl.col("counter").is_not_null() | pl.col("metric").str.ends_with("_bytes")
    moved = pl.when(whole).then(delta > 1.0).otherwise(delta > 1e-9 * pl.col("value").abs() + 1e-12)
    same_nan = pl.col("value").is_nan() & pl.col("other").is_nan()
    return both.filter(moved.fill_null(True) & ~same_nan.fill_null(False))


def check(base: Path, seed: str, index: int, work: Path) -> dict[str, Any]:
    """Record the run as drawn and with episode ``index`` neutralised; where they differ."""
    doc = yaml.safe_load((base / "scenarios" / f"random-{seed}.yaml").read_text())
    episode = doc["episodes"][index]
    changed = {**doc, "episodes": [neutral(e) if i == index else e for i, e in enumerate(doc["episodes"])]}
    path = work / f"{seed}-{index}.yaml"
    path.write_text(yaml.safe_dump(changed, sort_keys=False))
    record(base / "scenarios" / f"random-{seed}.yaml", work / seed / "drawn")
    record(path, work / seed / str(index))
    drawn, neutralised = archive(work / seed / "drawn"), archive(work / seed / str(index))
    rows = pl.concat([differing(drawn, neutralised), differing(neutralised, drawn)])  # rows either one lacks
    truth = json.loads((work / seed / "drawn" / "truth.json").read_text())
    first: datetime = pl.read_parquet(work / seed / "drawn" / "archive" / "**" / "*.parquet")["time"].min()  # type: ignore[assignment]
    told = truth["episodes"][index]
    start = (datetime.fromisoformat(told["start_time"].replace("Z", "+00:00")) - first).total_seconds()
    lo, hi = (start - WINDOW_S) * 1e9, (start + told["duration"] + WINDOW_S) * 1e9
    own = rows.filter(pl.col("link") == episode.get("link"), pl.col("t").is_between(lo, hi))
    return {
        "seed": int(seed),
        "kind": episode["kind"],
        "link": episode.get("link"),
        "affects_job": told.get("affects_job"),
        "shown": told.get("shown"),
        "rows_differing": rows.height,
        "on_its_link_in_its_time": own.height,
        "metrics": sorted(own["metric"].unique().to_list())[:8],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=Path, required=True, help="a bench_generalization.py --out folder")
    p.add_argument("--analysis", default=".", help="each run's analysis folder (e.g. reanalysed-none)")
    p.add_argument("--seeds", nargs="*", default=None, help="only these seeds")
    p.add_argument(
        "--all", action="store_true", help="every run that misses an episode, not recall-only ones"
    )
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--work", type=Path, default=None, help="keep the recordings here")
    args = p.parse_args()
    todo: list[tuple[str, int]] = []
    for run in sorted((args.runs / "runs").glob("random-*")):
        seed = run.name.split("-")[1]
        if (args.seeds and seed not in args.seeds) or not (run / "truth.json").exists():
            continue
        score = json.loads((run / args.analysis / "score.json").read_text())
        if not args.all and set(score.get("failed") or ()) != {"event_recall"}:
            continue
        truth = json.loads((run / "truth.json").read_text())
        missed = score["detail"]["events"]["episodes_missed"]
        for i, e in enumerate(truth["episodes"]):
            named = f"{e['kind']} on {e.get('link')}"
            if any(m.startswith(named + " ") and e["start_time"][:19] in m for m in missed):
                todo.append((seed, i))
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        firsts = sorted({seed for seed, _ in todo})
        with ThreadPoolExecutor(args.jobs) as pool:  # the drawn recordings first: one job each
            list(
                pool.map(
                    lambda s: record(args.runs / "scenarios" / f"random-{s}.yaml", work / s / "drawn"), firsts
                )
            )
            rows = list(pool.map(lambda job: check(args.runs, job[0], job[1], work), todo))
    print("| seed | kind | link | slowed the job | shown | rows differing | on its link in its time |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        cells = [r["seed"], r["kind"], r["link"], r["affects_job"], r["shown"], r["rows_differing"]]
        print("| " + " | ".join(map(str, cells)) + f" | {r['on_its_link_in_its_time']} {r['metrics']} |")
    traceless = {r["seed"] for r in rows if r["rows_differing"] == 0}
    blind = [s for s in firsts if all(r["rows_differing"] == 0 for r in rows if r["seed"] == int(s))]
    print(
        f"\nmissed episodes checked: {len(rows)}; no trace at all: {sum(r['rows_differing'] == 0 for r in rows)}"
    )
    print(f"runs checked: {len(firsts)}; every missed episode without a trace: {len(blind)} {blind}")
    print(f"runs with at least one traceless miss: {len(traceless)}")


if __name__ == "__main__":
    main()
