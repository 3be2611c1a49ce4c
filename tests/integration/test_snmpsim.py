"""The SNMP source against snmpsim serving real recordings (LibreNMS walks) and hand-made PFC/CoS records.

Every assertion compares a value with what the .snmprec holds, after the MIB's scaling.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from snmp_agents import copy_recordings, snmpsim

from collector.config import SnmpConfig
from collector.model import Sample
from collector.sources.snmp.source import SnmpSource

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    data = copy_recordings(tmp_path_factory.mktemp("snmprec"))
    (data / "handmade.snmprec").write_text(HANDMADE)
    with snmpsim(data) as port:
        yield port


HANDMADE = (
    "\n".join(
        sorted(
            [
                "1.3.6.1.2.1.1.3.0|67|1000",
                "1.3.6.1.2.1.31.1.1.1.1.5|4|swp5",
                "1.3.6.1.2.1.31.1.1.1.1.6|4|swp6",
                # JUNIPER-COS-MIB jnxCosQstat: ifIndex 5, queue 3
                "1.3.6.1.4.1.2636.3.15.4.1.7.5.3|70|1000",
                "1.3.6.1.4.1.2636.3.15.4.1.53.5.3|70|17",
                "1.3.6.1.4.1.2636.3.15.4.1.58.5.3|70|4096",
                # IEEE8021-PFC-MIB: ifIndex 5
                "1.3.111.2.802.1.1.21.1.1.1.2.5|65|11",
                "1.3.111.2.802.1.1.21.1.1.1.3.5|65|12",
                # CISCO-PFC-EXT-MIB per priority: ifIndex 6, priority 3
                "1.3.6.1.4.1.9.9.813.1.2.1.2.6.3|70|21",
                "1.3.6.1.4.1.9.9.813.1.2.1.3.6.3|70|22",
                # MELLANOX-QOS-MIB: ifIndex 6, priority 4
                "1.3.6.1.4.1.33049.15.1.1.1.8.6.4|70|31",
                "1.3.6.1.4.1.33049.15.1.1.1.15.6.4|70|32",
                # JUNIPER-DOM-MIB lane table: ifIndex 5, lane 2, rx -3.5 dBm
                "1.3.6.1.4.1.2636.3.60.1.2.1.1.6.5.2|2|-350",
            ],
            key=lambda line: tuple(int(x) for x in line.split("|")[0].split(".")),
        )
    )
    + "\n"
)


async def poll(port: int, community: str, monkeypatch: pytest.MonkeyPatch) -> list[Sample]:
    monkeypatch.setenv("SNMP_COMMUNITY", community)
    cfg = SnmpConfig(address=f"127.0.0.1:{port}", community_env="SNMP_COMMUNITY", timeout="3s")
    src = SnmpSource(community, cfg)
    try:
        return await src.poll()
    finally:
        await src.close()


def value(samples: list[Sample], metric: str, **lbls: str) -> float:
    want = set(lbls.items())
    found = [s.value for s in samples if s.metric == metric and want <= set(s.labels)]
    assert found, f"no {metric} {lbls}"
    return found[0]


def metrics(samples: list[Sample]) -> set[str]:
    return {s.metric for s in samples}


IF_MIB = {"dci_interface_oper_up", "dci_interface_receive_errors_total"}


@pytest.mark.parametrize(
    "community",
    [
        "arista_eos",
        "arista_eos_7280r",
        "ciena-waveserver",
        "cumulus_cumulus",
        "dell-sonic",
        "iosxr_ncs540",
        "junos_ber",
        "junos_qfx5100",
        "nxos_n9k-c93180yc-fx3",
        "ocnos_as7712-32x",
        "smartos-dcp-m_dcp-m40-pam4-zr",
        "timos_hc",
    ],
)
async def test_if_mib_everywhere(agent: int, community: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert metrics(await poll(agent, community, monkeypatch)) >= IF_MIB


async def test_arista_entity_sensor_dom(agent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    s = await poll(agent, "arista_eos", monkeypatch)
    # entPhySensorValue 6322, watts(6), scale milli(8), precision 4 -> 0.6322 mW
    assert value(s, "dci_optics_tx_power_dbm", interface="Ethernet1") == pytest.approx(
        10 * math.log10(0.6322)
    )
    assert value(s, "dci_optics_temperature_celsius", interface="Ethernet1") == pytest.approx(25.8)
    assert value(s, "dci_optics_laser_bias_current_amperes", interface="Ethernet1") == pytest.approx(0.03345)


async def test_nxos_cisco_dbm_sensors(agent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    s = await poll(agent, "nxos_n9k-c93180yc-fx3", monkeypatch)
    # dBm(14), scale milli, value 0 in the recording; lane from "Ethernet1/25 Lane 1 ..."
    assert value(s, "dci_optics_rx_power_dbm", interface="Ethernet1/25", lane="1") == 0.0
    assert value(s, "dci_optics_temperature_celsius", interface="Ethernet1/25") == pytest.approx(45.542)
    assert value(s, "dci_optics_supply_voltage_volts", interface="Ethernet1/25") == pytest.approx(3.27)


async def test_junos_dom(agent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    s = await poll(agent, "junos_qfx5100", monkeypatch)
    assert value(s, "dci_optics_rx_power_dbm", interface="xe-0/0/0") == pytest.approx(-2.30)
    assert value(s, "dci_optics_laser_bias_current_amperes", interface="xe-0/0/0") == pytest.approx(0.005588)


async def test_junos_coherent(agent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    s = await poll(agent, "junos_ber", monkeypatch)
    i = {"interface": "et-3/0/0"}
    assert value(s, "dci_optics_chromatic_dispersion_ps_per_nm", **i) == 818
    assert value(s, "dci_optics_polarization_mode_dispersion_seconds", **i) == pytest.approx(4e-12)
    assert value(s, "dci_optics_q_factor_db", **i) == pytest.approx(13.7)
    assert value(s, "dci_optics_esnr_db", **i) == pytest.approx(14.4)
    assert value(s, "dci_optics_rx_power_dbm", **i) == pytest.approx(-8.68)
    assert value(s, "dci_optics_pre_fec_ber", **i) == pytest.approx(530e-9)
    assert value(s, "dci_optics_pre_fec_ber_max", **i) == pytest.approx(650e-9)
    assert value(s, "dci_interface_fec_corrected_blocks_total", **i) == 18663407
    assert value(s, "dci_interface_fec_uncorrectable_blocks_total", **i) == 0


async def test_nokia_lane_ddm(agent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    s = await poll(agent, "timos_7750", monkeypatch)
    # tmnxDDMLaneRxOpticalPower 16102 (0.1 uW) -> 1.6102 mW
    got = value(s, "dci_optics_rx_power_dbm", interface="1/1/c1", lane="1")
    assert got == pytest.approx(10 * math.log10(1.6102))
    assert value(s, "dci_optics_temperature_celsius", interface="1/1/c1") == pytest.approx(8368 / 256)


async def test_arista_queues_pfc_ecn(agent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    s = await poll(agent, "arista_eos_7280r", monkeypatch)
    assert value(s, "dci_queue_transmit_packets_total", interface="Ethernet47", queue="1") == 150124
    assert value(s, "dci_queue_dropped_packets_total", interface="Ethernet47", queue="1") == 0
    assert "dci_pfc_pause_frames_total" in metrics(s)
    assert "dci_queue_ecn_marked_packets_total" in metrics(s)


async def test_iosxr_cbqos_and_sensors(agent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    s = await poll(agent, "iosxr_ncs540", monkeypatch)
    assert {"dci_queue_dropped_packets_total", "dci_optics_rx_power_dbm"} <= metrics(s)


async def test_optical_walks_without_our_mibs(agent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Infinera Groove only has its vendor MIB (no IF-MIB, no ENTITY sensors): only infinera_groove maps it.
    s = await poll(agent, "infinera-groove", monkeypatch)
    assert metrics(s) == {"dci_optics_rx_power_dbm", "dci_optics_tx_power_dbm"}
    s = await poll(agent, "ciena-waveserver", monkeypatch)
    assert value(s, "dci_interface_oper_up", interface="ILAN-1") in (0.0, 1.0)


async def test_handmade_pfc_and_cos(agent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    s = await poll(agent, "handmade", monkeypatch)
    assert value(s, "dci_queue_dropped_packets_total", interface="swp5", queue="3") == 17
    assert value(s, "dci_queue_occupancy_bytes", interface="swp5", queue="3") == 4096
    # IEEE8021-PFC-MIB is per interface: no priority label (the catalogue's priority is 0-7)
    ieee = [x for x in s if x.metric == "dci_pfc_pause_frames_total" and ("interface", "swp5") in x.labels]
    assert len(ieee) == 2 and all("priority" not in dict(x.labels) for x in ieee)
    assert value(s, "dci_pfc_pause_frames_total", interface="swp5", direction="rx") == 12
    assert value(s, "dci_pfc_pause_frames_total", interface="swp6", direction="tx", priority="3") == 21
    assert value(s, "dci_pfc_pause_frames_total", interface="swp6", direction="rx", priority="4") == 31
    # jnxDomLaneIndex 2 is the third lane (0-based in the MIB): lane "3"
    assert value(s, "dci_optics_rx_power_dbm", interface="swp5", lane="3") == pytest.approx(-3.5)
