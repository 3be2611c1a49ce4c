"""The installed wheel, as a user gets it: built from the tracked files, installed with its runtime
dependencies only (no test extras) into a fresh venv whose own pip is counted, then the README's commands
run from folders outside the checkout with nothing of the checkout on the path.

It needs the package index (the locked versions, ``requirements.lock``) and takes one to three minutes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_install import GOAL_MB, size_mb  # noqa: E402

pytestmark = pytest.mark.timeout(600)


def _tracked_copy(target: Path) -> Path:
    """The checkout's tracked files (what a clone has: no build/ left over, no venv) copied to ``target``."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in listed.decode().split("\0"):
        source = ROOT / name
        if name and source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _clean_env() -> dict[str, str]:
    """This environment without the checkout on the path: with it, pip would take the checkout's metadata
    for an installed spanwatch and skip the wheel, and the commands would run the checkout's code."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _run(venv: Path, cwd: Path, *argv: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = _clean_env()
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [str(venv / "bin" / "spanwatch"), *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"spanwatch {' '.join(argv)}: rc {done.returncode}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def work() -> Iterator[Path]:
    """A folder of this module's own: pytest's temporary folders are pruned by any other pytest session on
    the machine, and the venv must outlive several minutes of tests."""
    folder = Path(tempfile.mkdtemp(prefix="spanwatch-wheel-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def installed(work: Path) -> Path:
    """A fresh venv with the wheel and its runtime dependencies (locked), and pip of its own."""
    source = _tracked_copy(work / "source")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "dist"), str(source)],
        check=True,
        timeout=300,
        env=_clean_env(),
    )
    (wheel,) = (work / "dist").glob("spanwatch-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120, env=_clean_env())
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    lock = str(ROOT / "requirements.lock")
    subprocess.run([*pip, "-c", lock, str(wheel)], check=True, timeout=400, env=_clean_env())
    assert (venv / "bin" / "spanwatch").is_file(), "the wheel's console script was not installed"
    return venv


def test_the_runtime_venv_fits_its_budget(installed: Path) -> None:
    assert size_mb(installed) <= GOAL_MB


def test_the_readme_commands_work_from_the_installed_wheel(installed: Path, work: Path) -> None:
    tmp_path = work / "commands"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(parents=True)
    listed = _run(installed, elsewhere, "demo", "--list-scenarios").stdout
    assert "two-vendors-overlap" in listed and "wave-down-reroute" in listed

    run = _run(
        installed,
        elsewhere,
        "demo",
        "--scenario",
        "two-vendors-overlap",
        "--time-scale",
        "0.4",
        "--out",
        "out",
    )
    assert "the answer:" in run.stdout and "vendor-a (switches)" in run.stdout

    # The report re-rendered from a copy of the folder, from yet another working directory.
    copied = shutil.copytree(elsewhere / "out", tmp_path / "copied")
    shutil.rmtree(elsewhere / "out")
    other = tmp_path / "other"
    other.mkdir()
    _run(installed, other, "report", str(copied))
    report = json.loads((copied / "report.json").read_text())
    verdicts = [claim["verdict"] for vendor in report["vendors"] for claim in vendor["claims"]]
    assert verdicts and set(verdicts) != {"no_data"}
    assert "no archive was analysed" not in (copied / "report.md").read_text()

    plan = _run(installed, other, "plan", "--distance-km", "100", "--links", "4", "--params", "70B", "--json")
    assert json.loads(plan.stdout)
