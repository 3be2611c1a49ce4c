"""The grid's amounts read a few links at a time (``analyzer.attribution.grid``) give the blame of reading
them at once: the synthetic fabric with a drop, a pause and a wave down on its two links, blamed with every
link in one chunk and with one link per chunk."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from synthetic_fabric import T0, Episode, config_yaml, step_rows, steps_jsonl, write_archive

from analyzer import compare, physics
from analyzer.analysis import Analysis, AnalysisInputs
from analyzer.attribution import episode, grid, steady, step_windows


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


def _one_link(rows: list[tuple[str, str, float, int]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Running totals of link l1's ends a and b from (device, quantity, total, second) rows, and its ends."""
    totals = pl.DataFrame(
        {
            "link": "l1",
            "device": [r[0] for r in rows],
            "quantity": [r[1] for r in rows],
            "time": [T0 + timedelta(seconds=r[3]) for r in rows],
            "total": [r[2] for r in rows],
        }
    ).with_columns(pl.col("time").cast(pl.Datetime("us", "UTC")))
    ends = pl.DataFrame(
        {"link": "l1", "device": ["a", "b"], "interfaces": [1, 1], "capacity": [4e9, 4e9]},
        schema_overrides={"interfaces": pl.UInt32},
    )
    return totals, ends


def test_an_end_whose_counters_never_move_is_read_from_one_cell() -> None:
    # One link: end a's job class sends 1 GB a second and is paused for a second; end b reads its counters
    # at the same times, and none moves. Read apart, b gives what reading it over every cell gives.
    seconds = range(0, 61)
    rows = (
        [("a", "sent", float(s) * 1e9, s) for s in seconds]
        + [("a", "paused", 0.0 if s < 30 else 1.0, s) for s in seconds]
        + [("b", quantity, 7.0, s) for quantity in ("sent", "paused") for s in seconds]
    )
    totals, ends = _one_link(rows)
    assert physics.still_ends(totals).rows() == [("l1", "b")]
    cells = episode.grid_windows(totals).with_columns(seconds_step=pl.lit(0.5))
    read = grid.read_amounts(cells, totals, ends, poll=1.0)
    every = physics.window_amounts(totals.lazy(), cells.lazy()).collect()
    rates = steady.job_rates(every)
    causing, down = episode.with_a_cause(
        episode.with_job_rates(every, rates), ends, round(1.0 / step_windows.cell_seconds(cells))
    )
    order = ["link", "device"]
    assert_frame_equal(read.rates.sort(order), rates.sort(order))
    assert_frame_equal(read.causing.sort(*order, "window"), causing.sort(*order, "window"))
    assert read.down.height == down.height == 0
    assert read.causing["device"].unique().to_list() == ["a"]


def test_a_sparse_senders_physics_is_where_it_exchanged_and_what_that_run_held() -> None:
    # End a pauses for the whole run and its class sends all along (another tenant's load one way); end b's
    # class sends only from 30 s to 31 s. The class crossed both ways, the job exchanged, only within a
    # poll of that second; the run of caused cells that holds it is the exchange's, a run without is not.
    seconds = range(0, 61)
    rows = (
        [("a", "sent", float(s) * 1e9, s) for s in seconds]
        + [("a", "paused", float(s), s) for s in seconds]
        + [("b", "sent", 0.0 if s <= 30 else 1e9, s) for s in seconds]
    )
    totals, ends = _one_link(rows)
    cells = episode.grid_windows(totals).with_columns(seconds_step=pl.lit(0.5))
    read = grid.read_amounts(cells, totals, ends, poll=1.0)
    exchanged = read.causing.filter("exchanged").join(cells, on="window")
    assert exchanged.height > 0
    assert exchanged["time"].min() >= T0 + timedelta(seconds=29)
    assert exchanged["time"].max() <= T0 + timedelta(seconds=32)
    # The pause is one run of caused cells over the whole run: it holds the exchange, so all of it stays.
    assert grid.exchanging(read.causing).height == read.causing.height
    # Cut the run in two: the part without an exchange leaves.
    cut = read.causing["window"].quantile(0.25, "nearest")
    gap = read.causing.filter(pl.col("window") != cut)
    kept = grid.exchanging(gap)
    assert kept.height == gap.filter(pl.col("window") > cut).height > 0
