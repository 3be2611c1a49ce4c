"""The README's two commands are what ``./dev`` provides, and ``.ci/run`` runs the same test command.

The commands are extracted from the README's "The two commands" section and dry-run (``./dev -n``: what
would be installed and run, nothing changed), so a README edit or a ``./dev`` change that drifts apart
fails here. The lock file pins every package the extras name.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    """The shell lines of the README's "The two commands" section, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def dry_run(*argv: str) -> list[str]:
    env = {**os.environ, "SPANWATCH_VENV": "/nonexistent/venv"}  # never this checkout's venv
    out = subprocess.run(["sh", "./dev", "-n", *argv], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_the_readme_prints_the_two_dev_commands() -> None:
    assert readme_commands() == ["./dev demo", "./dev test"]


def test_dev_demo_sets_up_the_runtime_from_the_lock_then_runs_the_demo() -> None:
    lines = dry_run(*readme_commands()[0].split()[1:])
    assert "/nonexistent/venv/bin/python -m pip install -q -c requirements.lock -e ." in lines
    assert lines[-1] == "/nonexistent/venv/bin/spanwatch demo --duration 60 --out out"


def test_dev_test_sets_up_the_test_extras_then_runs_pytest() -> None:
    lines = dry_run(*readme_commands()[1].split()[1:])
    assert any(line.endswith("-c requirements.lock -e .[test,hta,generator,lab,ray,s3]") for line in lines)
    assert lines[-1] == "/nonexistent/venv/bin/python -m pytest"
    assert dry_run("test", "-q", "tests/x")[-1] == "/nonexistent/venv/bin/python -m pytest -q tests/x"


def test_ci_runs_the_same_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == readme_commands()[1]


def test_help_and_syntax() -> None:
    assert subprocess.run(["sh", "-n", "./dev"], cwd=ROOT).returncode == 0
    out = subprocess.run(["sh", "./dev", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and "./dev demo" in out.stdout
    assert subprocess.run(["sh", "./dev", "bogus"], cwd=ROOT, capture_output=True).returncode == 2


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_lock_pins_every_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        wanted |= {_name(r) for r in extra}
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    pinned = {_name(line) for line in lines if "==" in line and not line.startswith("#")}
    assert wanted - pinned == set(), "run ./dev lock after changing pyproject.toml"


def test_a_python_without_venv_support_gets_python3_venv(tmp_path: Path) -> None:
    """Debian's python3 has no ensurepip until python3-venv is installed: ./dev installs it (as root) or
    names it, instead of failing in ``python -m venv``."""
    fake = tmp_path / "python3.11"
    fake.write_text('#!/bin/sh\ncase "$2" in *ensurepip*) exit 1 ;; *) exit 0 ;; esac\n')
    fake.chmod(0o755)
    env = {**os.environ, "SPANWATCH_VENV": "/nonexistent/venv", "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run(["sh", "./dev", "-n", "demo"], cwd=ROOT, env=env, capture_output=True, text=True)
    if os.getuid() == 0:
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        install = next(i for i, line in enumerate(lines) if "apt-get install" in line)
        assert lines[install].endswith("python3.11-venv")
        assert install < lines.index(f"{fake.name} -m venv /nonexistent/venv")
    else:
        assert out.returncode == 1 and "install Debian's python3.11-venv" in out.stderr
