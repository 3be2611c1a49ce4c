"""Helpers that start SNMP peers for the integration tests: snmpsim on a free port, tiny fake UDP agents."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from spanwatch.sim.commands import free_port

TESTDATA = Path(__file__).resolve().parents[2].parent / "shared" / "testdata"


def free_udp_port() -> int:
    """A UDP port nobody listens on right now."""
    return free_port(socket.SOCK_DGRAM)


def recordings() -> Path:
    """The shared SNMP recordings, or skip."""
    folder = TESTDATA / "snmp"
    if not folder.is_dir():
        pytest.skip(f"shared test data not found at {folder}")
    return folder


def _answers(port: int) -> bool:
    probe = bytes.fromhex("302602010104067075626c6963a019020400000001020100020100300b3009060500000000000500")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.2)
        s.sendto(probe, ("127.0.0.1", port))
        try:
            s.recv(2048)
        except OSError:
            return False
    return True


@contextmanager
def snmpsim(data_dir: Path) -> Iterator[int]:
    """Run snmpsim-command-responder over ``data_dir`` on 127.0.0.1; yields the port."""
    exe = Path(sys.executable).parent / "snmpsim-command-responder"
    if not exe.exists():
        pytest.skip("snmpsim-command-responder is not installed in this environment")
    port = free_udp_port()
    env = {**os.environ, "SNMPSIM_ALLOW_ROOT": "true"}
    (data_dir / "public.snmprec").write_text("1.3.6.1.2.1.1.5.0|4|probe\n")
    proc = subprocess.Popen(
        [
            str(exe),
            f"--data-dir={data_dir}",
            f"--agent-udpv4-endpoint=127.0.0.1:{port}",
            f"--cache-dir={data_dir / '.cache'}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not _answers(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("snmpsim did not start")
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(5)


def copy_recordings(dest: Path, names: list[str] | None = None) -> Path:
    """Copy the shared recordings (all, or ``names``) into ``dest`` (test time only, never the repo)."""
    src = recordings()
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.glob("*.snmprec"):
        if names is None or f.stem in names:
            shutil.copy(f, dest / f.name)
    return dest
