"""The default process count follows the configured targets' estimated load, not the core count (issue 33)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from collector import commands, workload
from collector import config as configuration


@pytest.fixture(autouse=True)
def _community(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("C", "public")


def _config(snmp: int = 0, gnmi: int = 0, interval: str = "10s", sample: str = "1s") -> configuration.Config:
    targets = [
        {"name": f"s{i}", "snmp": {"address": f"192.0.2.{i % 250}:161", "community_env": "C"}}
        for i in range(snmp)
    ]
    targets += [
        {
            "name": f"g{i}",
            "gnmi": {"address": f"192.0.2.{i % 250}:6030", "insecure": True, "sample_interval": sample},
        }
        for i in range(gnmi)
    ]
    return configuration.parse({"defaults": {"interval": interval}, "targets": targets})


def test_snmp_only_at_200_targets_is_one_process_on_any_machine() -> None:
    choice = workload.choose(_config(snmp=200), available=64)
    assert choice.workers == 1
    assert choice.load == pytest.approx(200 * workload.SNMP_POLL_CPU_SECONDS / 10)
    assert "one process" in choice.reason and "200 targets" in choice.reason


@pytest.mark.parametrize(
    ("targets", "sample", "available", "workers"),
    [
        (50, "1s", 2, 1),  # 51k updates/s: light
        (50, "500ms", 2, 1),  # 102k updates/s: under half a core
        (50, "333ms", 2, 2),  # 154k updates/s: past half a core, both cores
        (50, "333ms", 16, 2),  # more cores do not mean more processes
        (50, "100ms", 16, 5),  # 512k updates/s
        (50, "100ms", 2, 2),  # never more than the cores
        (1, "10ms", 16, 1),  # one target lives in one process
    ],
)
def test_gnmi_load_decides_the_workers(targets: int, sample: str, available: int, workers: int) -> None:
    choice = workload.choose(_config(gnmi=targets, sample=sample), available=available)
    assert choice.workers == workers
    assert (f"{workers} worker processes" in choice.reason) == (workers > 1)


def test_snmp_load_adds_to_gnmi_load() -> None:
    alone = workload.choose(_config(gnmi=20, sample="1s"), available=8)
    both = workload.choose(_config(snmp=4000, gnmi=20, sample="1s"), available=8)
    assert alone.workers == 1
    assert both.load == pytest.approx(alone.load + 4000 * workload.SNMP_POLL_CPU_SECONDS / 10)
    assert both.workers == 8  # 3.9 cores of SNMP polls at 0.5 a process


def test_collect_logs_what_it_chose_and_why(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "collector.yaml"
    path.write_text(
        json.dumps({"targets": [{"name": "s0", "snmp": {"address": "192.0.2.1", "community_env": "C"}}]})
    )
    with caplog.at_level(logging.INFO, logger="collector.commands"):
        assert commands._default_workers(path, None) == 1
    assert "processes: 1 (1 targets estimated at 0.00 of a core" in caplog.text
    assert "--workers N overrides" in caplog.text
