"""A job of 4,096 ranks gives a report of the same size as one of 1,024: the ranks are rolled up, the slowest
named, never one row per rank (issue 31: thousands of ranks)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from analyzer.analysis import Analysis, AnalysisInputs
from analyzer.report.command import write_report
from analyzer.report.ranks import WORST_RANKS

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
SLOW = {17: 0.5, 2048: 0.3, 4095: 0.2}  # extra seconds a step of these ranks takes (when there are)


def _report(folder: Path, ranks: int) -> tuple[str, dict[str, object]]:
    """A logs-only analysis of ``ranks`` ranks x 4 one-second steps (one log), and its report."""
    lines = []
    for rank in range(ranks):
        clock = T0
        for step in range(4):
            end = clock + timedelta(seconds=1.0 + SLOW.get(rank, 0.0) + rank % 7 * 1e-3)
            lines.append(
                json.dumps({"step": step, "rank": rank, "start": clock.isoformat(), "end": end.isoformat()})
            )
            clock = end
    log = folder / "steps.jsonl"
    folder.mkdir()
    log.write_text("\n".join(lines) + "\n")
    # An unusable log per 32 ranks: the report counts them past a few, summary.json lists every one.
    broken = [folder / f"broken{i}.jsonl" for i in range(ranks // 32)]
    for path in broken:
        path.write_text("not a log\n")
    Analysis(AnalysisInputs(logs=(log, *broken))).run().write(folder / "analysis")
    write_report(folder / "analysis")
    report = json.loads((folder / "analysis" / "report.json").read_text())
    return (folder / "analysis" / "report.md").read_text(), report["ranks"]


def test_thousands_of_ranks_are_rolled_up_and_the_slowest_named(tmp_path: Path) -> None:
    few_md, few = _report(tmp_path / "few", 1024)
    many_md, many = _report(tmp_path / "many", 4096)
    assert (few["count"], many["count"]) == (1024, 4096)
    worst = many["worst"]
    assert isinstance(worst, list) and len(worst) == WORST_RANKS
    assert [w["rank"] for w in worst[:3]] == [17, 2048, 4095]  # slowest first
    assert worst[0]["over_median_seconds"] > 0.49
    assert "| 2048 |" in many_md and "4096 rank(s)" in many_md
    assert "108 more input(s)" in many_md  # 128 unusable logs, 20 listed
    # The same sections and rows: only the numbers in them differ.
    assert len(many_md.splitlines()) == len(few_md.splitlines())
    assert len(many_md) < len(few_md) + 1024
