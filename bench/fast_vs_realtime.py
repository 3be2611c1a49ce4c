"""Fast vs real-time recording: the scorer's figures of both paths side by side, per scenario (issue 29).

Each folder holds one demo output folder per scenario, named after the scenario file (what
``spanwatch demo --scenario examples/scenarios/NAME.yaml --out DIR/NAME`` and the same with ``--fast``
write). Prints a Markdown table: per scenario and figure, the real-time value, the fast one and their
difference, flagged where it exceeds the tolerance; then the real-time runs that did not keep up with the
wall clock (the model's steps, or the collector's gNMI stream, ended well before the scenario did, or
the model published its samples late: a loaded machine), whose figures say more about the machine than about the fast path.

Run: ``.venv/bin/python bench/fast_vs_realtime.py --realtime RT_DIR --fast FAST_DIR [--tolerance 0.02]``.
Several ``--realtime`` folders may be given (retries on a busy machine): per scenario, the first run that
kept up is used, else the first run.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

BEHIND_S = 2.0  # a run whose steps or gNMI samples end this much before its duration did not keep up
LATE_S = 0.5  # nor one whose model published gNMI samples this late (a keeping-up run: 0.15 s)


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _gnmi_timing(out: Path, t0: float) -> tuple[float | None, float | None]:
    """The last gNMI sample (seconds into the run) and how late they reach the collector (90th pct, s)."""
    end, late = (
        pl.scan_parquet(str(out / "archive" / "**" / "*.parquet"), hive_partitioning=True)
        .filter(pl.col("source") == "gnmi")
        .select(
            pl.col("time").max(),
            (pl.col("received_time") - pl.col("time")).dt.total_microseconds().quantile(0.9),
        )
        .collect()
        .row(0)
    )
    return (None if end is None else end.timestamp() - t0), (None if late is None else late / 1e6)


def kept_up(out: Path) -> tuple[str | None, float]:
    """Why a recording did not keep up with the wall clock (None when it did), and how late its gNMI
    samples were (the lesser evil among runs that all fell behind)."""
    truth = json.loads((out / "truth.json").read_text())
    t0, duration = _epoch(truth["start_time"]), float(truth["duration_seconds"])
    skew = float(truth["job"]["clock_skew_seconds"])
    steps_end = max((_epoch(s["end_time"]) - skew - t0 for s in truth["steps"]), default=0.0)
    reasons = []
    if steps_end < duration - BEHIND_S:
        reasons.append(f"steps end at {steps_end:.1f} s of {duration:g}")
    end, late = _gnmi_timing(out, t0)
    if end is not None and end < duration - BEHIND_S:
        reasons.append(f"gNMI ends at {end:.1f} s")
    if late is not None and late > LATE_S:
        reasons.append(f"gNMI samples reach the collector {late:.1f} s late (90th percentile)")
    return "; ".join(reasons) or None, (late or 0.0) + max(0.0, duration - steps_end)


def scores(folder: Path) -> dict[str, dict[str, Any]]:
    """Scenario name -> its ``score.json``."""
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(folder.glob("*/score.json"))}


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def table(realtime: list[Path], fast: Path, tolerance: float) -> tuple[list[str], int, int]:
    """The Markdown lines, and how many figures were compared and how many disagree."""
    fast_scores = scores(fast)
    runs: dict[str, list[tuple[tuple[bool, float], Path, dict[str, Any]]]] = {}
    for folder in realtime:
        for name, score in scores(folder).items():
            why, late = kept_up(folder / name)
            runs.setdefault(name, []).append(((why is not None, late), folder / name, score))
    # per scenario: a run that kept up, else the one least behind
    rt_scores = {name: min(found, key=lambda run: run[0])[1:] for name, found in runs.items()}
    # the scorer's figures, in its order, as each score.json names them (``goals``)
    figures = list(dict.fromkeys(f for _, s in rt_scores.values() for f in s["goals"]))
    lines = [
        "| scenario | " + " | ".join(figures) + " | passed |",
        "|---|" + "---|" * (len(figures) + 1),
    ]
    compared = disagree = 0
    behind: list[str] = []
    for name in sorted(set(fast_scores) & set(rt_scores)):
        folder, rt = rt_scores[name]
        fs = fast_scores[name]
        cells = []
        for figure in figures:
            a, b = rt.get(figure), fs.get(figure)
            cell = f"{_cell(a)} / {_cell(b)}"
            if a is not None and b is not None:
                compared += 1
                if abs(a - b) > tolerance:
                    disagree += 1
                    cell = f"**{cell}**"
            elif a is not None or b is not None:
                disagree += 1
                cell = f"**{cell}**"
            cells.append(cell)
        cells.append(f"{'yes' if rt.get('passed') else 'no'} / {'yes' if fs.get('passed') else 'no'}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
        why, _ = kept_up(folder)
        if why is not None:
            behind.append(f"- {name}: the real-time run fell behind ({why})")
    lines.append("")
    lines.append(
        f"Each cell: real-time / fast. {disagree} of {compared} figures differ by more than {tolerance:g} (bold)."
    )
    if behind:
        lines += ["", *behind]
    return lines, compared, disagree


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--realtime", type=Path, action="append", required=True, help="real-time demo folders")
    p.add_argument("--fast", type=Path, required=True, help="fast demo folders")
    p.add_argument("--tolerance", type=float, default=0.02)
    args = p.parse_args()
    lines, _, _ = table(args.realtime, args.fast, args.tolerance)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
