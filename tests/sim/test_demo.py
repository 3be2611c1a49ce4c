"""``spanwatch demo`` end to end: the fabric, the real collector and the job, checked through /metrics."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spanwatch.sim.truth import Truth

pytestmark = pytest.mark.integration

FAMILIES = {
    "dci_interface_receive_bytes_total",
    "dci_interface_transmit_bytes_total",
    "dci_interface_receive_packets_total",
    "dci_interface_transmit_packets_total",
    "dci_interface_transmit_discards_total",
    "dci_interface_receive_errors_total",
    "dci_interface_receive_fcs_errors_total",
    "dci_interface_pause_frames_total",
    "dci_interface_speed_bytes_per_second",
    "dci_interface_oper_up",
    "dci_interface_fec_corrected_blocks_total",
    "dci_interface_fec_uncorrectable_blocks_total",
    "dci_queue_transmit_packets_total",
    "dci_queue_transmit_bytes_total",
    "dci_queue_dropped_packets_total",
    "dci_queue_dropped_bytes_total",
    "dci_queue_ecn_marked_packets_total",
    "dci_queue_occupancy_bytes",
    "dci_queue_watermark_bytes",
    "dci_pfc_pause_frames_total",
    "dci_pfc_pause_duration_seconds_total",
    "dci_pfc_watchdog_storms_total",
    "dci_buffer_pool_occupancy_bytes",
    "dci_buffer_pool_watermark_bytes",
    "dci_optics_rx_power_dbm",
    "dci_optics_tx_power_dbm",
    "dci_optics_laser_bias_current_amperes",
    "dci_optics_temperature_celsius",
    "dci_optics_supply_voltage_volts",
    "dci_optics_pre_fec_ber",
    "dci_optics_post_fec_ber",
    "dci_optics_osnr_db",
    "dci_optics_esnr_db",
    "dci_optics_q_factor_db",
    "dci_optics_chromatic_dispersion_ps_per_nm",
    "dci_optics_polarization_mode_dispersion_seconds",
    "dci_optics_polarization_dependent_loss_db",
    "dci_optics_carrier_frequency_offset_hertz",
    "dci_optics_frequency_hertz",
    "dci_link_info",
    "dci_link_distance_meters",
    "dci_link_propagation_delay_seconds",
    "dci_link_capacity_bytes_per_second",
    "dci_link_bandwidth_delay_product_bytes",
}


def _values(metrics: str, name: str) -> list[float]:
    return [float(m.group(1)) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", metrics, re.M)]


def test_demo(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    run = subprocess.run(
        [sys.executable, "-m", "spanwatch.cli", "demo", "--duration", "10", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert run.returncode == 0, run.stderr
    for name in ("config.yaml", "steps.jsonl", "truth.json", "metrics.txt"):
        assert (out / name).is_file(), name
    assert list((out / "archive").rglob("*.parquet"))
    metrics = (out / "metrics.txt").read_text()
    present = {line.split("{")[0].split(" ")[0] for line in metrics.splitlines() if line.startswith("dci_")}
    assert present >= FAMILIES, sorted(FAMILIES - present)
    # physics, as the collector exported it
    (delay,) = _values(metrics, "dci_link_propagation_delay_seconds")
    assert abs(delay - 0.49e-3) < 0.01e-3
    cds = _values(metrics, "dci_optics_chromatic_dispersion_ps_per_nm")
    assert cds and all(1650 < cd < 1750 for cd in cds)
    assert max(_values(metrics, "dci_queue_occupancy_bytes")) <= 2e9
    assert max(_values(metrics, "dci_queue_watermark_bytes")) <= 2e9
    job_queue = re.compile(r'^dci_queue_dropped_packets_total\{[^}]*queue="3"[^}]*\} (\S+)$', re.M)
    assert (
        sum(float(v) for v in job_queue.findall(metrics)) == 0
    )  # the job's class: deep + lossless, never full
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert len(steps) >= 20 and set(steps[0]) == {"step", "start", "end", "rank"}
    truth = Truth.model_validate_json((out / "truth.json").read_text())
    assert {e.kind for e in truth.episodes} == {"congestion", "incast", "optical_degradation", "wave_down"}
    assert len(truth.steps) == len(steps)
    assert any(s.network_seconds.total > 1e-3 for s in truth.steps)
    assert (out / "report.html").is_file() and (out / "attribution.parquet").is_file()
