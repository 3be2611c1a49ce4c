"""``spanwatch collect`` end to end: real snmpsim agents, a dead target, SIGHUP reloads, SIGTERM flush."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pytest
import yaml

from spanwatch.sim.commands import free_port
from tests.integration.snmp_agents import copy_recordings, free_udp_port, snmpsim

pytestmark = pytest.mark.integration


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[int]:
    with snmpsim(copy_recordings(tmp_path / "data", ["arista_eos"])) as port:
        yield port


def _config(tmp_path: Path, agent: int, listen: int, **live_labels: str) -> dict[str, object]:
    (tmp_path / "community").write_text("arista_eos\n")
    return {
        "collector": {
            "listen": f"127.0.0.1:{listen}",
            "archive": {"path": str(tmp_path / "archive"), "flush_interval": "500ms"},
        },
        "defaults": {"interval": "1s", "timeout": "1s"},
        "targets": [
            {
                "name": "live",
                "labels": {"site": "a", **live_labels},
                "snmp": {
                    "address": f"127.0.0.1:{agent}",
                    "community_file": "community",
                    "modules": ["if_mib"],
                },
            },
            # Nothing listens there: every poll fails, and must not slow "live" down.
            {
                "name": "dead",
                "labels": {"site": "b"},
                "snmp": {"address": f"127.0.0.1:{free_udp_port()}", "community_file": "community"},
            },
        ],
        "links": [
            {
                "name": "l1",
                "site_a": "a",
                "site_b": "b",
                "distance_km": 100,
                "members": [{"device": "live", "interface": "Ethernet1"}],
            }
        ],
    }


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def _wait_until(port: int, ready: Callable[[str], bool], what: str, seconds: float = 30) -> str:
    deadline, text = time.monotonic() + seconds, ""
    while time.monotonic() < deadline:
        try:
            text = _scrape(port)
        except OSError:
            text = ""
        if ready(text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"{what} not in /metrics after {seconds}s:\n{text[:3000]}")


def _wait_for(port: int, needle: str) -> str:
    return _wait_until(port, lambda text: needle in text, repr(needle))


def _polls(text: str, device: str, status: str) -> int:
    m = re.search(
        rf'spanwatch_polls_total\{{device="{device}",source="snmp",status="{status}"\}} (\d+)', text
    )
    return int(m.group(1)) if m else 0


def test_collect_reload_and_graceful_stop(tmp_path: Path, agent: int) -> None:
    listen = free_port()
    cfg_path = tmp_path / "spanwatch.yaml"
    cfg_path.write_text(yaml.safe_dump(_config(tmp_path, agent, listen)))
    log = (tmp_path / "collector.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "spanwatch.cli", "collect", "--config", str(cfg_path)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        text = _wait_for(
            listen,
            'dci_interface_receive_bytes_total{device="live",site="a",interface="Ethernet1",link="l1"}',
        )
        assert 'dci_link_propagation_delay_seconds{link="l1"} 0.00049' in text
        # The dead target fails every second, yet the live one keeps being polled and answering.
        text = _wait_until(
            listen,
            lambda t: _polls(t, "dead", "unreachable") >= 3 and _polls(t, "live", "success") >= 3,
            "three failed polls of dead and three good ones of live",
        )
        assert 'spanwatch_target_up{device="dead",source="snmp"} 0' in text

        cfg_path.write_text("targets: [oops\n")  # a broken config: the running one stays
        os.kill(proc.pid, signal.SIGHUP)
        time.sleep(1.5)
        assert proc.poll() is None
        _wait_for(listen, 'dci_interface_receive_bytes_total{device="live",site="a",interface="Ethernet1"')

        cfg_path.write_text(yaml.safe_dump(_config(tmp_path, agent, listen, role="spine")))
        os.kill(proc.pid, signal.SIGHUP)
        _wait_for(listen, 'dci_interface_receive_bytes_total{device="live",role="spine",site="a"')

        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    output = (tmp_path / "collector.log").read_text()
    assert "reload rejected, keeping the running config" in output
    assert "Traceback" not in output
    archive = pl.read_parquet(tmp_path / "archive", hive_partitioning=True)
    live = archive.filter(
        (pl.col("device") == "live") & (pl.col("metric") == "dci_interface_receive_bytes_total")
    )
    assert live.height > 0 and set(live["source"]) == {"snmp"}
    assert not list((tmp_path / "archive").rglob(".*.tmp"))


def test_check_config_names_every_problem(tmp_path: Path) -> None:
    cfg = _config(tmp_path, 161, 9464)
    cfg["targets"][0]["snmp"]["community_file"] = "missing"  # type: ignore[index]
    cfg["links"][0]["members"][0]["device"] = "ghost"  # type: ignore[index]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run = subprocess.run(
        [sys.executable, "-m", "spanwatch.cli", "check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1
    assert "targets[0].snmp.community_file: file not found" in run.stderr
    assert "links[0].members[0].device: no target named 'ghost'" in run.stderr
    assert "Traceback" not in run.stderr
