"""``spanwatch lab``'s last lines: whether its score passed, and that a kernel without netem ran it at zero
distance (no namespaces needed: the lines come from the files the lab writes)."""

from __future__ import annotations

import json
from pathlib import Path

from spanwatch.lab.command import conclusion


def _write(out: Path, netem: bool, passed: bool, why: list[str]) -> None:
    (out / "truth.json").write_text(json.dumps({"lab": {"netem": netem}}))
    (out / "score.json").write_text(json.dumps({"passed": passed, "why": why}))


def test_a_failed_score_and_a_zero_distance_run_are_said(tmp_path: Path) -> None:
    _write(tmp_path, netem=False, passed=False, why=["event_recall: 0.5 is not >= 0.95"])
    lines = conclusion(tmp_path)
    assert (
        lines[-1] == "lab: score failed: event_recall: 0.5 is not >= 0.95 (against the lab's measured truth)"
    )
    assert [line for line in lines if "warning: no netem" in line and "zero distance" in line]


def test_a_passed_score_with_netem_says_only_that(tmp_path: Path) -> None:
    _write(tmp_path, netem=True, passed=True, why=[])
    lines = conclusion(tmp_path)
    assert lines[-1] == "lab: score passed (against the lab's measured truth)"
    assert not [line for line in lines if "warning" in line]
