"""What the analysis records about its inputs holds up: ``spanwatch report`` on a moved folder from another
working directory finds them, and logs that never meet the telemetry are said to, not read as a clean run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from spanwatch.cli import main


def _analyse(folder: Path, *extra: str) -> None:
    """``spanwatch analyze`` of a demo folder with paths as a user types them (relative to the cwd)."""
    name = folder.name
    argv = ["analyze", "--archive", f"{name}/archive", "--logs", f"{name}/steps.jsonl"]
    argv += ["--config", f"{name}/config.yaml", "--claims", f"{name}/claims.yaml", "--job-traffic-class", "3"]
    assert main([*argv, *extra, "--out", name]) == 0


def test_report_on_a_moved_folder_from_elsewhere_keeps_every_verdict(
    demo_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = tmp_path / "first"
    shutil.copytree(demo_dir, first / "run")
    monkeypatch.chdir(first)
    _analyse(first / "run")
    assert json.loads((first / "run" / "summary.json").read_text())["inputs"]["archive"] == "archive"
    before = json.loads((first / "run" / "report.json").read_text())

    moved = (first / "run").rename(tmp_path / "moved")  # the old relative paths lead nowhere now
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for name in ("report.json", "report.md", "report.html"):
        (moved / name).unlink()
    assert main(["report", str(moved)]) == 0

    after = json.loads((moved / "report.json").read_text())
    verdicts = [(c["id"], c["verdict"]) for v in after["vendors"] for c in v["claims"]]
    assert verdicts == [(c["id"], c["verdict"]) for v in before["vendors"] for c in v["claims"]]
    assert verdicts and {v for _, v in verdicts} != {"no_data"}
    assert "no archive was analysed" not in (moved / "report.md").read_text()


def test_logs_apart_from_the_telemetry_are_a_warning_not_a_clean_run(
    demo_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(demo_dir, tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    _analyse(tmp_path / "run", "--shift-logs", "1h")
    assert "do not overlap in time" in capsys.readouterr().err
    warnings = json.loads((tmp_path / "run" / "summary.json").read_text())["warnings"]
    assert [w["input"] for w in warnings if "do not overlap" in w["problem"]] == ["logs and telemetry"]
    assert "do not overlap in time" in (tmp_path / "run" / "report.md").read_text()


def test_overlapping_logs_and_telemetry_raise_no_such_warning(
    demo_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(demo_dir, tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    _analyse(tmp_path / "run")
    warnings = json.loads((tmp_path / "run" / "summary.json").read_text())["warnings"]
    assert not [w for w in warnings if "do not overlap" in w["problem"]]


def test_the_jobs_class_is_inferred_when_not_given_and_blames_as_given(
    demo_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = json.loads((demo_dir / "summary.json").read_text())["job_traffic_class"]
    assert (demo["value"], demo["source"]) == ("3", "given")  # the demo's summary names it
    shutil.copytree(demo_dir, tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    argv = ["analyze", "--archive", "run/archive", "--logs", "run/steps.jsonl", "--config", "run/config.yaml"]
    assert main([*argv, "--job-traffic-class", "3", "--out", "given"]) == 0
    capsys.readouterr()
    assert main([*argv, "--out", "inferred"]) == 0
    assert "job traffic class 3 (inferred: queue 3 carried" in capsys.readouterr().out
    given = json.loads((tmp_path / "given" / "summary.json").read_text())
    inferred = json.loads((tmp_path / "inferred" / "summary.json").read_text())
    assert (inferred["job_traffic_class"]["value"], inferred["job_traffic_class"]["source"]) == (
        "3",
        "inferred",
    )
    # The same figures; a group-by's summing order may move the last digit of a float (as between engines).
    assert _rounded(inferred["links"]) == _rounded(given["links"])


def _rounded(value: object) -> object:
    """``value`` with every float to 9 significant digits (the engines' agreement, 1e-9 relative)."""
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value
