"""Mapping fixes on the map-backed walker: PFC totals without priority, 1-based Juniper lanes, 32-bit
fallbacks (IF-MIB octets/packets, EtherLike pause frames) only where the HC counter is absent, FCS errors."""

from __future__ import annotations

from collector.clock import FakeClock
from collector.config import Defaults, SnmpConfig
from collector.model import Sample
from collector.sources.snmp.ber import TAG_COUNTER32, TAG_COUNTER64, TAG_INTEGER, TAG_OCTETS, TAG_TIMETICKS
from collector.sources.snmp.source import SnmpSource
from collector.sources.snmp.walk import MapWalker, parse_oid
from collector.store import Store

IFX = "1.3.6.1.2.1.31.1.1.1"
IFT = "1.3.6.1.2.1.2.2.1"
PAUSE = "1.3.6.1.2.1.10.7.10.1"


def agent(extra: dict[str, tuple[int, object]]) -> MapWalker:
    base: dict[str, tuple[int, object]] = {
        "1.3.6.1.2.1.1.3.0": (TAG_TIMETICKS, 100),
        f"{IFX}.1.1": (TAG_OCTETS, b"Ethernet1"),
        f"{IFX}.1.2": (TAG_OCTETS, b"Ethernet2"),
    }
    return MapWalker({parse_oid(k): v for k, v in {**base, **extra}.items()})


async def poll(walker: MapWalker, *modules: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], Sample]:
    cfg = SnmpConfig(address="192.0.2.1:161", community_env="X", modules=modules)
    src = SnmpSource("dev", cfg, Defaults(), FakeClock(), walker=walker)
    return {(s.metric, s.labels): s for s in await src.poll()}


def eth(n: int, **more: str) -> tuple[tuple[str, str], ...]:
    order = ("interface", "queue", "priority", "lane", "direction")
    pairs = {"interface": f"Ethernet{n}", **more}
    return tuple((k, pairs[k]) for k in order if k in pairs)


async def test_per_interface_pfc_has_no_priority_label() -> None:
    got = await poll(
        agent(
            {
                "1.3.111.2.802.1.1.21.1.1.1.2.1": (TAG_COUNTER32, 11),  # ieee8021PfcRequests
                "1.3.6.1.4.1.9.9.813.1.1.1.2.2": (TAG_COUNTER64, 22),  # cpfcIfIndications
            }
        ),
        "ieee8021_pfc",
        "cisco_pfc",
    )
    assert got[("dci_pfc_pause_frames_total", eth(1, direction="tx"))].raw == 11
    assert got[("dci_pfc_pause_frames_total", eth(2, direction="rx"))].raw == 22
    assert all(("priority", "all") not in labels for _, labels in got)


async def test_juniper_dom_lanes_are_one_based() -> None:
    lane_rx = "1.3.6.1.4.1.2636.3.60.1.2.1.1.6.1"
    got = await poll(
        agent({f"{lane_rx}.0": (TAG_INTEGER, -350), f"{lane_rx}.3": (TAG_INTEGER, -120)}), "juniper_dom"
    )
    assert got[("dci_optics_rx_power_dbm", eth(1, lane="1"))].value == -3.5
    assert got[("dci_optics_rx_power_dbm", eth(1, lane="4"))].value == -1.2
    assert ("dci_optics_rx_power_dbm", eth(1, lane="0")) not in got


async def test_if_mib_32_bit_only_where_hc_is_absent() -> None:
    walker = agent(
        {
            f"{IFX}.6.1": (TAG_COUNTER64, 5_000_000_000),  # Ethernet1 has HC
            f"{IFX}.7.1": (TAG_COUNTER64, 70),
            f"{IFT}.10.1": (TAG_COUNTER32, 705_032_704),  # the same bytes mod 2^32: must not be added
            f"{IFT}.11.1": (TAG_COUNTER32, 70),
            f"{IFT}.10.2": (TAG_COUNTER32, 1234),  # Ethernet2: 32-bit only
            f"{IFT}.11.2": (TAG_COUNTER32, 12),
            f"{IFX}.2.2": (TAG_COUNTER32, 3),  # ifInMulticastPkts (32-bit) for Ethernet2
        }
    )
    got = await poll(walker, "if_mib")
    hc = got[("dci_interface_receive_bytes_total", eth(1))]
    assert (hc.raw, hc.width) == (5_000_000_000, 64)
    assert got[("dci_interface_receive_packets_total", eth(1))].raw == 70
    low = got[("dci_interface_receive_bytes_total", eth(2))]
    assert (low.raw, low.width) == (1234, 32)
    assert got[("dci_interface_receive_packets_total", eth(2))].raw == 15


async def test_if_mib_32_bit_fallback_wrap_is_unwrapped() -> None:
    clock = FakeClock()
    walker, store = agent({f"{IFT}.10.2": (TAG_COUNTER32, 2**32 - 200)}), Store(clock)
    cfg = SnmpConfig(address="192.0.2.1:161", community_env="X", modules=("if_mib",))
    src = SnmpSource("dev", cfg, Defaults(), FakeClock(), walker=walker)
    store.ingest("dev", "snmp", await src.poll(), 0)
    await clock.advance(10)
    walker.set(parse_oid(f"{IFT}.10.2"), TAG_COUNTER32, 2**32 - 100)  # a rate seen before the wrap
    store.ingest("dev", "snmp", await src.poll(), 0)
    await clock.advance(10)
    walker.set(parse_oid(f"{IFT}.10.2"), TAG_COUNTER32, 50)
    store.ingest("dev", "snmp", await src.poll(), 0)
    assert store.value("dci_interface_receive_bytes_total", (("device", "dev"), *eth(2))) == 2**32 + 50


async def test_etherlike_pause_32_bit_fallback_without_double_count() -> None:
    walker = agent(
        {
            f"{PAUSE}.3.1": (TAG_COUNTER32, 9),  # dot3InPauseFrames, Ethernet1 also has HC
            f"{PAUSE}.3.2": (TAG_COUNTER32, 4),  # Ethernet2: 32-bit only
            f"{PAUSE}.5.1": (TAG_COUNTER64, 9),  # dot3HCInPauseFrames
        }
    )
    got = await poll(walker, "etherlike")
    assert got[("dci_interface_pause_frames_total", eth(1, direction="rx"))].raw == 9
    assert got[("dci_interface_pause_frames_total", eth(2, direction="rx"))].raw == 4


async def test_fcs_errors_map_from_dot3_stats() -> None:
    # arista_eos.snmprec only holds dot3StatsDuplexStatus (column 19), no dot3StatsFCSErrors rows:
    # that is why it yields no FCS series. Rows that exist do map.
    walker = agent(
        {"1.3.6.1.2.1.10.7.2.1.3.1": (TAG_COUNTER32, 42), "1.3.6.1.2.1.10.7.2.1.19.1": (TAG_INTEGER, 3)}
    )
    got = await poll(walker, "etherlike")
    assert got[("dci_interface_receive_fcs_errors_total", eth(1))].raw == 42
