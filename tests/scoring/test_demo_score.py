"""The scorer on a real short demo run: the control is made, shifted as called for, and fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spanwatch import score
from spanwatch.cli import main

pytestmark = pytest.mark.integration


def test_a_demo_run_is_scored_with_its_control(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--duration", "20", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "score: " in printed
    # The terminal ends with the answer: exposed time per link, the verdicts, the score.
    answer = printed[printed.index("the answer:") :]
    assert "link ab:" in answer and "Vendor A" in answer and "Vendor B" in answer
    assert answer.splitlines()[-1].startswith("report: ")
    result = json.loads((out / "score.json").read_text())
    assert set(score.GOALS) <= set(result)
    control = result["control"]
    assert control["shift_ok"], control
    assert control["fails_timing_goal"]
    assert control["step_error"] > result["step_error"]
    # The steady figures are measured (probed round trip, the job's bytes over the link's capacity).
    assert result["steady_error"] is not None and result["steady_error"] <= score.GOALS["steady_error"][1]
    # The README's first command must pass its own score (issue 29): the default demo's incast shows only
    # in the far switch's receive stage, which is read against its own floor, not the link's BDP.
    assert result["passed"], result["why"]
    # The same folders give the same score through the command.
    assert main(["score", "--truth", str(out / "truth.json"), "--analysis", str(out)]) == 0
    again = json.loads(capsys.readouterr().out)
    assert {k: again[k] for k in score.GOALS} == {k: result[k] for k in score.GOALS}
