"""``spanwatch analyze`` end to end: outputs, the score against truth, real training logs, user errors."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from synthetic_fabric import DEVICE_LINK, T0, Episode, config_yaml, step_rows, steps_jsonl, write_archive

from spanwatch.cli import main

EPISODES = [
    Episode("drops", "a1", 60, 90),
    Episode("pfc", "b2", 150, 170),
    Episode("wave_down", "a2", 220, 235),
    Episode("ecn", "b1", 260, 280),
]
KIND = {"drops": "congestion", "pfc": "incast", "wave_down": "wave_down", "ecn": "congestion"}


def _stamp(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def write_truth(path: Path, rows: list[dict[str, object]]) -> Path:
    """A truth.json as the scenario spec writes it, for the synthetic fabric's episodes and steps."""
    episodes = [
        {
            "kind": KIND[e.kind],
            "start_time": _stamp(e.start),
            "end_time": _stamp(e.end),
            "link": DEVICE_LINK[e.device],
            "devices": [e.device],
            "interfaces": ["Ethernet1"],
            "queues": [] if e.kind == "wave_down" else ["3"],
            "affects_job": e.kind != "ecn",
        }
        for e in EPISODES
    ]
    steps = [
        {
            "step": r["step"],
            "rank": r["rank"],
            "start_time": r["start"],
            "end_time": r["end"],
            "by_link": {str(r["true_link"]): r["penalty"]} if r["true_link"] else {},
        }
        for r in rows
    ]
    path.write_text(json.dumps({"episodes": episodes, "steps": steps, "links": {}}))
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("run")
    write_archive(root / "archive", 300, EPISODES)
    rows = step_rows(300, EPISODES)
    steps_jsonl(root / "steps.jsonl", rows, bad_lines=3)
    config_yaml(root / "config.yml")
    write_truth(root / "truth.json", rows)
    (root / "claims.yml").write_text(
        "vendors:\n  - name: A\n    match: {vendor: vendor-a}\n    claims:\n"
        "      - {id: x, text: t, measure: exposed_latency_p99_seconds, op: '<=', value: 0.001}\n"
    )
    return root


def test_analyze_writes_every_output_and_reports_accuracy(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    status = main(
        [
            "analyze",
            "--archive",
            str(run_dir / "archive"),
            "--logs",
            str(run_dir / "steps.jsonl"),
            "--config",
            str(run_dir / "config.yml"),
            "--claims",
            str(run_dir / "claims.yml"),
            "--truth",
            str(run_dir / "truth.json"),
            "--skew",
            "50ms",
            "--gpus",
            "32",
            "--out",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert status == 0, captured.err
    for name in ("steps", "events", "attribution"):
        assert (out / f"{name}.parquet").is_file()
    steps = pl.read_parquet(out / "steps.parquet")
    assert {"step", "rank", "start_time", "end_time", "duration_seconds"} <= set(steps.columns)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skew_seconds"] == pytest.approx(0.05)
    assert summary["malformed_lines"]["count"] == 3
    assert "steps.jsonl:" in summary["malformed_lines"]["first"][0]
    assert "3 malformed log line(s)" in captured.err
    result = json.loads((out / "score.json").read_text())
    assert result["event_recall"] == 1.0
    assert result["event_precision"] == 1.0
    assert result["misplaced_blame"] < 0.05
    assert result["control"]["shift_ok"]  # 10 x the longest episode (30 s)
    assert result["control"]["expected_shift_seconds"] == pytest.approx(300.0)
    assert result["control"]["step_error"] == pytest.approx(1.0)  # no step meets an event any more
    assert result["control"]["fails_timing_goal"]
    assert not result["passed"]  # no steady figures: the truth has none and the analysis measures none
    assert (out / "control" / "attribution.parquet").is_file()
    assert not (out / "control" / "report.html").exists()
    assert '"passed": false' in captured.out
    assert summary["measures"]["label:vendor"]["vendor-a"]["dropped_packets_per_terabyte"] > 0


def test_analyze_real_training_logs(training_data: Path, run_dir: Path, tmp_path: Path) -> None:
    logs = [
        training_data / "bigscience" / "meg_gpt2_base_n4_dp1_tp4_pp4-1809579.out",
        training_data / "deepspeed" / "opt-1.3b-globalBatchSize128.log",
        training_data / "hta" / "sampled_rank-0.json.gz",
        training_data / "hta" / "sampled_rank-1.json.gz",
    ]
    out = tmp_path / "out"
    status = main(
        ["analyze", "--archive", str(run_dir / "archive"), "--logs", *map(str, logs), "--out", str(out)]
    )
    assert status == 0
    steps = pl.read_parquet(out / "steps.parquet")
    assert steps.height > 20
    summary = json.loads((out / "summary.json").read_text())
    assert {"megatron", "deepspeed", "kineto"} <= set(summary["inputs"]["log_formats"])
    assert summary["crosscheck"]["steps"] >= 2  # the Kineto traces give exposed communication per step


def test_a_beat_and_a_skew_the_user_gives_are_used(run_dir: Path, tmp_path: Path) -> None:
    """``--job-beat``: a checkpoint every 40 steps and an outer sync every 25 (on steps 7, 32, ...), and
    ``--skew`` (negative: the hosts' clock behind), as the user knows them; the analysis uses them instead
    of searching the log for them."""
    out = tmp_path / "out"
    argv = ["analyze", "--archive", str(run_dir / "archive"), "--logs", str(run_dir / "steps.jsonl")]
    given = ["--job-beat", "40", "25:7", "--skew=-1.25s"]
    status = main([*argv, "--config", str(run_dir / "config.yml"), *given, "--out", str(out)])
    assert status == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["blame"]["job_beat"] == [{"every_steps": 40, "phase": 0}, {"every_steps": 25, "phase": 7}]
    assert summary["skew_seconds"] == pytest.approx(-1.25)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--archive", "missing-dir"], "--archive: not found"),
        (["--logs", "missing.log"], "file not found"),
        ([], "nothing to analyse"),
        (["--logs", "{steps}", "--skew", "50"], "not a duration"),
        (["--logs", "{steps}", "--gpus", "0"], "must be a positive number"),
        (["--logs", "{steps}", "--claims", "{bad_claims}"], "unknown measure 'latency'"),
        (["--logs", "{steps}", "--truth", "{bad_truth}"], "not valid JSON"),
        (["--logs", "{steps}", "--thresholds", "{bad_thresholds}"], "nope"),
        (["--logs", "{unknown}"], "not a recognised training log"),
        (["--archive", "{empty}"], "no Parquet files"),
        (["--logs", "{steps}", "--job-beat", "50:50"], "EVERY must be at least 2 and AT in 0..EVERY-1"),
        (["--logs", "{steps}", "--job-beat", "every50"], "not EVERY or EVERY:AT"),
        (["--logs", "{steps}", "--skew=--1s"], "not a duration"),
    ],
)
def test_bad_input_is_a_clear_error(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    files = {
        "steps": run_dir / "steps.jsonl",
        "bad_claims": tmp_path / "claims.yml",
        "bad_truth": tmp_path / "truth.json",
        "bad_thresholds": tmp_path / "t.yml",
        "unknown": tmp_path / "x.txt",
        "empty": tmp_path / "empty",
    }
    files["bad_claims"].write_text("vendors:\n  - claims: [{measure: latency, op: '<=', value: 1}]\n")
    files["bad_truth"].write_text("{not json")
    files["bad_thresholds"].write_text("nope: 1\n")
    files["unknown"].write_text("hello\nworld\n")
    files["empty"].mkdir()
    args = [a.format(**{k: str(v) for k, v in files.items()}) for a in argv]
    status = main(["analyze", *args, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 1
    assert message in err
    assert "Traceback" not in err
