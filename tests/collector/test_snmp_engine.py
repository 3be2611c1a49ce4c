"""SNMP source on the map-backed fake walker: mapping, summing, epochs, wrap, reboot, bounded walks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from collector.clock import FakeClock
from collector.config import Defaults, SnmpConfig
from collector.errors import MappingError
from collector.sources.snmp.ber import (
    TAG_COUNTER32,
    TAG_COUNTER64,
    TAG_INTEGER,
    TAG_OCTETS,
    TAG_TIMETICKS,
    Oid,
    VarBind,
    _tlv,
    decode_response,
    encode_oid,
    encode_request,
)
from collector.sources.snmp.source import SnmpSource
from collector.sources.snmp.tables import load_all, load_file
from collector.sources.snmp.walk import MapWalker, parse_oid, walk
from collector.store import Store

IFX = "1.3.6.1.2.1.31.1.1.1"


def agent(uptime: int = 100, in_octets: int = 10, in_errors: int = 1) -> MapWalker:
    o = parse_oid
    return MapWalker(
        {
            o("1.3.6.1.2.1.1.3.0"): (TAG_TIMETICKS, uptime),
            o(f"{IFX}.1.1"): (TAG_OCTETS, b"Ethernet1"),
            o(f"{IFX}.6.1"): (TAG_COUNTER64, in_octets),
            o(f"{IFX}.7.1"): (TAG_COUNTER64, 5),
            o(f"{IFX}.8.1"): (TAG_COUNTER64, 6),
            o(f"{IFX}.9.1"): (TAG_COUNTER64, 7),
            o(f"{IFX}.15.1"): (0x42, 100_000),
            o("1.3.6.1.2.1.2.2.1.2.1"): (TAG_OCTETS, b"eth-descr"),
            o("1.3.6.1.2.1.2.2.1.8.1"): (TAG_INTEGER, 1),
            o("1.3.6.1.2.1.2.2.1.14.1"): (TAG_COUNTER32, in_errors),
        }
    )


def source(
    walker: MapWalker, clock: FakeClock | None = None, modules: tuple[str, ...] = ("if_mib",)
) -> SnmpSource:
    cfg = SnmpConfig(address="192.0.2.1:161", community_env="X", modules=modules)
    return SnmpSource("dev", cfg, Defaults(label_refresh="60s"), clock or FakeClock(), walker=walker)


def test_every_shipped_module_loads() -> None:
    modules = load_all()
    assert {
        "if_mib",
        "etherlike",
        "entity_sensor",
        "cisco_entity_sensor",
        "juniper_dom",
        "juniper_ifoptics",
        "nokia_ddm",
        "arista_queue",
        "arista_pfc",
        "arista_qos",
        "ieee8021_pfc",
        "cisco_pfc",
        "cisco_cbqos",
        "juniper_cos",
        "mellanox_qos",
    } <= set(modules)


@pytest.mark.parametrize(
    "body",
    [
        "description: x\ntables: [{name: t, entry: 1.3.6, index: [i],"
        " columns: [{column: 1, metric: nope}]}]\n",
        "description: x\ntables: [{name: t, entry: 1.3.6, index: [i], labels: {vlan: i},"
        " columns: [{column: 1, metric: dci_interface_oper_up}]}]\n",
        "description: x\nsurprise: 1\n",
        "description: x\ntables: [{name: t, entry: 1.3.6, index: [i], labels: {interface: j},"
        " columns: [{column: 1, metric: dci_interface_oper_up}]}]\n",
    ],
)
def test_bad_tables_are_rejected(tmp_path: Path, body: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(body)
    with pytest.raises(MappingError):
        load_file(f)


async def test_if_mib_maps_sums_and_scales() -> None:
    samples = {(s.metric, s.labels): s for s in await source(agent()).poll()}
    eth = (("interface", "Ethernet1"),)
    assert samples[("dci_interface_receive_packets_total", eth)].raw == 18  # ucast + mcast + bcast
    assert samples[("dci_interface_speed_bytes_per_second", eth)].value == 100_000 * 125_000
    assert samples[("dci_interface_oper_up", eth)].value == 1.0
    errors = samples[("dci_interface_receive_errors_total", eth)]
    assert errors.width == 32 and samples[("dci_interface_receive_bytes_total", eth)].width == 64


async def test_labels_cached_until_refresh() -> None:
    walker, clock = agent(), FakeClock()
    src = source(walker, clock)
    await src.poll()
    walker.set(parse_oid(f"{IFX}.1.1"), TAG_OCTETS, b"renamed")
    assert ("interface", "Ethernet1") in (await src.poll())[0].labels
    await clock.advance(61)
    assert ("interface", "renamed") in (await src.poll())[0].labels


async def test_an_interface_is_one_label_tuple_across_its_tables_and_polls() -> None:
    # Every row of every target stays in the resolver's memo: ifTable's and ifXTable's row of an interface
    # are one object, and the samples of both tables carry one labels tuple, the same poll after poll.
    src = source(agent())
    first = await src.poll()
    eth = first[0].labels
    assert {s.metric for s in first if s.labels is eth} >= {
        "dci_interface_receive_bytes_total",  # ifXTable
        "dci_interface_receive_errors_total",  # ifTable
    }
    assert all(s.labels is eth for s in await src.poll() if s.labels == eth)
    resolver = src._resolvers["if_mib"]
    assert resolver._rows["ifTable"][(1,)] is resolver._rows["ifXTable"][(1,)] == (1, eth)
    assert resolver._shared == {}  # what shared them is emptied once a poll's rows are resolved


async def test_counter32_wrap_no_spike_and_reboot_counts_discontinuity() -> None:
    walker, store = agent(in_errors=2**32 - 10), Store(FakeClock())
    src = source(walker)
    key = (("device", "dev"), ("interface", "Ethernet1"))
    store.ingest("dev", "snmp", await src.poll(), 0)
    walker.set(parse_oid("1.3.6.1.2.1.2.2.1.14.1"), TAG_COUNTER32, 5)  # wrapped past 2^32
    walker.set(parse_oid("1.3.6.1.2.1.1.3.0"), TAG_TIMETICKS, 200)
    store.ingest("dev", "snmp", await src.poll(), 0)
    assert store.value("dci_interface_receive_errors_total", key) == 2**32 + 5
    assert (
        store.value(
            "dci_counter_discontinuities_total",
            (("device", "dev"), ("metric", "dci_interface_receive_errors_total")),
        )
        is None
    )
    walker.set(parse_oid("1.3.6.1.2.1.1.3.0"), TAG_TIMETICKS, 50)  # sysUpTime went back: reboot
    walker.set(parse_oid("1.3.6.1.2.1.2.2.1.14.1"), TAG_COUNTER32, 3)
    store.ingest("dev", "snmp", await src.poll(), 0)
    assert store.value("dci_interface_receive_errors_total", key) == 3
    assert src.reboots == 1
    assert (
        store.value(
            "dci_counter_discontinuities_total",
            (("device", "dev"), ("metric", "dci_interface_receive_errors_total")),
        )
        == 1
    )


async def test_absent_table_walked_once_per_refresh() -> None:
    walker, clock = agent(), FakeClock()
    src = source(walker, clock, modules=("if_mib", "juniper_cos"))
    await src.poll()
    before = walker.requests
    await src.poll()
    assert "juniper_cos.jnxCosQstatTable" in src.absent
    per_poll = walker.requests - before
    await src.poll()
    assert walker.requests - before == 2 * per_poll


class LoopingWalker(MapWalker):
    """An agent that always answers the same OID (a broken agent that would loop a naive walk)."""

    async def bulk(self, oids: Sequence[Oid], max_repetitions: int) -> list[VarBind]:
        self.requests += 1
        return [((*oids[0][:10], 1), TAG_INTEGER, 1)] * max_repetitions


class EndlessWalker(MapWalker):
    """An agent whose table never ends (each answer increases)."""

    async def bulk(self, oids: Sequence[Oid], max_repetitions: int) -> list[VarBind]:
        self.requests += 1
        root, start = oids[0][:11], (oids[0][11] if len(oids[0]) > 11 else 0)
        return [((*root, start + i + 1), TAG_INTEGER, 1) for i in range(max_repetitions)]


async def test_walk_stops_on_non_increasing_oid() -> None:
    walker = LoopingWalker({})
    root = parse_oid(f"{IFX}.6")
    got = await walk(walker, [root])
    assert walker.requests <= 2 and len(got[root]) <= 1


async def test_walk_is_bounded_on_endless_table() -> None:
    walker = EndlessWalker({})
    root = parse_oid(f"{IFX}.6")
    got = await walk(walker, [root], max_repetitions=10, max_rows=100, max_requests=50)
    assert len(got[root]) == 100 and walker.requests == 10


def test_ber_roundtrip_of_oids_and_request() -> None:
    oid = (1, 3, 6, 1, 4, 1, 2636, 3, 60, 1, 1, 1, 1, 5, 4294967295)
    msg = encode_request(b"public", 7, [oid], 25)
    assert encode_oid(oid) in msg
    up = _tlv(0x30, _tlv(0x06, encode_oid((1, 3, 6, 1, 2, 1, 1, 3, 0))) + _tlv(TAG_TIMETICKS, b"\x01\x00"))
    pdu = _tlv(0xA2, _tlv(2, b"\x07") + _tlv(2, b"\x00") + _tlv(2, b"\x00") + _tlv(0x30, up))
    response = _tlv(0x30, _tlv(2, b"\x01") + _tlv(TAG_OCTETS, b"public") + pdu)
    rid, status, index, binds = decode_response(response)
    assert (rid, status, index) == (7, 0, 0)
    assert binds == [((1, 3, 6, 1, 2, 1, 1, 3, 0), TAG_TIMETICKS, 256)]
