"""``spanwatch collect`` with targets from files (re-read on change, no signal) and a user SNMP module
(re-read on SIGHUP), against snmpsim; a targets file naming a host file as a secret is refused on reload and
nothing is sent (issue 34)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from spanwatch.sim.commands import free_port
from tests.integration.snmp_agents import copy_recordings, snmpsim
from tests.integration.test_daemon import _wait_for, _wait_until

pytestmark = pytest.mark.integration


def _module(up_values: dict[int, int]) -> dict[str, object]:
    return {
        "description": "ifOperStatus, as this site reads it",
        "tables": [
            {
                "name": "ifTable",
                "entry": "1.3.6.1.2.1.2.2.1",
                "index": ["ifindex"],
                "labels": {"interface": "ifindex"},
                "columns": [
                    {"column": 8, "metric": "dci_interface_oper_up", "enum": up_values, "enum_default": 0}
                ],
            }
        ],
    }


def _target(name: str, port: int) -> dict[str, object]:
    return {
        "name": name,
        "snmp": {"address": f"127.0.0.1:{port}", "community_file": "community", "modules": ["site_oper"]},
    }


def test_targets_files_and_user_modules_reload(tmp_path: Path) -> None:
    with snmpsim(copy_recordings(tmp_path / "data", ["arista_eos"])) as agent:
        listen = free_port()
        (tmp_path / "secrets").mkdir()
        (tmp_path / "secrets" / "community").write_text("arista_eos\n")
        (tmp_path / "host.key").write_text("host-private-key\n")
        (tmp_path / "maps").mkdir()
        (tmp_path / "maps" / "site_oper.yaml").write_text(yaml.safe_dump(_module({1: 1})))
        (tmp_path / "targets").mkdir()
        (tmp_path / "targets" / "a.yaml").write_text(yaml.safe_dump([_target("filed-a", agent)]))
        config = {
            "collector": {"listen": f"127.0.0.1:{listen}", "archive": None, "secrets_dir": "secrets"},
            "defaults": {"interval": "1s", "timeout": "1s"},
            "mappings": {"snmp_dirs": ["maps"]},
            "targets_files": ["targets/*.yaml"],
        }
        cfg_path = tmp_path / "spanwatch.yaml"
        cfg_path.write_text(yaml.safe_dump(config))
        log = (tmp_path / "collector.log").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "spanwatch.cli", "collect", "--config", str(cfg_path), "--shard", "0/1"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_for(listen, 'dci_interface_oper_up{device="filed-a",interface="Ethernet1"} 1')
            # a new file is picked up without a signal (file_sd style)
            (tmp_path / "targets" / "b.yaml").write_text(yaml.safe_dump([_target("filed-b", agent)]))
            _wait_for(listen, 'dci_interface_oper_up{device="filed-b",interface="Ethernet1"} 1')
            # a broken targets file is rejected; the running targets stay
            (tmp_path / "targets" / "c.yaml").write_text("- {name: broken}\n")
            deadline = time.monotonic() + 20
            while "c.yaml[0]" not in (tmp_path / "collector.log").read_text() and time.monotonic() < deadline:
                time.sleep(0.2)
            _wait_for(listen, 'dci_interface_oper_up{device="filed-b"')
            (tmp_path / "targets" / "c.yaml").unlink()
            # a targets file naming a host file as the community is refused: nothing reaches its address
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as thief:
                thief.bind(("127.0.0.1", 0))
                evil = {"name": "evil", "snmp": {"address": f"127.0.0.1:{thief.getsockname()[1]}"}}
                evil["snmp"]["community_file"] = "../host.key"  # type: ignore[index]
                (tmp_path / "targets" / "d.yaml").write_text(yaml.safe_dump([evil]))
                deadline = time.monotonic() + 20
                while "d.yaml[0]" not in (tmp_path / "collector.log").read_text():
                    assert time.monotonic() < deadline, "the evil targets file was never looked at"
                    time.sleep(0.2)
                thief.settimeout(3.0)  # three polls' worth of time at a 1 s interval
                with pytest.raises(TimeoutError):
                    thief.recv(65536)
            assert "d.yaml[0].snmp.community_file: " in (tmp_path / "collector.log").read_text()
            (tmp_path / "targets" / "d.yaml").unlink()
            # an edited user module is applied on SIGHUP: up(1) now reads as 0
            (tmp_path / "maps" / "site_oper.yaml").write_text(yaml.safe_dump(_module({1: 0})))
            os.kill(proc.pid, signal.SIGHUP)
            _wait_until(
                listen,
                lambda t: (
                    'dci_interface_oper_up{device="filed-a",interface="Ethernet1"} 0' in t
                    and 'dci_interface_oper_up{device="filed-b",interface="Ethernet1"} 0' in t
                ),
                "the edited module's values",
            )
            os.kill(proc.pid, signal.SIGTERM)
            assert proc.wait(15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    output = (tmp_path / "collector.log").read_text()
    assert "targets files changed: reloading" in output
    assert "c.yaml[0]: a target needs snmp, gnmi or both" in output
    assert "is outside collector.secrets_dir" in output and "host-private-key" not in output
    assert "Traceback" not in output
