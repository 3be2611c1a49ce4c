"""Stopping the subprocesses the integration tests start (Prometheus, snmpd, the collector)."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen[bytes], seconds: float) -> None:
    """Terminate ``proc`` and wait ``seconds`` for it to exit; kill it if it does not."""
    proc.terminate()
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
