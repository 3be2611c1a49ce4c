"""The step-time chart draws each step's time over its own length from its start: a long step is a plateau
as long as the step, not a ramp from the step before it to the step after it."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.cbook import STEP_LOOKUP_MAP
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from analyzer.report import charts
from analyzer.report.model import Timeline

# Two 1 s steps, one 12 s step (from 2 s to 14 s), two 1 s steps: the step-time panel of a run with one
# step the network stalled.
STARTS = [0.0, 1.0, 2.0, 14.0, 15.0]
SECONDS = [1.0, 1.0, 12.0, 1.0, 1.0]


def drawn(line: Line2D) -> tuple[np.ndarray, np.ndarray]:
    """The vertices matplotlib draws for a line, its draw style applied."""
    x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    return STEP_LOOKUP_MAP[line.get_drawstyle()](x, y)  # type: ignore[no-any-return]


def height_at(x: np.ndarray, y: np.ndarray, at: float) -> float:
    """The drawn curve's height at ``at``, inside one of its segments (not at a vertex)."""
    for i in range(len(x) - 1):
        if x[i] < at < x[i + 1]:
            return float(y[i] + (y[i + 1] - y[i]) * (at - x[i]) / (x[i + 1] - x[i]))
    raise AssertionError(f"nothing drawn at {at}")


@pytest.fixture
def step_line(monkeypatch: pytest.MonkeyPatch) -> Line2D:
    figures: list[Figure] = []
    svg = charts._svg

    def keep(figure: Figure) -> str:
        figures.append(figure)
        return svg(figure)

    monkeypatch.setattr(charts, "_svg", keep)
    charts.timeline(Timeline(None, list(range(len(STARTS))), STARTS, SECONDS, [1.0] * len(STARTS), []))
    (figure,) = figures
    (line,) = [ln for ax in figure.axes for ln in ax.get_lines() if ln.get_label() == "step time"]
    return line


def test_a_long_step_is_a_plateau_over_its_own_length(step_line: Line2D) -> None:
    x, y = drawn(step_line)
    for at in (2.5, 8.0, 13.5):  # across the 12 s step: its time, flat
        assert height_at(x, y, at) == pytest.approx(12_000.0)
    for at in (0.5, 1.5, 14.5, 15.5):  # the 1 s steps around it keep theirs
        assert height_at(x, y, at) == pytest.approx(1_000.0)


def test_the_change_between_steps_is_vertical_at_the_step_start(step_line: Line2D) -> None:
    x, y = drawn(step_line)
    rises = [(x[i], x[i + 1]) for i in range(len(x) - 1) if y[i + 1] != y[i]]
    assert rises == [(2.0, 2.0), (14.0, 14.0)]
