"""The systemd unit: `systemd-analyze verify` accepts it and its security exposure is at most 2.0."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "spanwatch.service"
ANALYZE = shutil.which("systemd-analyze")
pytestmark = pytest.mark.skipif(
    ANALYZE is None, reason="systemd-analyze is not installed (apt-get install systemd)"
)
MAX_EXPOSURE = 2.0


def _local_copy(tmp_path: Path) -> Path:
    """The unit with ExecStart pointing at an executable that exists here (verify checks the path)."""
    spanwatch = shutil.which("spanwatch") or str(Path(__file__).resolve().parents[2] / ".venv/bin/spanwatch")
    if not Path(spanwatch).is_file():
        pytest.skip("the spanwatch console script is not installed")
    text = UNIT.read_text().replace("/opt/spanwatch/bin/spanwatch", spanwatch)
    copy = tmp_path / UNIT.name
    copy.write_text(text)
    return copy


def test_unit_verifies(tmp_path: Path) -> None:
    assert ANALYZE is not None
    result = subprocess.run(
        [ANALYZE, "verify", str(_local_copy(tmp_path))], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "spanwatch.service" not in result.stderr, result.stderr  # warnings about the unit itself


def test_unit_exposure_is_low(tmp_path: Path) -> None:
    assert ANALYZE is not None
    result = subprocess.run(
        [
            ANALYZE,
            "security",
            "--offline=yes",
            f"--threshold={int(MAX_EXPOSURE * 10)}",
            str(_local_copy(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    m = re.search(r"Overall exposure level for spanwatch\.service: ([0-9.]+)", result.stdout)
    assert m is not None, result.stdout + result.stderr
    assert float(m[1]) <= MAX_EXPOSURE, result.stdout
    assert result.returncode == 0, result.stdout + result.stderr


def test_unit_is_hardened_as_promised() -> None:
    text = UNIT.read_text()
    for line in (
        "DynamicUser=yes",
        "ProtectSystem=strict",
        "CapabilityBoundingSet=\n",
        "NoNewPrivileges=yes",
    ):
        assert line in text
    assert re.search(r"^LoadCredential=", text, re.M)


def test_unit_sets_a_descriptor_limit_above_the_exporter_connection_cap() -> None:
    from collector.exporters.http import Limits

    m = re.search(r"^LimitNOFILE=(\d+)$", UNIT.read_text(), re.M)
    assert m is not None, "the unit must set LimitNOFILE (the default soft limit is 1024)"
    assert int(m[1]) >= 4 * Limits().max_connections
