"""The lab leaves nothing behind: a killed run's namespaces and processes are removed by the next, and a
SIGINT removes everything before the lab exits (root and network namespaces needed, else skipped)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab_support import lab_command, lab_env, lab_namespaces, need_namespaces

from spanwatch.lab import netns

pytestmark = pytest.mark.integration
SHORT = Path(__file__).resolve().parents[2] / "examples" / "lab" / "short.yaml"


@pytest.fixture
def alone() -> Iterator[None]:
    """Root, namespaces, and no other lab running (cleanup would take its namespaces)."""
    need_namespaces()
    try:
        with netns.Lock():
            pass
    except netns.LabError as e:
        pytest.skip(str(e))
    yield
    netns.cleanup()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def _lab_pids() -> list[int]:
    return [p for ns in lab_namespaces() for p in netns.pids(ns)]


def test_cleanup_removes_a_killed_runs_namespaces_and_processes(alone: None) -> None:
    subprocess.run(["ip", "netns", "add", "swlab-left-over"], check=True)
    sleeper = subprocess.Popen(
        ["ip", "netns", "exec", "swlab-left-over", "sleep", "600"], start_new_session=True
    )
    time.sleep(0.3)
    assert sleeper.pid in netns.pids("swlab-left-over")
    removed = netns.cleanup()
    assert "swlab-left-over" in removed
    assert sleeper.wait(5) is not None
    assert lab_namespaces() == []


def _start_lab(tmp_path: Path) -> subprocess.Popen[bytes]:
    argv = lab_command("--config", str(SHORT), "--out", str(tmp_path), "--no-analyze")
    with (tmp_path / "lab.err").open("wb") as err:
        return subprocess.Popen(argv, env=lab_env(), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err)


def _wait_for_job(tmp_path: Path, lab: subprocess.Popen[bytes]) -> list[int]:
    """Wait until the control run's ranks are up; returns every pid inside the lab's namespaces."""
    deadline = time.monotonic() + 90
    while not (tmp_path / "control-run" / "steps.rank0.jsonl").exists():
        assert lab.poll() is None, (tmp_path / "lab.err").read_text()
        assert time.monotonic() < deadline, "the lab's control run did not start"
        time.sleep(0.2)
    pids = _lab_pids()
    assert len(pids) >= 8  # 2 snmpd, 2 agents, 2 iperf3 servers, 4 ranks
    return pids


@pytest.mark.timeout(180)
def test_sigint_removes_everything(alone: None, tmp_path: Path) -> None:
    lab = _start_lab(tmp_path)
    pids = _wait_for_job(tmp_path, lab)
    lab.send_signal(signal.SIGINT)
    assert lab.wait(60) == 130
    assert lab_namespaces() == []
    assert [p for p in pids if _alive(p)] == []


@pytest.mark.timeout(180)
def test_a_run_after_a_killed_one_cleans_up_first(alone: None, tmp_path: Path) -> None:
    lab = _start_lab(tmp_path)
    pids = _wait_for_job(tmp_path, lab)
    lab.kill()  # SIGKILL: the lab cannot clean up; its namespaces and processes stay
    lab.wait(10)
    assert lab_namespaces()
    # What the next run does before anything else (spanwatch.lab.command.Lab.run):
    assert netns.cleanup()
    assert lab_namespaces() == []
    assert [p for p in pids if _alive(p)] == []
