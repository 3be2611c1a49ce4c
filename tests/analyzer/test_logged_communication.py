"""A step log that times its collectives is the blame's evidence before the step's duration.

On a loaded host a network episode can make compute quicker (fewer packets to forward) while the
collectives grow: the step grows by less than the network cost it. The logged communication time says
what the network cost; the step's duration only bounds it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from synthetic_fabric import Episode, config_yaml, step_rows, write_archive

from analyzer.analysis import Analysis, AnalysisInputs, AnalysisResult
from analyzer.ingest import parse_file

EPISODES = [Episode("drops", "a1", 60, 120)]
STEP_GROWTH = 0.2  # what the step's duration grew by during the episode
COMMUNICATION_GROWTH = 0.3  # what its collectives grew by: compute was 0.1 s quicker


def _log(path: Path, rows: list[dict[str, object]], with_communication: bool) -> Path:
    rng = np.random.default_rng(11)
    lines = []
    for row in rows:
        line = {k: row[k] for k in ("step", "rank", "start", "end")}
        if with_communication:
            grown = COMMUNICATION_GROWTH if row["true_link"] else 0.0
            line["comm_seconds"] = 0.25 + grown + float(rng.normal(0, 0.002))
            line["wait_seconds"] = 0.01
        lines.append(json.dumps(line) + "\n")
    path.write_text("".join(lines))
    return path


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, object]]]:
    root = tmp_path_factory.mktemp("fabric")
    write_archive(root / "archive", 180, EPISODES)
    config_yaml(root / "config.yml")
    return root, step_rows(180, EPISODES, penalty=STEP_GROWTH)


def _analyse(root: Path, log: Path) -> AnalysisResult:
    inputs = AnalysisInputs(
        archive=root / "archive",
        logs=(log,),
        config=root / "config.yml",
        skew_seconds=0.0,
        job_traffic_class="3",
    )
    return Analysis(inputs).run()


def _blamed_per_hit_step(analysis: AnalysisResult, rows: list[dict[str, object]]) -> float:
    hit = pl.DataFrame([{"step": r["step"], "rank": r["rank"]} for r in rows if r["true_link"]])
    blamed = analysis.attribution.group_by("step", "rank").agg(pl.col("attributed_seconds").sum())
    per_step = hit.join(blamed, on=["step", "rank"], how="left").fill_null(0.0)
    return float(per_step["attributed_seconds"].median())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("with_communication", "evidence", "blamed"),
    [(True, "communication", COMMUNICATION_GROWTH), (False, "step_time", STEP_GROWTH)],
)
def test_the_logged_communication_is_the_evidence_and_step_time_only_bounds_it(
    fabric: tuple[Path, list[dict[str, object]]],
    tmp_path: Path,
    with_communication: bool,
    evidence: str,
    blamed: float,
) -> None:
    root, rows = fabric
    analysis = _analyse(root, _log(tmp_path / "steps.jsonl", rows, with_communication))
    assert analysis.summary["blame"]["evidence"] == {evidence: len(rows)}
    assert _blamed_per_hit_step(analysis, rows) == pytest.approx(blamed, rel=0.1)
    # Either way the steps table keeps each step's own duration; the excess is the judged measure's.
    durations = pl.DataFrame([{"step": r["step"], "rank": r["rank"], "end": r["end"]} for r in rows])
    steps = analysis.steps.join(durations, on=["step", "rank"])
    logged = steps.select((pl.col("end").str.to_datetime(time_zone="UTC") - pl.col("end_time")).abs().max())
    assert logged.item().total_seconds() < 1e-5
    assert steps["duration_seconds"].median() == pytest.approx(1.0, abs=0.01)


def test_the_plain_log_reads_comm_and_wait_seconds(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text(
        '{"step": 1, "start": 10.0, "end": 10.5, "comm_seconds": 0.2, "wait_seconds": 0.05}\n'
        '{"step": 2, "start": 10.5, "end": 11.0, "communication_seconds": 0.3}\n'
        '{"step": 3, "start": 11.0, "end": 11.5}\n'
        '{"step": 4, "start": 11.5, "end": 12.0, "comm_seconds": -1}\n'
        '{"step": 5, "start": 12.0, "end": 12.5, "comm_seconds": 0.2, "wait_seconds": "soon"}\n'
        '{"step": 6, "start": 12.5, "end": 13.0, "comm_seconds": 0.4, "wait_seconds": 0.2}\n'
        '{"step": 7, "start": 13.0, "end": 13.5, "comm_seconds": NaN}\n'
    )
    result = parse_file(path)
    logged = result.table("steps")["logged_communication_seconds"].to_list()
    assert logged[:2] == pytest.approx([0.25, 0.3])
    assert logged[2] is None
    assert [(p.line, p.reason) for p in result.problems] == [
        (4, "'comm_seconds' is not a number of seconds >= 0"),
        (5, "'wait_seconds' is not a number of seconds >= 0"),
        (6, "'comm_seconds' + 'wait_seconds' exceed the step's own duration"),
        (7, "'comm_seconds' is not a number of seconds >= 0"),
    ]
