"""The StepLog helper writes what the steplog parser reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from analyzer.ingest import detect, parse_file
from analyzer.steplog import StepLog


class FakeClock:
    """Advances 250 ms per reading."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=250)
        return self.now


def test_steps_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "steps-rank3.jsonl"
    with StepLog(path, rank=3, clock=FakeClock()) as log:
        for n in range(3):
            with log.step(n):
                pass
    assert detect(path) == ["steplog"]
    result = parse_file(path)
    steps = result.table("steps")
    assert result.problems == []
    assert steps["step"].to_list() == [0, 1, 2]
    assert steps["rank"].to_list() == [3, 3, 3]
    assert steps["duration_seconds"].to_list() == pytest.approx([0.25, 0.25, 0.25])
    assert steps["start_time"][0] == datetime(2026, 11, 30, 10, 0, 0, 250000, tzinfo=UTC)


def test_a_failing_step_is_still_written(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    with StepLog(path, clock=FakeClock()) as log, pytest.raises(RuntimeError, match="boom"), log.step(7):
        raise RuntimeError("boom")
    assert parse_file(path).table("steps")["step"].to_list() == [7]


def test_writing_outside_the_context_is_an_error(tmp_path: Path) -> None:
    log = StepLog(tmp_path / "steps.jsonl")
    with pytest.raises(RuntimeError, match="not open"):
        log.record(1, datetime.now(UTC), datetime.now(UTC))


def test_collectives_timed_inside_a_step_are_its_logged_communication(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    with StepLog(path, clock=FakeClock()) as log:
        with log.step(1):  # start at 250 ms
            with log.collective():  # 500 -> 750 ms
                pass
            with log.collective():  # 1000 -> 1250 ms
                pass
        with log.step(2):
            pass
    steps = parse_file(path).table("steps")
    assert steps["logged_communication_seconds"].to_list() == [pytest.approx(0.5), None]
    assert steps["duration_seconds"].to_list() == pytest.approx([1.25, 0.25])


def test_a_collective_outside_a_step_is_an_error(tmp_path: Path) -> None:
    with (
        StepLog(tmp_path / "steps.jsonl") as log,
        pytest.raises(RuntimeError, match="inside step"),
        log.collective(),
    ):
        pass
