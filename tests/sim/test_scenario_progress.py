"""The shipped scenarios' run is never silent: a line per scenario reaches pytest's terminal as its demo
ends, while pytest captures the output (its default), not only with a failure's captured output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = ("first", "second", "third")
# A pytest run of its own, with the demos replaced by instant fake runs, so only the announcing is tested.
FAKE_RUNS = f"""
from pathlib import Path

import pytest

from tests.sim.scenario_runs import Run, run_all, terminal_line


@pytest.fixture(scope="module")
def runs(tmp_path_factory, pytestconfig):
    paths = [Path(name + ".yaml") for name in {SCENARIOS!r}]
    return run_all(
        paths, tmp_path_factory.mktemp("s"), 2, terminal_line(pytestconfig), lambda p, out: Run(out, 0, "", 1.0)
    )


def test_every_scenario_ran(runs):
    assert sorted(runs) == sorted({SCENARIOS!r})
"""


def test_each_scenario_is_announced_on_the_terminal_as_it_ends(tmp_path: Path) -> None:
    (tmp_path / "test_fake_scenarios.py").write_text(FAKE_RUNS)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("scenario ")]
    assert sorted(line.split(":")[0] for line in lines) == sorted(f"scenario {name}" for name in SCENARIOS)
    assert all(": exit 0 after 1 s (" in line for line in lines), lines
    assert sorted(line.rsplit("(", 1)[1] for line in lines) == ["1/3)", "2/3)", "3/3)"]
