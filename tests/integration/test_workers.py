"""``spanwatch collect --workers 2`` (issue 18): one merged ``/metrics``, one archive, a dead worker restarted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
import yaml

from collector import shard
from spanwatch.sim.commands import free_port
from tests.integration.snmp_agents import copy_recordings, snmpsim
from tests.integration.test_daemon import _scrape, _wait_until

pytestmark = pytest.mark.integration

DEVICES = [f"sw{i}" for i in range(4)]
WORKERS = 2


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[int]:
    with snmpsim(copy_recordings(tmp_path / "data", ["arista_eos"])) as port:
        yield port


def _config(tmp_path: Path, agent: int, listen: int) -> dict[str, object]:
    (tmp_path / "community").write_text("arista_eos\n")
    return {
        "collector": {
            "listen": f"127.0.0.1:{listen}",
            "archive": {"path": str(tmp_path / "archive"), "flush_interval": "500ms"},
        },
        "defaults": {"interval": "2s", "timeout": "2s"},
        "targets": [
            {
                "name": name,
                "labels": {"site": "a" if i % 2 else "b"},
                "snmp": {
                    "address": f"127.0.0.1:{agent}",
                    "community_file": "community",
                    "modules": ["if_mib"],
                },
            }
            for i, name in enumerate(DEVICES)
        ],
        "links": [
            {
                "name": "l1",
                "site_a": "a",
                "site_b": "b",
                "distance_km": 100,
                "members": [{"device": d, "interface": "Ethernet1"} for d in DEVICES[:2]],
            }
        ],
    }


def _up(text: str, device: str) -> str | None:
    m = re.search(rf'spanwatch_target_up\{{device="{device}",source="snmp"\}} (\S+)', text)
    return m.group(1) if m else None


def _polled(text: str, device: str) -> bool:
    """Whether ``device`` has had a successful poll (snmpsim on a loaded machine may time out now and then)."""
    return f'spanwatch_polls_total{{device="{device}",source="snmp",status="success"}}' in text


def _workers(pid: int) -> list[int]:
    """The supervisor's worker processes (its children running ``collector.worker``), by index."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) != pid or b"collector.worker" not in cmdline:
            continue
        index = cmdline[cmdline.index(b"--worker") + 1].decode().split("/")[0]
        found[int(index)] = int(entry.name)
    return [found[i] for i in sorted(found)]


def test_workers_merge_one_exposition_and_restart_a_dead_worker(tmp_path: Path, agent: int) -> None:
    listen = free_port()
    cfg_path = tmp_path / "spanwatch.yaml"
    cfg_path.write_text(yaml.safe_dump(_config(tmp_path, agent, listen)))
    log = (tmp_path / "collector.log").open("w")
    cmd = [sys.executable, "-m", "spanwatch.cli", "collect", "--config", str(cfg_path), "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        text = _wait_until(listen, lambda t: all(_polled(t, d) for d in DEVICES), "every target polled", 60)
        # One exposition: each family announced once, whichever workers feed it.
        types = [line for line in text.splitlines() if line.startswith("# TYPE ")]
        assert len(types) == len(set(types))
        for device in DEVICES:
            assert f'dci_interface_receive_bytes_total{{device="{device}"' in text
        assert 'dci_link_info{link="l1"' in text  # the link series, from the workers' members
        assert "spanwatch_archive_rows_total " in text  # summed over the workers

        # The targets really are split: each worker holds the ones hashmod gives it.
        pids = _workers(proc.pid)
        assert len(pids) == WORKERS
        victim = 0
        theirs = [d for d in DEVICES if shard.worker_of(d, WORKERS) == victim]
        others = [d for d in DEVICES if d not in theirs]
        assert theirs and others, "the test devices should land on both workers"

        # Killed only once it has flushed a file, so the archive holds the old worker's rows beside the
        # restarted one's (on a loaded machine the first flush can come late).
        deadline = time.monotonic() + 30
        while not any(f"-{pids[victim]}-" in p.name for p in (tmp_path / "archive").rglob("*.parquet")):
            assert time.monotonic() < deadline, "the worker never flushed its archive"
            time.sleep(0.2)
        os.kill(pids[victim], signal.SIGKILL)
        text = _wait_until(
            listen,
            lambda t: all(_up(t, d) == "0" for d in theirs),
            "the dead worker's targets down",
        )
        assert all(_polled(text, d) for d in others)  # the other worker's series stay
        assert not any(_polled(text, d) for d in theirs)  # the dead worker's are withdrawn
        assert f'spanwatch_worker_restarts_total{{worker="{victim}"}} 1' in text
        # Restarted: its targets come back, polled by a new process.
        _wait_until(listen, lambda t: all(_polled(t, d) for d in DEVICES), "every target polled again", 60)
        assert _workers(proc.pid)[victim] != pids[victim]

        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(30) == 0
        assert not _workers(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _workers(proc.pid):
            os.kill(pid, signal.SIGKILL)
        log.close()
    output = (tmp_path / "collector.log").read_text()
    assert "Traceback" not in output
    archive = pl.read_parquet(tmp_path / "archive", hive_partitioning=True)
    assert set(archive["device"]) == set(DEVICES)  # one layout, every worker's files
    writers = {p.name.rsplit("-", 1)[0] for p in (tmp_path / "archive").rglob("*.parquet")}
    assert len(writers) >= WORKERS + 1  # two workers, and the one restarted
    assert not list((tmp_path / "archive").rglob(".*.tmp"))
    with pytest.raises(OSError):
        _scrape(listen)  # the supervisor closed its server
