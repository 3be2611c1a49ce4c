"""What the commands print: one logfmt line per record even for a multi-line message, and plain aligned
tables (no terminal library in the runtime install)."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spanwatch.cli import LogfmtFormatter, main


def test_a_multi_line_message_stays_one_logfmt_line() -> None:
    record = logging.LogRecord(
        "collector.daemon", logging.WARNING, __file__, 1, "reload rejected:\n  a\n  b", (), None
    )
    line = LogfmtFormatter().format(record)
    assert "\n" not in line
    assert line.endswith('msg="reload rejected:\\n  a\\n  b"')


def test_plan_prints_an_aligned_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--distance-km", "100", "--links", "4", "--params", "70B"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "spanwatch plan: latency and traffic budget"
    assert lines[1].split() == ["quantity", "value", "from"]
    assert set(lines[2].replace(" ", "")) == {"-"}


def test_a_worker_logs_in_the_supervisors_format(tmp_path: Path) -> None:
    """A worker that cannot start logs one logfmt line, the supervisor's format with ``worker=i/W``."""
    config = tmp_path / "missing.yaml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "collector.worker",
            "--config",
            str(config),
            "--worker",
            "1/2",
            "--relay-fd",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("ts=")]
    assert lines, done.stderr
    assert re.fullmatch(r'ts=\S+Z level=error logger=\S+ worker=1/2 msg="cannot start: .*"', lines[-1])
