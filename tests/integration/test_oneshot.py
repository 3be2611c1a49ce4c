"""One-shot commands against real peers, and a user's own mapping files end to end: ``spanwatch poll
--once`` with a user SNMP module (snmpsim) and a user gNMI set (the replay server) from a temp dir, and
``spanwatch gnmi capabilities|get|subscribe --once``."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml

from spanwatch.sim.gnmi_server import GnmiServer
from tests.integration.gnmi_support import PROJECT_ROOT, load_recording, recording, running
from tests.integration.snmp_agents import copy_recordings, snmpsim

pytestmark = pytest.mark.integration

# A user module for something the shipped if_mib does differently: ifOperStatus alone, testing(3) as up.
USER_MODULE = {
    "description": "ifOperStatus only, testing(3) counted as up (a site rule)",
    "tables": [
        {
            "name": "ifTable",
            "entry": "1.3.6.1.2.1.2.2.1",
            "index": ["ifindex"],
            "labels": {"interface": "ifindex"},
            "columns": [
                {"column": 8, "metric": "dci_interface_oper_up", "enum": {1: 1, 3: 1}, "enum_default": 0}
            ],
        }
    ],
}
# A user set for a device that puts packet counters under state/ instead of state/counters/ (the
# canonical_field_names recording): the shipped interfaces set maps nothing there.
USER_SET = {
    "description": "packet counters directly under interface state",
    "subscriptions": [{"path": "/interfaces/interface/state", "mode": "sample"}],
    "groups": [
        {
            "prefix": "/interfaces/interface[name={interface}]/state",
            "leaves": {
                "in-pkts": "dci_interface_receive_packets_total",
                "out-pkts": "dci_interface_transmit_packets_total",
            },
        }
    ],
}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with snmpsim(copy_recordings(tmp_path_factory.mktemp("snmprec"), ["arista_eos"])) as port:
        yield port


@pytest.fixture
async def replay() -> AsyncIterator[int]:
    responses = load_recording(recording("canonical_field_names"))
    async with running(GnmiServer(responses, sync=True, hold=True)) as port:
        yield port


async def spanwatch(*argv: str) -> tuple[int, str, str]:
    """The real command in a child process (the replay server keeps this test's loop busy)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "spanwatch.cli",
        *argv,
        cwd=PROJECT_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def user_config(tmp_path: Path, snmp_port: int, gnmi_port: int) -> Path:
    (tmp_path / "maps" / "snmp").mkdir(parents=True)
    (tmp_path / "maps" / "gnmi").mkdir(parents=True)
    (tmp_path / "maps" / "snmp" / "site_oper.yaml").write_text(yaml.safe_dump(USER_MODULE))
    (tmp_path / "maps" / "gnmi" / "flat_state.yaml").write_text(yaml.safe_dump(USER_SET))
    (tmp_path / "community").write_text("arista_eos\n")
    config = {
        "mappings": {"snmp_dirs": ["maps/snmp"], "gnmi_dirs": ["maps/gnmi"]},
        "targets": [
            {
                "name": "sw1",
                "snmp": {
                    "address": f"127.0.0.1:{snmp_port}",
                    "community_file": "community",
                    "modules": ["site_oper"],
                    "timeout": "3s",
                },
                "gnmi": {
                    "address": f"127.0.0.1:{gnmi_port}",
                    "insecure": True,
                    "subscriptions": ["flat_state"],
                },
            }
        ],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_user_module_and_set_produce_their_series(agent: int, replay: int, tmp_path: Path) -> None:
    config = user_config(tmp_path, agent, replay)
    code, out, err = await spanwatch("check-config", "--config", str(config))
    assert code == 0, err
    assert "2 user mapping files" in out
    code, out, err = await spanwatch("poll", "--config", str(config), "--target", "sw1", "--once")
    assert code == 0, err
    lines = out.splitlines()
    assert 'dci_interface_oper_up{interface="Ethernet1"} 1' in lines
    assert 'dci_interface_receive_packets_total{interface="eth42"} 5678' in lines
    assert 'dci_interface_transmit_packets_total{interface="eth42"} 5125' in lines
    # what the user set does not map is listed with its path
    assert any(line.startswith("# skipped: /interfaces/interface[name=eth42]/descr") for line in lines)


async def test_a_broken_user_file_is_a_located_config_error(agent: int, replay: int, tmp_path: Path) -> None:
    config = user_config(tmp_path, agent, replay)
    broken = {
        **USER_SET,
        "groups": [
            {
                "prefix": "/interfaces/interface[name={interface}]/state",
                "leaves": {"in-pkts": "dci_bogus_total"},
            }
        ],
    }
    (tmp_path / "maps" / "gnmi" / "flat_state.yaml").write_text(yaml.safe_dump(broken))
    (tmp_path / "maps" / "snmp" / "if_mib.yaml").write_text(yaml.safe_dump(USER_MODULE))
    code, _, err = await spanwatch("check-config", "--config", str(config))
    assert code == 1
    assert "mappings.snmp_dirs[0]: if_mib.yaml: 'if_mib' is the name of a shipped SNMP module" in err
    (tmp_path / "maps" / "snmp" / "if_mib.yaml").unlink()
    code, _, err = await spanwatch("check-config", "--config", str(config))
    assert code == 1
    assert "mappings.gnmi_dirs[0]: flat_state.yaml: groups[0].leaves[in-pkts]: 'dci_bogus_total'" in err


async def test_poll_names_what_the_device_lacks(agent: int, tmp_path: Path) -> None:
    (tmp_path / "community").write_text("arista_eos\n")
    target = {
        "name": "sw1",
        "snmp": {
            "address": f"127.0.0.1:{agent}",
            "community_file": "community",
            "modules": ["if_mib", "juniper_dom"],
        },
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"targets": [target]}))
    code, out, err = await spanwatch(
        "poll", "--config", str(tmp_path / "config.yaml"), "--target", "sw1", "--once"
    )
    assert code == 0, err
    assert any(line.startswith("dci_interface_receive_bytes_total{") for line in out.splitlines())
    assert "# skipped: juniper_dom.jnxDomCurrentTable: no rows on this device" in out
    code, _, err = await spanwatch(
        "poll", "--config", str(tmp_path / "config.yaml"), "--target", "nope", "--once"
    )
    assert code == 1 and "no target named 'nope'" in err


async def test_gnmi_verbs(replay: int) -> None:
    address = f"127.0.0.1:{replay}"
    code, out, err = await spanwatch("gnmi", "capabilities", address, "--insecure")
    assert code == 0, err
    assert json.loads(out)["gNMIVersion"]
    code, out, err = await spanwatch("gnmi", "get", address, "/interfaces", "--insecure")
    assert code == 0, err
    assert "eth42" in out
    code, out, err = await spanwatch("gnmi", "subscribe", "--once", address, "/interfaces", "--insecure")
    assert code == 0, err
    first = json.loads(out.splitlines()[0])
    assert first["update"]["update"][2]["val"] == {"uintVal": "5678"}
    # TLS unless --insecure says otherwise, as in the config: a plaintext server fails the handshake
    code, _, err = await spanwatch("gnmi", "capabilities", address, "--timeout", "5")
    assert code == 1 and f"spanwatch: gnmi capabilities {address}: UNAVAILABLE" in err
    assert "if the target serves plaintext gNMI, add --insecure" in err
