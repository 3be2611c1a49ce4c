"""The fast recording with its model in a second process against the same recording in one process.

The model's process steps the next snapshot while the recorder does the collector's work on the last one
(``spanwatch.fast_model``): that must change no byte of what the recording writes (truth, the job's log,
the last exposition) and no archive row, and a model that fails must fail the recording with its reason.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from spanwatch import fast_model
from spanwatch.fast import record
from spanwatch.fast_model import ModelError, stepped
from spanwatch.fast_schedule import Lookahead, ScheduleError
from spanwatch.sim import scenario as scenarios
from spanwatch.sim.fabric import Fabric

EPOCH_S = 1_790_000_000.25


def _archive(out: Path) -> pl.DataFrame:
    frame = pl.read_parquet(str(out / "archive" / "**" / "*.parquet"), hive_partitioning=True)
    return frame.sort(frame.columns, nulls_last=True)


@pytest.mark.parametrize("name", ["wave-down-reroute", "incast-lossy-shallow"])
def test_a_model_in_another_process_records_the_same(name: str, tmp_path: Path) -> None:
    path = scenarios.shipped_named(name)
    assert path is not None
    s = scenarios.scaled(scenarios.load(path), 0.4)
    one = record(s, tmp_path / "one", epoch_s=EPOCH_S, model_process=False)
    two = record(s, tmp_path / "two", epoch_s=EPOCH_S, model_process=True)
    for file in ("truth.json", "metrics.txt", one.log.name):
        assert (tmp_path / "one" / file).read_bytes() == (tmp_path / "two" / file).read_bytes(), file
    assert two.log == tmp_path / "two" / one.log.name
    a, b = _archive(tmp_path / "one"), _archive(tmp_path / "two")
    assert a.height > 1000 and a.equals(b, null_equal=True)
    # The model's final state came back: the truth the caller reads is the stepped model's.
    assert two.sim.truth() == one.sim.truth() and two.sim.steps


def test_the_recorder_follows_the_model_time_step_for_step() -> None:
    """``stepped`` (the recorder's count) ends where ``Fabric.step`` ends, to the bit, on a long run."""
    f = Fabric(scenarios.builtin(5.0))
    now, due = f.t, 0.0
    for k in range(40):
        due = now + 0.1 + 0.03 * ((k * 7919) % 13) / 13
        now = stepped(now, f.dt, due)
        while f.t + f.dt <= due + fast_model.TOLERANCE_S:
            f.step()
        assert f.t == now


def test_a_failing_model_fails_the_recording_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> object:
        raise RuntimeError("the model broke here")

    monkeypatch.setattr(fast_model, "advance", broken)  # the forked process inherits the patch
    with pytest.raises(ModelError, match="the model broke here"):
        record(scenarios.builtin(3.0), tmp_path, epoch_s=EPOCH_S, model_process=True)


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_a_killed_demo_leaves_no_process_behind(tmp_path: Path) -> None:
    """SIGKILL on ``demo --fast`` mid-recording: its model and report processes see their pipes close and
    end (no cleanup of the demo's runs then)."""
    cmd = [
        sys.executable,
        "-m",
        "spanwatch.cli",
        "demo",
        "--fast",
        "--duration",
        "120",
        "--out",
        str(tmp_path),
    ]
    demo = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(children := _children(demo.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(children) == 2, children  # the report's process, the model's
    finally:
        demo.kill()
        demo.wait()
    deadline = time.monotonic() + 30
    while (alive := [c for c in children if Path(f"/proc/{c}").exists() and not _zombie(c)]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert not alive


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return False


def test_the_planned_snapshot_times_are_the_ones_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model is given every snapshot time up front (``fast_schedule``); the recorder draws each one
    anyway and stops at the first that differs: planned times a hair off fail the recording."""
    real = Lookahead.snapshot_times
    planned: list[list[float]] = []

    def spy(self: Lookahead, *args: Any) -> list[float]:
        planned.append(real(self, *args))
        return planned[-1]

    monkeypatch.setattr(Lookahead, "snapshot_times", spy)
    record(scenarios.builtin(4.0), tmp_path / "right", epoch_s=EPOCH_S, model_process=False)
    assert len(planned[0]) > 30 and planned[0] == sorted(planned[0])

    def off(self: Lookahead, *args: Any) -> list[float]:
        dues = real(self, *args)
        dues[20] = math.nextafter(dues[20], math.inf)
        return dues

    monkeypatch.setattr(Lookahead, "snapshot_times", off)
    with pytest.raises(ScheduleError, match="planned"):
        record(scenarios.builtin(4.0), tmp_path / "wrong", epoch_s=EPOCH_S, model_process=True)
