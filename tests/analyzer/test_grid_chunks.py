"""The grid's amounts read a few links at a time (``analyzer.attribution.grid``) give the blame of reading
them at once: the synthetic fabric with a drop, a pause and a wave down on its two links, blamed with every
link in one chunk and with one link per chunk."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from synthetic_fabric import Episode, config_yaml, step_rows, steps_jsonl, write_archive

from analyzer import compare, physics
from analyzer.analysis import Analysis, AnalysisInputs
from analyzer.attribution import grid


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fabric")
    episodes = [
        Episode("drops", "a1", 60, 90),
        Episode("pfc", "b2", 150, 170),
        Episode("wave_down", "a2", 40, 70),
    ]
    write_archive(root / "archive", 240, episodes)
    rows = step_rows(240, episodes, ranks=2)
    for rank in range(2):
        steps_jsonl(root / f"rank{rank}.jsonl", [r for r in rows if r["rank"] == rank])
    config_yaml(root / "config.yaml")
    return root


def test_link_chunks_hold_whole_links_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    totals = pl.DataFrame(
        {"link": ["l1", "l1", "l2", "l2", "l3"], "device": ["a", "b", "a", "b", "a"], "time": [1, 2, 3, 4, 5]}
    )
    monkeypatch.setattr(physics, "CHUNK_ROWS", 30)
    chunks = [sorted(set(c["link"])) for c in grid.link_chunks(totals, cells=10)]
    assert chunks == [["l1"], ["l2", "l3"]]  # 20 rows, then 20 + 10
    monkeypatch.setattr(physics, "CHUNK_ROWS", 1)
    assert [c.height for c in grid.link_chunks(totals, cells=10)] == [2, 2, 1]  # a link alone past it
    assert [c.height for c in grid.link_chunks(totals.clear(), cells=10)] == [0]


def test_one_link_per_chunk_gives_the_same_analysis(fabric: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = AnalysisInputs(
        archive=fabric / "archive", logs=tuple(sorted(fabric.glob("*.jsonl"))), config=fabric / "config.yaml"
    )
    whole = Analysis(inputs).run()
    monkeypatch.setattr(physics, "CHUNK_ROWS", 1)
    chunked = Analysis(inputs).run()
    assert whole.attribution.height > 0
    assert compare.differences(whole, chunked) == []
