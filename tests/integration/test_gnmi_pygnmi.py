"""pygnmi's own client, in a separate process, interoperates with the gNMI server we ship."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap

import pytest

from spanwatch.sim.gnmi_server import GnmiServer
from tests.integration.gnmi_support import load_recording, recording, running

pytestmark = pytest.mark.integration

CLIENT = textwrap.dedent("""
    import json, sys
    from pygnmi.client import gNMIclient
    port = int(sys.argv[1])
    with gNMIclient(target=("127.0.0.1", port), insecure=True, timeout=10) as gc:
        caps = gc.capabilities()
        got = gc.get(path=["/interfaces"], encoding="json_ietf")
        sub = gc.subscribe2(subscribe={"mode": "once", "encoding": "proto",
                                       "subscription": [{"path": "/interfaces/interface/state/counters"}]})
        once = []
        for msg in sub:
            once.append(msg)
            if msg.get("sync_response"):
                break
    print(json.dumps({"version": caps["gnmi_version"], "encodings": caps["supported_encodings"],
                      "get": len(got["notification"]), "once": once}, default=str))
""")


async def test_pygnmi_client_capabilities_get_and_subscribe_once() -> None:
    responses = load_recording(recording("issue_14530"))
    server = GnmiServer(responses)
    async with running(server) as port:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CLIENT,
            str(port),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["version"] == "0.8.0"
    assert "proto" in result["encodings"]
    assert result["get"] == 1
    updates = [m for m in result["once"] if "update" in m]
    assert len(updates[0]["update"]["update"]) == 15
    assert server.requests[-1].subscribe.mode == 1  # ONCE
