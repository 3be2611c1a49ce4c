"""The simulated switches over real protocols: net-snmp's snmpbulkwalk and pygnmi's client, in other
processes, against the live fabric on loopback."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import AsyncIterator

import pytest

from spanwatch.sim.runtime import SimulatedFabric
from spanwatch.sim.scenario import builtin

pytestmark = pytest.mark.integration

PYGNMI = r"""
import json, sys
from pygnmi.client import gNMIclient
port = int(sys.argv[1])
with gNMIclient(target=("127.0.0.1", port), insecure=True) as gc:
    caps = gc.capabilities()
    got = gc.get(path=["/qos/interfaces/interface/output/queues/queue/state"], encoding="json")
    sub = {"subscription": [{"path": "/components/component/optical-channel/state", "mode": "sample",
                             "sample_interval": 500_000_000}], "mode": "stream", "encoding": "json"}
    updates = 0
    for resp in gc.subscribe2(subscribe=sub):
        if "update" in resp:
            updates += 1
        if updates >= 3:
            break
    once = {"subscription": [{"path": "/interfaces/interface/state/counters"}], "mode": "once", "encoding": "json"}
    once_n = sum(1 for r in gc.subscribe2(subscribe=once) if "update" in r)
print(json.dumps({"models": len(caps["supported_models"]), "get": len(got["notification"]),
                  "leaf": got["notification"][0]["update"][0]["path"], "stream": updates, "once": once_n}))
"""


@pytest.fixture
async def sim() -> AsyncIterator[SimulatedFabric]:
    fabric = SimulatedFabric(builtin(60.0, waves=4, episodes=False))
    await fabric.start()
    await asyncio.sleep(0.3)
    try:
        yield fabric
    finally:
        await fabric.stop()


async def _run(*argv: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    return out.decode()


@pytest.mark.skipif(shutil.which("snmpbulkwalk") is None, reason="net-snmp's snmpbulkwalk is not installed")
async def test_snmpbulkwalk(sim: SimulatedFabric) -> None:
    base = ["snmpbulkwalk", "-v2c", "-c", sim.community, "-On", "-t", "2", f"127.0.0.1:{sim.snmp_ports[0]}"]
    ifx = await _run(*base, "1.3.6.1.2.1.31.1.1.1")
    assert '.1.3.6.1.2.1.31.1.1.1.1.1 = STRING: "Ethernet1/1"' in ifx
    assert "Counter64" in ifx and "Gauge32: 800000" in ifx
    optics = await _run(*base, "1.3.6.1.4.1.2636.3.71.1.2.1.1.1")  # CD, ps/nm
    cds = [int(line.rsplit(" ", 1)[1]) for line in optics.splitlines()]
    assert len(cds) == 4 and all(1650 < cd < 1750 for cd in cds)
    queue = await _run(*base, "1.3.6.1.4.1.30065.3.6.1.2.1")
    assert ".1.3.6.1.4.1.30065.3.6.1.2.1.5.1.3.1 = Counter64" in queue
    wrong = await asyncio.create_subprocess_exec(
        "snmpget",
        "-v2c",
        "-c",
        "nope",
        "-t",
        "0.3",
        "-r",
        "0",
        f"127.0.0.1:{sim.snmp_ports[0]}",
        "1.3.6.1.2.1.1.3.0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    await wrong.communicate()
    assert wrong.returncode != 0  # a wrong community is ignored: a timeout


async def test_pygnmi_get_and_subscribe(sim: SimulatedFabric) -> None:
    out = json.loads(await _run(sys.executable, "-c", PYGNMI, str(sim.gnmi_ports[1])))
    assert out["models"] >= 6
    assert out["get"] == 8  # per wave: the job's queue and the background class's
    assert out["stream"] >= 3 and out["once"] == 4
