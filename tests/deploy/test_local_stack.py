"""The compose stack watches the simulated fabric out of the box: the sim writes a collector config the
collector service reads, and Prometheus scrapes where that collector listens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from collector import config as configuration

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / "deploy" / "local"


def _compose() -> dict[str, dict[str, object]]:
    return yaml.safe_load((LOCAL / "compose.yaml").read_text())["services"]  # type: ignore[no-any-return]


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_the_collector_reads_the_config_the_fabric_writes_and_prometheus_scrapes_it() -> None:
    services = _compose()
    fabric, collector = services["fabric"], services["collector"]
    fabric_command, collector_command = fabric["command"], collector["command"]
    assert isinstance(fabric_command, list) and isinstance(collector_command, list)
    assert fabric_command[0] == "sim" and collector_command[0] == "collect"
    assert _option(collector_command, "--config") == _option(fabric_command, "--out") + "/config.yaml"
    assert collector["network_mode"] == "service:fabric"  # the sim listens on loopback only
    listen = _option(fabric_command, "--listen")
    assert listen.startswith("0.0.0.0:")
    prometheus = yaml.safe_load((LOCAL / "prometheus.yml").read_text())
    targets = prometheus["scrape_configs"][0]["static_configs"][0]["targets"]
    assert targets == [f"fabric:{listen.rpartition(':')[2]}"]
    assert prometheus["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["alertmanager:9093"]


def test_spanwatch_sim_writes_a_valid_config_with_probes(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "spanwatch.cli", "--log-level", "warning", "sim", "--out", str(tmp_path),
         "--listen", "0.0.0.0:9464", "--duration", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    config = configuration.load(tmp_path / "config.yaml")
    assert config.collector.listen == "0.0.0.0:9464"
    (link,) = config.links
    assert link.probe is not None and {t.name for t in link.probe.targets} == {"site-a", "site-b"}
