"""The simulator's SNMP agent (pysnmp's codec) against two other implementations of SNMPv2c: the
collector's source (its own BER codec) and pysnmp's hlapi client; plus the agent's size limits.

net-snmp's ``snmpbulkwalk``, the third, is in ``test_protocols.py``.
"""

from __future__ import annotations

import ast
import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pysnmp.proto import rfc1905
from pysnmp.proto.rfc1902 import Counter64, OctetString

from collector.config import Defaults, SnmpConfig
from collector.sources.snmp import ber
from collector.sources.snmp.source import SnmpSource
from spanwatch.sim import snapshot, snmp_agent, snmp_mib
from spanwatch.sim.fabric import Fabric
from spanwatch.sim.layout import Layout
from spanwatch.sim.runtime import SNMP_MODULES, SimulatedFabric
from spanwatch.sim.scenario import builtin

SIM = Path(snmp_agent.__file__).parent
COMMUNITY = "spanwatch-test"
IF_X = "1.3.6.1.2.1.31.1.1.1"

_DEVICES = [d.name for d in Layout(builtin(episodes=False)).devices]  # the two ends of the link


def test_the_simulator_does_not_import_the_collectors_sources() -> None:
    imported = []
    for path in sorted(SIM.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported += [(path.name, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported += [(path.name, f"{node.module}.{alias.name}") for alias in node.names]
    assert imported
    assert [(f, name) for f, name in imported if name.startswith("collector.sources")] == []


@pytest.fixture(scope="module")
def table() -> snmp_agent.Table:
    """Device 0's table after a simulated second (counters well away from zero)."""
    f = Fabric(builtin(waves=4, episodes=False))
    f.advance(1.0)
    return snmp_mib.build(snapshot.take(f, time.time_ns(), 1.0), 0, _DEVICES[0])


@pytest.fixture
async def agent(table: snmp_agent.Table) -> AsyncIterator[int]:
    transport, port = await snmp_agent.serve(COMMUNITY, lambda: table)
    try:
        yield port
    finally:
        transport.close()


@pytest.fixture
async def fabric() -> AsyncIterator[SimulatedFabric]:
    sim = SimulatedFabric(builtin(waves=4, episodes=False))
    await sim.start()
    await asyncio.sleep(0.3)
    try:
        yield sim
    finally:
        await sim.stop()


@pytest.mark.integration
async def test_the_collectors_source_polls_the_live_fabric(
    fabric: SimulatedFabric, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SW_SIM_COMMUNITY", fabric.community)
    cfg = SnmpConfig.model_validate(
        {
            "address": f"127.0.0.1:{fabric.snmp_ports[1]}",
            "community_env": "SW_SIM_COMMUNITY",
            "modules": [*SNMP_MODULES, "arista_queue"],
            "max_repetitions": 10,  # several GETBULKs per table, so rows continue across requests
        }
    )
    source = SnmpSource(_DEVICES[1], cfg, Defaults())
    try:
        samples = await source.poll()
    finally:
        await source.close()
    got: dict[str, dict[str, float]] = {}
    for s in samples:
        got.setdefault(s.metric, {})[dict(s.labels).get("interface", "")] = s.value
    waves = {f"Ethernet1/{w}" for w in range(1, 5)}
    assert got["dci_interface_speed_bytes_per_second"] == dict.fromkeys(waves, 800_000 * 125_000)
    assert got["dci_interface_oper_up"] == dict.fromkeys(waves, 1.0)
    assert set(got["dci_interface_receive_bytes_total"]) == waves
    assert all(1650 < cd < 1750 for cd in got["dci_optics_chromatic_dispersion_ps_per_nm"].values())
    assert all(-20 < p < 10 for p in got["dci_optics_rx_power_dbm"].values())
    assert set(got["dci_queue_transmit_packets_total"]) == waves


# pysnmp 7.1 attaches pysmi's MIB compiler to an engine on first use (even with lookupMib=False) through
# pysmi names pysmi has since deprecated: their warning, attributed to pysnmp.smi.compiler, and only it is let
# through.
PYSNMP_CALLS_DEPRECATED_PYSMI = (
    r"ignore:.* is deprecated\. Please use .* instead\.:DeprecationWarning:pysnmp\.smi\.compiler"
)


@pytest.mark.integration
@pytest.mark.filterwarnings(PYSNMP_CALLS_DEPRECATED_PYSMI)
async def test_pysnmp_hlapi_walks_get_and_getnext(agent: int, table: snmp_agent.Table) -> None:
    from pysnmp.hlapi.v3arch import asyncio as hl

    engine = hl.SnmpEngine()
    target = await hl.UdpTransportTarget.create(("127.0.0.1", agent), timeout=2, retries=0)
    auth, ctx = hl.CommunityData(COMMUNITY), hl.ContextData()
    try:
        walked = []
        async for ind, status, _, binds in hl.bulk_walk_cmd(
            engine, auth, target, ctx, 0, 7, hl.ObjectType(hl.ObjectIdentity("1.3")), lookupMib=False
        ):
            assert ind is None and not status
            walked += [(tuple(name), value) for name, value in binds]
        keys, values = table
        assert [oid for oid, _ in walked] == keys  # every row, in order, and nothing past the end
        assert all(v == want and v.tagSet == want.tagSet for (_, v), want in zip(walked, values, strict=True))

        ind, status, _, binds = await hl.get_cmd(
            engine,
            auth,
            target,
            ctx,
            hl.ObjectType(hl.ObjectIdentity(f"{IF_X}.1.2")),
            hl.ObjectType(hl.ObjectIdentity(f"{IF_X}.15.2")),
            hl.ObjectType(hl.ObjectIdentity(f"{IF_X}.15.99")),
            lookupMib=False,
        )
        assert ind is None and not status
        assert [str(v) for _, v in binds[:2]] == ["Ethernet1/2", "800000"]
        assert binds[2][1].tagSet == hl.NoSuchObject.tagSet

        ind, status, _, binds = await hl.next_cmd(
            engine, auth, target, ctx, hl.ObjectType(hl.ObjectIdentity(keys[-1])), lookupMib=False
        )
        assert ind is None and not status
        assert binds[0][1].tagSet == hl.EndOfMibView.tagSet
    finally:
        engine.close_dispatcher()


def _exchange(table: snmp_agent.Table, oids: list[ber.Oid], reps: int) -> tuple[int, int, list[ber.VarBind]]:
    """One request encoded and the response decoded by the collector's codec, answered by the agent."""
    request = snmp_agent.Request(ber.encode_request(COMMUNITY.encode(), 42, oids, reps))
    wire = snmp_agent.response(request, *snmp_agent.answer(table, request))
    assert len(wire) <= snmp_agent.MAX_RESPONSE
    rid, status, _, binds = ber.decode_response(wire)
    assert rid == 42
    return status, len(wire), binds


def test_getbulk_stops_short_at_the_message_size_and_get_says_too_big() -> None:
    keys = [(1, 3, 6, 1, 9, i) for i in range(1, 201)]
    big: snmp_agent.Table = (keys, [OctetString(b"x" * 1000) for _ in keys])
    status, size, binds = _exchange(big, [(1, 3, 6, 1, 9)], 150)
    assert status == 0 and 50 < len(binds) < 60 and size > snmp_agent.MAX_RESPONSE - 1100
    assert [oid for oid, _, _ in binds] == keys[: len(binds)]  # the first rows, in order

    huge: snmp_agent.Table = ([(1, 3, 6, 1, 9, 1)], [OctetString(b"x" * 65_000)])
    status, _, binds = _exchange(huge, [(1, 3, 6, 1, 9, 1)], 0)
    assert status == 1 and binds == []  # tooBig


def test_getbulk_rows_end_with_end_of_mib_view() -> None:
    table: snmp_agent.Table = ([(1, 3, 6, 1, 9, 1), (1, 3, 6, 1, 9, 2)], [Counter64(2**64 - 1), Counter64(0)])
    status, _, binds = _exchange(table, [(1, 3, 6, 1, 9), (1, 3, 6, 1, 9, 1)], 5)
    assert status == 0
    end = ((1, 3, 6, 1, 9, 2), ber.TAG_END_OF_MIB, None)
    assert binds == [  # repetitions go on until every column has run off the end, then stop
        ((1, 3, 6, 1, 9, 1), ber.TAG_COUNTER64, 2**64 - 1),
        ((1, 3, 6, 1, 9, 2), ber.TAG_COUNTER64, 0),
        ((1, 3, 6, 1, 9, 2), ber.TAG_COUNTER64, 0),
        end,
        end,
        end,
    ]


def test_malformed_and_foreign_requests_are_refused() -> None:
    with pytest.raises(snmp_agent.BadRequest):
        snmp_agent.Request(b"\x30\x03\x02\x01")
    v1 = ber.encode_request(b"c", 1, [(1, 3, 6, 1)])
    with pytest.raises(snmp_agent.BadRequest, match="not SNMPv2c"):
        snmp_agent.Request(v1.replace(b"\x02\x01\x01", b"\x02\x01\x00", 1))


def test_the_oid_encodings_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # A manager asking for ever new OIDs (each answered noSuchObject) cannot grow the agent's memory.
    monkeypatch.setattr(snmp_agent, "MAX_CACHED_OIDS", 10)
    encodings = snmp_agent.Encodings()
    for i in range(25):
        encodings.varbind((1, 3, 6, 1, 99, i), rfc1905.noSuchObject)
    assert 0 < len(encodings.oids) <= 10
