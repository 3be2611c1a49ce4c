"""The scenario matrix: every shipped scenario through ``spanwatch demo --scenario``, one table row each.

With the scorer installed (``spanwatch score``, issue 12), each row is every figure it prints for the run
(``spanwatch score --truth OUT/truth.json --analysis OUT``), its control and whether it passed; without
it, the analyzer's own figures beside the truth's totals: network seconds the truth says episodes cost and
the seconds the analysis attributed, and the analyzer's event recall / precision.

Run: ``.venv/bin/python bench/bench_scenarios.py [--full] [--jobs 2] [--only PATTERN] [--out DIR]``.
``--full`` stretches every scenario 4x in time (``--time-scale 4``; the files are short for CI).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from spanwatch.cli import COMMANDS
from spanwatch.sim import scenario as sc

FULL_SCALE = 4.0


def run(path: Path, out: Path, scale: float) -> dict[str, Any]:
    """One demo run; its wall time and exit status."""
    start = time.monotonic()
    cmd = [sys.executable, "-m", "spanwatch.cli", "demo", "--scenario", str(path), "--out", str(out)]
    done = subprocess.run([*cmd, "--time-scale", str(scale)], capture_output=True, text=True, check=False)
    return {"scenario": path.stem, "wall_s": round(time.monotonic() - start, 1), "rc": done.returncode}


def score(out: Path) -> dict[str, Any]:
    """The scorer's figures for a run folder (flattened: control figures prefixed ``control.``)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "spanwatch.cli",
            "score",
            "--truth",
            str(out / "truth.json"),
            "--analysis",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        figures = json.loads(done.stdout)
    except ValueError:
        return {"score": f"failed ({done.returncode}): {done.stderr.strip()[-200:]}"}
    flat: dict[str, Any] = {}
    for key, value in figures.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items() if not isinstance(v, dict | list)})
        elif not isinstance(value, list):
            flat[key] = value
    return flat


def own_figures(out: Path) -> dict[str, Any]:
    """Without the scorer: the truth's and the analysis's totals, and the analyzer's own accuracy."""
    import polars as pl

    truth = json.loads((out / "truth.json").read_text())
    per_step: dict[int, float] = {}
    for row in truth["steps"]:
        per_step.setdefault(row["step"], row["network_seconds"]["total"])
    attributed = 0.0
    attribution = out / "attribution.parquet"
    if attribution.is_file():
        frame = pl.read_parquet(attribution)
        # job-wide rows and per-rank rows: per step, the mean over the ranks present (as the spec scores)
        attributed = float(
            frame.group_by("step", "rank")
            .agg(pl.col("attributed_seconds").sum())
            .group_by("step")
            .agg(pl.col("attributed_seconds").mean())["attributed_seconds"]
            .sum()
        )
    accuracy = json.loads((out / "summary.json").read_text()).get("accuracy") or {}
    return {
        "steps": len(per_step),
        "truth_network_s": round(sum(per_step.values()), 3),
        "attributed_s": round(attributed, 3),
        "event_recall": accuracy.get("event_recall"),
        "event_precision": accuracy.get("event_precision"),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--full", action="store_true", help=f"stretch every scenario {FULL_SCALE:g}x in time")
    p.add_argument("--jobs", type=int, default=2, help="scenarios run at once (the demo runs in real time)")
    p.add_argument("--only", default="", help="run only scenarios whose name contains this")
    p.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    args = p.parse_args()
    paths = [path for path in sc.shipped() if args.only in path.stem]
    scale = FULL_SCALE if args.full else 1.0
    with tempfile.TemporaryDirectory() as tmp:
        base = args.out or Path(tmp)
        with ThreadPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(lambda path: run(path, base / path.stem, scale), paths))
        scorer = "score" in COMMANDS
        for row in rows:
            if row["rc"] == 0:
                row.update(score(base / row["scenario"]) if scorer else own_figures(base / row["scenario"]))
        columns = list(dict.fromkeys(k for row in rows for k in row))
        print(
            ("scored by spanwatch score" if scorer else "no scorer: the analyzer's own figures")
            + f", time scale {scale:g}"
        )
        print(" | ".join(columns))
        print(" | ".join("---" for _ in columns))
        for row in rows:
            print(" | ".join(_cell(row.get(c)) for c in columns))


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return "" if value is None else str(value)


if __name__ == "__main__":
    main()
