"""The shipped Ciena Waveserver, Infinera Groove and Smartoptics DCP modules against snmpsim serving the
LibreNMS recordings of those devices; every value is the recording's, after the MIB's scaling."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from collector.config import SnmpConfig
from collector.model import Sample
from collector.sources.snmp.source import SnmpSource
from tests.integration.snmp_agents import copy_recordings, snmpsim

pytestmark = pytest.mark.integration

RECORDINGS = ["ciena-waveserver", "infinera-groove", "smartos-dcp-m_dcp-m40-pam4-zr"]


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with snmpsim(copy_recordings(tmp_path_factory.mktemp("snmprec"), RECORDINGS)) as port:
        yield port


async def poll(port: int, community: str, module: str, monkeypatch: pytest.MonkeyPatch) -> list[Sample]:
    monkeypatch.setenv("SNMP_COMMUNITY", community)
    cfg = SnmpConfig(
        address=f"127.0.0.1:{port}", community_env="SNMP_COMMUNITY", timeout="5s", modules=(module,)
    )
    source = SnmpSource(community, cfg)
    try:
        return await source.poll()
    finally:
        await source.close()


def values(samples: list[Sample], metric: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {s.labels: s.value for s in samples if s.metric == metric}


async def test_ciena_waveserver_pm_optical_power(agent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    samples = await poll(agent, "ciena-waveserver", "ciena_waveserver", monkeypatch)
    key = (("interface", "PTP-1/1"), ("lane", "1"))  # the WaveLogic line port, by its ifName
    assert values(samples, "dci_optics_rx_power_dbm_min")[key] == pytest.approx(-21.004)
    assert values(samples, "dci_optics_rx_power_dbm_max")[key] == pytest.approx(-20.956)
    assert values(samples, "dci_optics_rx_power_dbm_avg")[key] == pytest.approx(-20.973)
    assert values(samples, "dci_optics_tx_power_dbm_avg")[key] == pytest.approx(4.0)
    # the client QSFP28s report four lanes each
    assert {dict(k)["lane"] for k in values(samples, "dci_optics_tx_power_dbm_min")} == {"1", "2", "3", "4"}


async def test_infinera_groove_port_powers(agent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    samples = await poll(agent, "infinera-groove", "infinera_groove", monkeypatch)
    rx = values(samples, "dci_optics_rx_power_dbm")
    tx = values(samples, "dci_optics_tx_power_dbm")
    assert rx[(("interface", "port-1/1/0/1"),)] == pytest.approx(-14.5)
    assert tx[(("interface", "port-1/1/0/3"),)] == pytest.approx(6.3)
    assert rx[(("interface", "port-1/1/0/3"), ("lane", "1"))] == pytest.approx(-0.2)
    assert tx[(("interface", "port-1/1/0/3"), ("lane", "4"))] == pytest.approx(0.3)
    assert (("interface", "port-1/1/0/4"),) not in rx  # -99.0: no light, no reading


async def test_smartoptics_dcp_interfaces(agent: int, monkeypatch: pytest.MonkeyPatch) -> None:
    samples = await poll(agent, "smartos-dcp-m_dcp-m40-pam4-zr", "smartoptics_dcp", monkeypatch)
    line = (("interface", "if-1/line"),)
    assert values(samples, "dci_optics_rx_power_dbm")[line] == pytest.approx(-11.0)
    assert values(samples, "dci_optics_tx_power_dbm")[line] == pytest.approx(4.8)
    up = values(samples, "dci_interface_oper_up")
    assert up[line] == 1.0
    assert sorted(set(up.values())) == [0.0, 1.0]
    assert all(v > -99 for v in values(samples, "dci_optics_rx_power_dbm").values())  # -990: no light
