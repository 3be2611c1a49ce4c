"""``spanwatch analyze``: the analyzer (``analyzer.cli``), and with ``--truth`` the scored run and its control.

With ``--truth`` the analysis runs twice: as given into ``--out``, then with the step log shifted by
``spanwatch.score.CONTROL_SHIFT_FACTOR`` x the longest episode into ``--out/control/``; both are scored
(``spanwatch.score``) and the score is written to ``--out/score.json`` and printed. The wiring lives in the
shell so that the analyzer never imports the scorer, and the scorer never imports the analyzer.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from analyzer import cli as analyzer_cli
from analyzer.analysis import Analysis, AnalysisInputs
from spanwatch import score

SCORE_FILE = "score.json"


def arguments(p: argparse.ArgumentParser) -> None:
    """The analyzer's options, plus ``--truth``."""
    analyzer_cli.arguments(p)
    p.add_argument(
        "--truth",
        type=Path,
        help="a simulated fabric's truth.json: also runs the control and writes score.json (spanwatch score)",
    )


def scored(truth_path: Path, inputs: AnalysisInputs, out: Path) -> dict[str, Any]:
    """Run the control beside an analysis already written to ``out``, score both, write ``score.json``.

    Args:
        truth_path: ``truth.json``.
        inputs: the inputs the analysis in ``out`` was made from.
        out: the analysis folder.

    Returns:
        The score.

    Raises:
        ScoreError: the truth or an analysis table is unusable.
    """
    truth = score.read_truth(truth_path)
    shift = inputs.shift_logs_seconds + score.control_shift_seconds(truth)
    # No claims: the vendor report is the real run's; the control is only there to be scored.
    control = replace(inputs, claims=None, shift_logs_seconds=shift)
    Analysis(control).run().write(out / score.CONTROL)
    result = score.score(truth, out)
    (out / SCORE_FILE).write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result


def run(args: argparse.Namespace) -> int:
    """Run ``spanwatch analyze`` (see the module docstring).

    Args:
        args: the parsed command line.

    Returns:
        The exit status (0).

    Raises:
        AnalyzerError: an input is unusable.
        ConfigError: the collector config is invalid.
        ScoreError: the truth is unusable.
    """
    if args.truth is not None:
        score.read_truth(args.truth)  # a bad truth file fails before the long analysis, not after
    status = analyzer_cli.run(args)
    if args.truth is None:
        return status
    result = scored(args.truth, analyzer_cli.inputs_from(args), args.out)
    print(json.dumps(result, indent=2, default=str))
    return status
