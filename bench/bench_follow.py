"""Live detection on the scenario matrix: ``spanwatch follow`` beside each ``spanwatch demo``, against the
post-run analysis of the same run at the same threshold.

For each scenario the demo runs the simulated fabric in real time; follow tails its log and archive and this
bench scrapes follow's ``/metrics`` every ``--scrape`` seconds. Per truth episode (``truth.json``) of the
network families (congestion, optical, outage) on a link, it prints:

- ``live_s``: the time from the episode's start (switches' clock, which is the wall clock here) until the
  first scrape where the episode link's figure is above ``--threshold`` (seconds per step), looked for
  until 15 s after the episode ends; the figure is ``--gauge``: ``mean``
  (``spanwatch_training_network_seconds``, the recent steps' mean) or ``peak``
  (``spanwatch_training_network_peak_seconds``, the worst recent step);
- ``post_s``: the baseline, the post-run analyzer (the demo's own analysis, ``attribution.parquet``) at the
  same threshold, per step (mean over ranks): when its answer exists (the analysis file's time) minus the
  start, and ``ideal_s``, the end of the first step it blames minus the start (what any method reading the
  same step log could at best do).

A harmless episode (``affects_job`` false) is "blamed" when its link reads above the threshold while it
lasts or within 15 s after, unless a harmful episode on that link overlaps that time. Then the summary: the
share of harmful episodes shown on the right link within 15 s (goal: at least 90 %), and harmless episodes
blamed (goal: none).

Run: ``.venv/bin/python bench/bench_follow.py [--only A,B] [--jobs 2] [--threshold 0.005] [--gauge mean|peak]
[--out DIR [--rescore | --replay LAG]] [--replay LAG --runs DIR]``; ``--runs`` replays recorded random
runs (``bench_generalization.py --out DIR`` keeps them in ``DIR/runs``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from analyzer import blame, live, topology
from analyzer.ingest import parse_file
from analyzer.network import NEEDED
from analyzer.telemetry import scan_archive
from analyzer.thresholds import Thresholds
from spanwatch.sim import scenario as sc
from spanwatch.sim.commands import free_port
from spanwatch.sim.runtime import SimulatedFabric
from spanwatch.sim.truth_build import LOG_FILES

GOAL_SECONDS = 15.0
HANG_FACTOR, HANG_SLACK_SECONDS = 3.0, 90.0  # a demo's run phase taking longer is hung
AFTER_SECONDS = 15.0  # how long after an episode's end its link is still watched


def _spanwatch(*args: str) -> list[str]:
    return [sys.executable, "-m", "spanwatch.cli", *args]


GAUGES = {"mean": "spanwatch_training_network_seconds", "peak": "spanwatch_training_network_peak_seconds"}
STEP = "spanwatch_training_step_seconds"


def scrape(url: str) -> dict[str, dict[str, float]]:
    """Per gauge (``GAUGES``) its value per link, from one scrape."""
    with urllib.request.urlopen(url, timeout=2) as response:
        text = response.read().decode()
    out: dict[str, dict[str, float]] = {gauge: {} for gauge in GAUGES}
    for line in text.splitlines():
        for gauge, name in GAUGES.items():
            if line.startswith(name + "{"):
                labels, _, value = line.rpartition(" ")
                out[gauge][labels.split('link="', 1)[1].split('"', 1)[0]] = float(value)
        if line.startswith(STEP + " "):
            out["step"] = {"": float(line.rpartition(" ")[2])}
    return out


def run(path: Path, out: Path, scrape_every: float, pick: Callable[[list[Any]], list[Any]]) -> dict[str, Any]:
    """One demo with follow beside it; the scrapes (wall time, per link) and the wall time of each phase."""
    s = sc.load(path)
    truth = SimulatedFabric(s).truth()  # the job's figures, as the demo's analysis is given them
    job_bytes = sum(link["job_bytes_per_step"] for link in truth["links"].values())
    out.mkdir(parents=True, exist_ok=True)
    demo = subprocess.Popen(
        _spanwatch("demo", "--scenario", str(path), "--out", str(out)),
        stdout=subprocess.DEVNULL,
        stderr=(out / "demo.stderr").open("w"),
    )
    while not (out / "config.yaml").exists() and demo.poll() is None:
        time.sleep(0.1)
    port = free_port()
    follow = subprocess.Popen(
        _spanwatch(
            "--log-level",
            "warning",
            "follow",
            "--logs",
            str(out / LOG_FILES[s.job.log.format]),
            "--archive",
            str(out / "archive"),
            "--config",
            str(out / "config.yaml"),
            "--listen",
            f"127.0.0.1:{port}",
            "--job-traffic-class",
            str(s.job.traffic_class),
            "--job-bytes-per-step",
            str(job_bytes),
        ),
        stdout=subprocess.DEVNULL,
        stderr=(out / "follow.stderr").open("w"),
    )
    scrapes: list[tuple[float, dict[str, dict[str, float]]]] = []
    done = threading.Event()

    def scraper() -> None:
        while not done.is_set():
            began = time.time()
            with contextlib.suppress(OSError):  # not listening yet
                scrapes.append((began, scrape(f"http://127.0.0.1:{port}/metrics")))
            done.wait(max(0.0, scrape_every - (time.time() - began)))

    thread = threading.Thread(target=scraper, daemon=True)
    thread.start()
    # truth.json is written when the run ends, before the demo's own analysis: follow has seen it all.
    # Under heavy load a demo has been seen to hang for good while its collector stops ("stopping:
    # cancelling sources"), before writing truth.json: past the deadline it is stopped and not scored.
    deadline = time.monotonic() + HANG_FACTOR * s.duration + HANG_SLACK_SECONDS
    while not (out / "truth.json").exists() and demo.poll() is None:
        if time.monotonic() > deadline:
            _stop(demo)
            break
        time.sleep(0.2)
    time.sleep(2 * scrape_every)
    done.set()
    thread.join()
    follow.send_signal(signal.SIGTERM)
    follow.wait(timeout=30)
    demo.wait()
    (out / "scrapes.json").write_text(json.dumps(scrapes))
    return {"scenario": path.stem, "rc": demo.returncode, "scrapes": pick(scrapes), "out": out}


def saved(out: Path, pick: Callable[[list[Any]], list[Any]]) -> dict[str, Any]:
    """A run kept by an earlier ``--out``, as ``run`` returned it."""
    scrapes = [(t, values) for t, values in json.loads((out / "scrapes.json").read_text())]
    return {"scenario": out.name, "rc": 0, "scrapes": pick(scrapes), "out": out}


def _pick(
    scrapes: list[tuple[float, Any]], gauge: str, threshold: float, share: float
) -> list[tuple[float, dict[str, float]]]:
    """The scrapes of one gauge, a link's value kept only where it passes the scrape's limit: the larger of
    ``threshold`` and ``share`` of the step time (runs kept before the peak gauge existed hold the mean
    alone, and no step time)."""
    out = []
    for t, values in scrapes:
        links = values.get(gauge, {}) if "mean" in values else values
        limit = max(threshold, share * values.get("step", {}).get("", 0.0) if "mean" in values else 0.0)
        out.append((t, {link: (v if v > limit else 0.0) for link, v in links.items()}))
    return out


def _on_link(episode: dict[str, Any]) -> bool:
    """A network episode (congestion, optical, outage): every one is on a link; a compute stall is on none."""
    return bool(episode.get("link"))


def replay(out: Path, lag: float, pick: Callable[[list[Any]], list[Any]]) -> dict[str, Any]:
    """A finished run fed to ``analyzer.live`` as if live: every second, the log lines written by then (host
    clock) and the readings ``lag`` seconds older; the figures as a scrape would read them."""
    truth = json.loads((out / "truth.json").read_text())
    skew = timedelta(seconds=float(truth["job"]["clock_skew_seconds"]))
    steps = parse_file(out / truth["job"]["log_file"]).table("steps")
    readings = scan_archive(out / "archive", metrics=NEEDED).collect()
    members = topology.link_members(topology.load_config(out / "config.yaml"))
    total = sum(link["job_bytes_per_step"] for link in truth["links"].values())
    job = blame.JobFigures(total, str(truth["job"]["traffic_class"]))
    written = pl.coalesce("end_time", "start_time") - skew
    now, last = readings["time"].min(), readings["time"].max() + timedelta(seconds=lag)
    scrapes = []
    while now <= last:
        window = live.Window(live.Settings())
        window.add_steps(steps.filter(written <= now))
        window.add_readings(readings.filter(pl.col("time") <= now - timedelta(seconds=lag)))
        f = live.compute(window, members, job, Thresholds())
        step = {"": f.step_seconds} if f.step_seconds is not None else {}
        scrapes.append(
            (now.timestamp(), {"mean": f.network_seconds, "peak": f.network_peak_seconds, "step": step})
        )
        now += timedelta(seconds=1)
    return {"scenario": out.name, "rc": 0, "scrapes": pick(scrapes), "out": out}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a demo: its first SIGTERM asks the collector to stop, the second forces it; then SIGKILL."""
    for _ in range(2):
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
            return
    proc.kill()
    proc.wait()


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def post_run(out: Path, skew: float) -> tuple[pl.DataFrame, float | None]:
    """Per (step, link) the post-run analysis' cost (mean over ranks), step times on the switches' clock;
    and when the analysis was written."""
    try:
        attribution = pl.read_parquet(out / "attribution.parquet")
        steps = pl.read_parquet(out / "steps.parquet")
    except OSError:
        schema = {
            "link": pl.String,
            "lo": pl.Float64,
            "hi": pl.Float64,
            "step_s": pl.Float64,
            "cost": pl.Float64,
        }
        return pl.DataFrame(schema=schema), None
    ranks = steps.group_by("step").agg(
        ranks=pl.len(),
        lo=pl.col("start_time").min().dt.epoch("us") / 1e6 - skew,
        hi=pl.col("end_time").max().dt.epoch("us") / 1e6 - skew,
        step_s=pl.col("duration_seconds").mean(),
    )
    cost = attribution.group_by("step", "link").agg(pl.col("attributed_seconds").sum())
    table = cost.join(ranks, on="step").select(
        "link", "lo", "hi", "step_s", cost=pl.col("attributed_seconds") / pl.col("ranks")
    )
    return table, os.path.getmtime(out / "attribution.parquet")


def episodes(result: dict[str, Any], threshold: float, share: float) -> list[dict[str, Any]]:
    """One row per network episode on a link: live and post-run detection."""
    out: Path = result["out"]
    truth = json.loads((out / "truth.json").read_text())
    table, written = post_run(out, float(truth["job"]["clock_skew_seconds"]))
    spans = [(e, _epoch(e["start_time"]), _epoch(e["end_time"])) for e in truth["episodes"] if _on_link(e)]
    rows = []
    for e, start, end in spans:
        link = e["link"]
        watch = end + AFTER_SECONDS
        blamed = [
            t for t, links in result["scrapes"] if start <= t <= watch and links.get(link, 0.0) > threshold
        ]
        before = [links.get(link, 0.0) for t, links in result["scrapes"] if t < start]
        row: dict[str, Any] = {
            "scenario": result["scenario"],
            "kind": e["kind"],
            "link": link,
            "start_s": round(e["start"], 1),
            "harmful": bool(e["affects_job"]),
            "live_s": round(blamed[0] - start, 1) if blamed else None,
            # The link already read above the threshold when the episode began (an earlier episode's
            # steps still among the recent ones): its delay is not this episode's own.
            "carried": bool(before) and before[-1] > threshold,
        }
        limit = pl.max_horizontal(pl.lit(threshold), share * pl.col("step_s"))
        hits = table.filter((pl.col("link") == link) & (pl.col("cost") > limit))
        hits = hits.filter((pl.col("hi") >= start) & (pl.col("lo") <= watch)).sort("hi")
        row["ideal_s"] = round(max(0.0, hits["hi"][0] - start), 1) if hits.height else None
        row["post_s"] = round(written - start, 1) if hits.height and written else None
        if not row["harmful"]:
            overlapped = any(
                o["affects_job"] and o["link"] == link and s0 <= watch and e0 + AFTER_SECONDS >= start
                for o, s0, e0 in spans
            )
            row["blamed"] = bool(blamed) and not overlapped
            row["post_blamed"] = bool(hits.height) and not overlapped
        rows.append(row)
    return rows


def false_alarms(result: dict[str, Any], threshold: float) -> int:
    """Scrapes where a link read above the threshold with no network episode on it (from its start to 15 s
    after its end): blame where the truth has no cause at all."""
    truth = json.loads((result["out"] / "truth.json").read_text())
    spans = [
        (e["link"], _epoch(e["start_time"]), _epoch(e["end_time"]) + AFTER_SECONDS)
        for e in truth["episodes"]
        if _on_link(e)
    ]
    return sum(
        1
        for t, links in result["scrapes"]
        for link, value in links.items()
        if value > threshold and not any(link == k and lo <= t <= hi for k, lo, hi in spans)
    )


def summary(rows: list[dict[str, Any]]) -> list[str]:
    harmful = [r for r in rows if r["harmful"]]
    harmless = [r for r in rows if not r["harmful"]]
    live = sum(1 for r in harmful if r["live_s"] is not None and r["live_s"] <= GOAL_SECONDS)
    own = [r for r in harmful if not r["carried"]]
    own_live = sum(1 for r in own if r["live_s"] is not None and r["live_s"] <= GOAL_SECONDS)
    ideal = sum(1 for r in harmful if r["ideal_s"] is not None and r["ideal_s"] <= GOAL_SECONDS)
    post = sum(1 for r in harmful if r["post_s"] is not None and r["post_s"] <= GOAL_SECONDS)
    delays = sorted(r["live_s"] for r in harmful if r["live_s"] is not None)
    median = delays[len(delays) // 2] if delays else None
    share = lambda n: f"{n}/{len(harmful)} ({n / max(1, len(harmful)):.0%})"  # noqa: E731
    return [
        f"harmful episodes shown on their link within {GOAL_SECONDS:g} s: live {share(live)} "
        f"(median delay {median} s); post-run analysis {share(post)} (its answer comes after the run); "
        f"post-run steps, as if read live: {share(ideal)}",
        f"  of which not carried over from an earlier episode on the link: live {own_live}/{len(own)}",
        f"harmless episodes whose link was blamed: live {sum(1 for r in harmless if r['blamed'])}/{len(harmless)}, "
        f"post-run {sum(1 for r in harmless if r['post_blamed'])}/{len(harmless)}",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="", help="run only scenarios whose name contains one of these (a,b)")
    p.add_argument("--jobs", type=int, default=2, help="scenarios run at once (each demo runs in real time)")
    p.add_argument("--threshold", type=float, default=0.005, help="seconds per step on a link that count")
    p.add_argument("--scrape", type=float, default=0.5, help="seconds between scrapes of follow's /metrics")
    p.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    p.add_argument(
        "--share",
        type=float,
        default=0.05,
        help="... or past this share of the step time, whichever is larger (the scorer's false-blame level)",
    )
    p.add_argument(
        "--gauge",
        choices=sorted(GAUGES),
        default="peak",
        help="the per-link figure that must pass the threshold: the recent steps' mean, or the worst one",
    )
    p.add_argument(
        "--replay",
        type=float,
        metavar="LAG",
        help="no demo: feed each finished run in --out to the live window second by second, its telemetry "
        "LAG seconds late (the same analysis as follow, without the real-time load)",
    )
    p.add_argument("--rescore", action="store_true", help="score the runs already in --out, run nothing")
    p.add_argument(
        "--runs",
        type=Path,
        default=None,
        help="with --replay: replay every run folder in this folder (e.g. bench_generalization.py --out DIR's "
        "DIR/runs) instead of the shipped scenarios' runs in --out",
    )
    args = p.parse_args()
    pick = functools.partial(_pick, gauge=args.gauge, threshold=args.threshold, share=args.share)
    paths = [path for path in sc.shipped() if any(p in path.stem for p in args.only.split(","))]
    with tempfile.TemporaryDirectory() as tmp:
        base = args.out or Path(tmp)
        if args.replay is not None:
            kept = [base / path.stem for path in paths if (base / path.stem / "truth.json").exists()]
            if args.runs is not None:  # recorded random runs (``bench_generalization.py --out``) instead
                kept = sorted(truth.parent for truth in args.runs.glob("*/truth.json"))
            results = [replay(out, args.replay, pick) for out in kept]
        elif args.rescore:
            results = [
                saved(base / path.stem, pick)
                for path in paths
                if (base / path.stem / "scrapes.json").exists()
            ]
        else:
            with ThreadPoolExecutor(args.jobs) as pool:
                results = list(pool.map(lambda path: run(path, base / path.stem, args.scrape, pick), paths))
        rows = [row for r in results if r["rc"] == 0 for row in episodes(r, args.threshold, args.share)]
        alarms = {r["scenario"]: false_alarms(r, args.threshold) for r in results if r["rc"] == 0}
        failed = [r["scenario"] for r in results if r["rc"] != 0]
    columns = [
        "scenario",
        "kind",
        "link",
        "start_s",
        "harmful",
        "live_s",
        "carried",
        "ideal_s",
        "post_s",
        "blamed",
    ]
    print(
        f"{GAUGES[args.gauge]} over max({args.threshold:g} s, {args.share:g} x step time); "
        "delays in seconds from the episode's start"
    )
    print(" | ".join(columns))
    print(" | ".join("---" for _ in columns))
    for row in rows:
        print(" | ".join("" if row.get(c) is None else str(row.get(c)) for c in columns))
    for line in summary(rows):
        print(line)
    noisy = {k: v for k, v in alarms.items() if v}
    print(f"scrapes with a link blamed and no episode on it: {sum(alarms.values())} {noisy or ''}")
    if failed:
        print(f"demo failed or hung (not scored): {', '.join(failed)}")


if __name__ == "__main__":
    main()
