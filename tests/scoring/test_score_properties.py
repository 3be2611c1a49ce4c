"""Properties: a perfect analysis scores no error; E = (1 + x) T scores step_error |x|."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scoring_frames import STEPS, scaled, truth_doc, write_analysis, write_truth

from spanwatch import score

costs_strategy = st.dictionaries(
    st.integers(0, STEPS - 1),
    st.dictionaries(st.sampled_from(["L1", "L2", "L3"]), st.floats(1e-4, 2.0), min_size=1),
    min_size=1,
    max_size=20,
)


def _score(costs: dict[int, dict[str, float]], estimate: dict[int, dict[str, float]]) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        truth = write_truth(root / "truth.json", truth_doc(costs=costs))
        folder = write_analysis(root / "analysis", costs=estimate)
        return score.figures(score.read_truth(truth), score.read_analysis(folder))


@settings(max_examples=25, deadline=None)
@given(costs_strategy)
def test_a_perfect_analysis_scores_no_error(costs: dict[int, dict[str, float]]) -> None:
    result = _score(costs, costs)
    for name in ("step_error", "false_blame", "link_error", "misplaced_blame"):
        assert result[name] == pytest.approx(0.0, abs=1e-9), name


@settings(max_examples=25, deadline=None)
@given(costs_strategy, st.floats(-0.99, 3.0))
def test_scaling_the_estimate_gives_its_factor_as_step_error(
    costs: dict[int, dict[str, float]], x: float
) -> None:
    result = _score(costs, scaled(costs, 1 + x))
    assert result["step_error"] == pytest.approx(abs(x), rel=1e-9, abs=1e-9)
    assert result["misplaced_blame"] == pytest.approx(0.0, abs=1e-9)
