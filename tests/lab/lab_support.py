"""What the lab tests share: whether this machine can run the lab, and the command that runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def need_namespaces() -> None:
    """Skip, saying why, when this process cannot create network namespaces."""
    if os.geteuid() != 0:
        pytest.skip("the lab needs root: it creates network namespaces, veth pairs and qdiscs")
    from spanwatch.lab import netns

    reason = netns.can_create()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable here: {reason}")


def lab_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "spanwatch", "lab", *args]


def lab_env() -> dict[str, str]:
    """The test's own tree first on the path, as the subprocesses the lab starts need it too."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def lab_namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith("swlab-")]
