"""The blame's step side worked a few ranks at a time (``analyzer.attribution.pipeline.by_ranks``: peak memory
at thousands of ranks) gives the blame of working every rank at once: the synthetic fabric with a drop, a
pause and a wave down, three ranks (one logging every five steps), blamed in one part and one rank per part."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from synthetic_fabric import Episode, config_yaml, step_rows, steps_jsonl, write_archive

from analyzer import compare, physics
from analyzer.analysis import Analysis, AnalysisInputs
from analyzer.attribution import pipeline

EVERY = 5  # rank 2 logs one line per this many steps


def _every(path: Path, rows: list[dict[str, object]]) -> None:
    """Steps as interval lines of ``EVERY`` steps each (the last step, the first's start, the last's end)."""
    with path.open("w") as out:
        for k in range(0, len(rows) - EVERY + 1, EVERY):
            first, last = rows[k], rows[k + EVERY - 1]
            line = {"step": last["step"], "rank": last["rank"], "start": first["start"], "end": last["end"]}
            out.write(json.dumps({**line, "interval_steps": EVERY}) + "\n")


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fabric")
    episodes = [
        Episode("drops", "a1", 60, 90),
        Episode("pfc", "b2", 150, 170),
        Episode("wave_down", "a2", 40, 70),
    ]
    write_archive(root / "archive", 240, episodes)
    rows = step_rows(240, episodes, ranks=3)
    for rank in range(3):
        mine = [r for r in rows if r["rank"] == rank]
        if rank == 2:
            _every(root / f"rank{rank}.jsonl", mine)
        else:
            steps_jsonl(root / f"rank{rank}.jsonl", mine)
    config_yaml(root / "config.yaml")
    return root


def test_parts_hold_whole_ranks_in_rank_order_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = pl.DataFrame({"rank": [2, 0, 1, 0, 2, 3], "step": [1, 1, 1, 2, 2, 1], "n": [1, 1, 4, 1, 1, 1]})
    monkeypatch.setattr(physics, "STEP_CHUNK_ROWS", 4)
    parts = pipeline.by_ranks(lines)
    # Rank 0 (2 step rows), then rank 1 alone (4: 2 + 4 is past the budget), then ranks 2 and 3 (2 + 1).
    assert [sorted(set(p["rank"])) for p in parts] == [[0], [1], [2, 3]]
    # Each line keeps its place among all the lines, and the parts hold every line once.
    assert sorted(pl.concat(parts)["order"]) == list(range(lines.height))
    assert pipeline.in_order(parts).equals(lines)
    assert len(pipeline.by_ranks(lines.clear())) == 1


def test_one_rank_per_part_gives_the_same_analysis(fabric: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = AnalysisInputs(
        archive=fabric / "archive", logs=tuple(sorted(fabric.glob("*.jsonl"))), config=fabric / "config.yaml"
    )
    whole = Analysis(inputs).run()
    monkeypatch.setattr(physics, "STEP_CHUNK_ROWS", 1)
    parted = Analysis(inputs).run()
    assert whole.attribution.height > 0
    assert whole.summary["blame"]["interval_lines"] > 0
    # What bounds placement inside those lines, for the report: the poll against a typical iteration.
    assert whole.summary["blame"]["poll_seconds"] == pytest.approx(1.0, rel=0.1)
    assert 0 < whole.summary["blame"]["typical_step_seconds"] < 5
    assert sorted(set(whole.attribution["rank"])) == [0, 1, 2]
    assert compare.differences(whole, parted) == []
    # The same rows in the same order, not only the same set.
    assert whole.steps.equals(parted.steps)


def test_the_parsed_steps_are_not_kept_by_the_analysis(fabric: Path) -> None:
    """The blame is handed the parsed steps (``Analysis._correlate``): the parse result keeps none after."""
    inputs = AnalysisInputs(archive=fabric / "archive", logs=(fabric / "rank0.jsonl",))
    analysis = Analysis(inputs)
    seen = {}
    parse = analysis._parse_logs

    def parsed() -> object:
        logs = parse()
        seen["result"] = logs.result
        return logs

    analysis._parse_logs = parsed  # type: ignore[method-assign]
    result = analysis.run()
    assert result.steps.height > 0
    assert seen["result"].table("steps").height == 0  # type: ignore[attr-defined]
