"""Steps x events: baseline, inflation, attribution to links, per-link exposed latency, measures."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from synthetic_fabric import Episode, config_yaml, step_rows, steps_jsonl, write_archive

from analyzer import schemas
from analyzer.analysis import Analysis, AnalysisInputs
from analyzer.thresholds import Thresholds

EPISODES = [
    Episode("drops", "a1", 100, 130),
    Episode("pfc", "b2", 200, 215),
    Episode("ecn", "b1", 400, 420),  # marks alone do not slow the synthetic job
    Episode("wave_down", "a1", 520, 540),
]


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, object]]]:
    root = tmp_path_factory.mktemp("fabric")
    write_archive(root / "archive", 600, EPISODES, resets={"a2": 250})
    rows = step_rows(600, EPISODES)
    steps_jsonl(root / "steps.jsonl", rows)
    config_yaml(root / "config.yml")
    return root, rows


@pytest.fixture(scope="module")
def result(fabric: tuple[Path, list[dict[str, object]]]):  # type: ignore[no-untyped-def]
    root, _ = fabric
    inputs = AnalysisInputs(
        archive=root / "archive",
        logs=(root / "steps.jsonl",),
        config=root / "config.yml",
        gpus=64,
        job_traffic_class="3",  # the synthetic fabric's queues and PFC priority
    )
    return Analysis(inputs).run()


def test_inflated_steps_are_attributed_to_the_right_link(result, fabric) -> None:  # type: ignore[no-untyped-def]
    _, rows = fabric
    truth = pl.DataFrame(rows).select("step", "rank", "true_link")
    joined = result.steps.join(truth, on=["step", "rank"])
    slowed = joined.filter(pl.col("true_link").is_not_null())
    assert slowed["inflated"].mean() >= 0.95
    assert (slowed["top_link"] == slowed["true_link"]).mean() >= 0.95
    clean = joined.filter(pl.col("true_link").is_null())
    assert clean["inflated"].mean() <= 0.02


def test_baseline_is_the_median_of_clean_steps(result) -> None:  # type: ignore[no-untyped-def]
    assert result.steps["baseline_seconds"].to_list() == pytest.approx([1.0] * result.steps.height, abs=0.005)


def test_per_link_exposed_latency_matches_the_injected_slowdown(result, fabric) -> None:  # type: ignore[no-untyped-def]
    _, rows = fabric
    truth = (
        pl.DataFrame(rows)
        .filter(pl.col("true_link").is_not_null())
        .group_by(link="true_link")
        .agg(true=pl.col("penalty").sum() / 2)  # two ranks: the mean over ranks per step
    )
    joined = result.links.join(truth, on="link")
    assert joined.height == 2
    for row in joined.iter_rows(named=True):
        # The synthetic job charges its whole penalty to a step that touches an episode by a nanosecond;
        # the physics charges an edge step in proportion to the episode's part of it: 10 %, not 5 %.
        assert row["exposed_total_seconds"] == pytest.approx(row["true"], rel=0.10)
        assert row["gpu_hours_lost"] == pytest.approx(row["exposed_total_seconds"] * 64 / 3600)
    assert result.attribution.schema == schemas.ATTRIBUTION


def test_measures_per_link_device_and_vendor(result) -> None:  # type: ignore[no-untyped-def]
    m = {(r["scope"], r["key"], r["measure"]): r["value"] for r in result.measures.iter_rows(named=True)}
    # a1: 500 drops/s for 30 s over 600 s at 6.25e9 B/s -> 15000 / 3.75 TB = 4000 per TB; l1 halves it (b1 clean)
    assert m[("device", "a1", "dropped_packets_per_terabyte")] == pytest.approx(4000, rel=1e-3)
    assert m[("link", "l1", "dropped_packets_per_terabyte")] == pytest.approx(2000, rel=1e-3)
    assert m[("link", "l2", "dropped_packets_per_terabyte")] == 0.0  # the reset on a2 adds nothing
    # b2 paused 0.2 s per second for 15 s in 600 s -> 3 s in 1/6 h = 18 s/h
    assert m[("device", "b2", "pfc_pause_seconds_per_hour")] == pytest.approx(18, rel=1e-3)
    assert m[("label:vendor", "vendor-a", "queue_watermark_p99_bytes")] == pytest.approx(
        2e4, rel=0.01
    )  # histogram
    assert m[("device", "a1", "link_utilization_p99")] == pytest.approx(0.5, rel=0.01)
    assert m[("device", "a1", "osnr_min_db")] == 33.0
    assert m[("device", "a1", "pre_fec_ber_max")] == pytest.approx(1e-7)
    assert m[("device", "a1", "wave_down_seconds")] == pytest.approx(20)
    assert m[("run", "all", "event_count")] == 4
    assert m[("link", "l1", "exposed_latency_p99_seconds")] == pytest.approx(0.3, abs=0.02)
    assert m[("link", "l1", "exposed_latency_p50_seconds")] == 0.0
    assert m[("run", "all", "step_time_inflation_ratio")] > 1.0


def test_logs_alone_give_the_step_analysis(fabric) -> None:  # type: ignore[no-untyped-def]
    root, _ = fabric
    result = Analysis(AnalysisInputs(logs=(root / "steps.jsonl",))).run()
    assert result.events.height == 0
    assert result.steps.height > 0
    assert result.steps["baseline_seconds"].null_count() == 0


def test_telemetry_alone_gives_the_events(fabric) -> None:  # type: ignore[no-untyped-def]
    root, _ = fabric
    result = Analysis(AnalysisInputs(archive=root / "archive", thresholds=Thresholds())).run()
    assert sorted(result.events["kind"].to_list()) == ["drops", "ecn", "pfc", "wave_down"]
    assert result.steps.height == 0
