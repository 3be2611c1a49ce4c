"""How well can an interval line's network time be placed on its steps? Three yardsticks from the truth.

A log line every N iterations gives their mean; ``step_error`` is scored per step (scenarios.md), so the
analyzer must say which of the N steps the network held. This bench asks what is possible at the
telemetry's resolution, from each kept random run's ``truth.json`` alone: every line's *true* network time
placed on its steps three ways, scored with ``step_error``'s formula (per step, mean over ranks):

- ``even``: the line's time spread evenly over its steps (no placement at all);
- ``poll, even steps``: by the true network time per poll interval (each step's own spread over its span),
  the steps taken as equal parts of the line's span: what perfect physics at the poll's resolution gives
  with nothing known of where inside the line the steps lay;
- ``poll, true steps``: the same with the steps' true start and end: what it gives with the steps' clock
  known, i.e. with the host clock's skew and each step's length right.

And how well the logs pin the hosts' clock: the skews (within the spec's +-3 s) under which the true network
time per poll, integrated over each line's span, correlates with the lines' true network time at least as
well as under the true skew (``skew_set``, seconds from the true skew). Where that set is wider than a step,
even perfect physics and perfect logs cannot tell which step of a line a stall held.

Beside them the analysis's own ``step_error`` and ``line_error`` (the same figure over whole lines), from a
rows file of ``bench_generalization.py`` or its re-analysis. A run right per line (``line_error`` <= 0.15)
but wrong per step lost it in placement.

Run: ``.venv/bin/python bench/bench_placement.py --runs DIR [--rows FILE] [--poll 1]``, DIR a
``bench_generalization.py --out`` folder; FILE its rows (default ``DIR/rows.jsonl``).
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

RIGHT = 0.15  # the step_error goal (scenarios.md)
SKEW_SPAN = 3.0  # the skews a scenario draws: -3 s .. +3 s (scenarios.md)
SKEW_RESOLUTION = 0.05  # seconds between the skews tried


def seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def truth_steps(truth: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per step (sorted): number, mean start and end over ranks, mean network seconds over ranks."""
    by_step: dict[int, list[tuple[float, float, float]]] = {}
    for row in truth["steps"]:
        cost = row["network_seconds"]["total"]
        by_step.setdefault(row["step"], []).append(
            (seconds(row["start_time"]), seconds(row["end_time"]), cost)
        )
    numbers = np.array(sorted(by_step))
    mean = np.array([np.mean(by_step[int(k)], axis=0) for k in numbers])
    return numbers, mean[:, 0], mean[:, 1], mean[:, 2]


def overlap(lo: np.ndarray, hi: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Seconds of each [lo, hi) in each interval of ``edges`` (steps x intervals)."""
    left = np.maximum(lo[:, None], edges[None, :-1])
    right = np.minimum(hi[:, None], edges[None, 1:])
    return np.clip(right - left, 0.0, None)


def yardsticks(truth: dict[str, Any], poll: float) -> dict[str, float] | None:
    """The three placements' step_error for one run (None without interval lines or network time)."""
    every = truth["job"]["log_every"]
    numbers, start, end, cost = truth_steps(truth)
    total = cost.sum()
    if every < 2 or total <= 0:
        return None
    line = (numbers - 1) // every
    edges = np.arange(start.min(), end.max() + poll, poll)
    per_poll = (cost[:, None] * overlap(start, end, edges) / np.maximum(end - start, 1e-9)[:, None]).sum(0)

    def placed(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        density = (overlap(lo, hi, edges) * per_poll[None, :] / poll).sum(1)
        out = np.zeros_like(cost)
        for one in np.unique(line):
            mine = line == one
            weights = density[mine] if density[mine].sum() > 0 else np.ones(mine.sum())
            out[mine] = cost[mine].sum() * weights / weights.sum()
        return out

    even_lo, even_hi = start.copy(), end.copy()
    for one in np.unique(line):
        idx = np.flatnonzero(line == one)
        a, b, n = start[idx].min(), end[idx].max(), len(idx)
        even_lo[idx] = a + (b - a) * np.arange(n) / n
        even_hi[idx] = a + (b - a) * (np.arange(n) + 1) / n
    even = np.concatenate([np.full((line == one).sum(), cost[line == one].mean()) for one in np.unique(line)])

    def error(estimate: np.ndarray) -> float:
        return float(np.abs(estimate - cost).sum() / total)

    low, high = skew_set(start, end, cost, line, np.concatenate([[0.0], np.cumsum(per_poll)]), edges, truth)
    return {
        "even": error(even),
        "poll_even_steps": error(placed(even_lo, even_hi)),
        "poll_true_steps": error(placed(start, end)),
        "steps_per_poll": poll / float(np.median(end - start)),
        "skew_low": low,
        "skew_high": high,
        "skew_set_steps": (high - low) / float(np.median(end - start)),
    }


def skew_set(
    start: np.ndarray,
    end: np.ndarray,
    cost: np.ndarray,
    line: np.ndarray,
    integral: np.ndarray,
    edges: np.ndarray,
    truth: dict[str, Any],
) -> tuple[float, float]:
    """The skews that explain the lines' network time at least as well as the true one (seconds from it).

    ``integral`` is the true network time up to each of ``edges`` (polls, on the hosts' clock as the steps
    are): a skew s other than the true one reads each line's span ``s - true`` later on the switches."""
    lines = np.unique(line)
    lo = np.array([start[line == one].min() for one in lines])
    hi = np.array([end[line == one].max() for one in lines])
    total = np.array([cost[line == one].sum() for one in lines])
    true_skew = float(truth["job"]["clock_skew_seconds"])

    def fit(offset: float) -> float:
        physics = np.interp(hi - offset, edges, integral) - np.interp(lo - offset, edges, integral)
        if physics.std() == 0 or total.std() == 0:
            return -1.0
        return float(np.corrcoef(total, physics)[0, 1])

    at_truth = fit(0.0)
    skews = np.arange(-SKEW_SPAN, SKEW_SPAN + SKEW_RESOLUTION / 2, SKEW_RESOLUTION)
    fits = [skew - true_skew for skew in skews if fit(skew - true_skew) >= at_truth - 1e-9]
    return (min(fits), max(fits)) if fits else (0.0, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--rows", type=Path)
    parser.add_argument("--poll", type=float, default=1.0)
    args = parser.parse_args()
    rows = [
        json.loads(text) for text in (args.rows or args.runs / "rows.jsonl").read_text().splitlines() if text
    ]
    print(
        "seed,every,steps_per_poll,step_error,line_error,even,poll_even_steps,poll_true_steps,skew_set,skew_set_steps"
    )
    counts = {"runs": 0, "right per line": 0, "of those, right per step": 0}
    counts |= {"poll, even steps right": 0, "poll, true steps right": 0, "skew pinned within a step": 0}
    counts |= {"of those, skew pinned and true steps right": 0}
    for row in rows:
        if row.get("quiet") or not row.get("truth_visible"):
            continue
        truth = json.loads((args.runs / "runs" / f"random-{row['seed']}" / "truth.json").read_text())
        got = yardsticks(truth, args.poll)
        if got is None:
            continue
        line_error = row.get("line_error") or 0.0
        print(
            f"{row['seed']},{truth['job']['log_every']},{got['steps_per_poll']:.1f},{row['step_error']:.2f},"
            f"{line_error:.2f},{got['even']:.2f},{got['poll_even_steps']:.2f},{got['poll_true_steps']:.2f},"
            f"{got['skew_low']:+.2f}..{got['skew_high']:+.2f},{got['skew_set_steps']:.1f}"
        )
        counts["runs"] += 1
        counts["skew pinned within a step"] += got["skew_set_steps"] < 1
        if line_error <= RIGHT:
            counts["right per line"] += 1
            counts["of those, right per step"] += row["step_error"] <= RIGHT
            counts["poll, even steps right"] += got["poll_even_steps"] <= RIGHT
            counts["poll, true steps right"] += got["poll_true_steps"] <= RIGHT
            pinned = got["skew_set_steps"] < 1
            counts["of those, skew pinned and true steps right"] += pinned and got["poll_true_steps"] <= RIGHT
    print("# runs with interval lines and visible cost: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
