"""Fixtures of the report tests: one short demo run (session-wide) and a small hand-made analysis folder.

The demo gives a real report end to end (fabric, collector, analysis, claims); the hand-made folder gives a
deterministic one for the Markdown golden file.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from analyzer import schemas
from spanwatch.cli import main

T0 = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)

CONFIG = """
collector: {archive: {path: archive}}
targets:
  - name: dci1.site-a
    labels: {site: a, vendor: acme, model: x1}
    gnmi: {address: "127.0.0.1:1", insecure: true}
  - name: dci1.site-b
    labels: {site: b, vendor: zenith, model: z9}
    gnmi: {address: "127.0.0.1:2", insecure: true}
links:
  - name: a-b
    site_a: a
    site_b: b
    distance_km: 100
    members:
      - {device: dci1.site-a, interface: Ethernet1/1}
      - {device: dci1.site-b, interface: Ethernet1/1}
"""

CLAIMS = """
vendors:
  - name: Acme DCI
    match: {vendor: acme}
    claims:
      - {id: lossless, text: "Zero loss", measure: dropped_packets_per_terabyte, op: "<=", value: 0}
      - {id: latency, text: "Under 1 ms per step", measure: exposed_latency_p99_seconds, op: "<=", value: 0.001}
      - {id: osnr, text: "OSNR over 28 dB", measure: osnr_min_db, op: ">=", value: 28}
  - name: Zenith DCI
    match: {vendor: zenith}
    claims:
      - {id: latency, text: "Under 1 ms per step", measure: exposed_latency_p99_seconds, op: "<=", value: 0.001}
      - {id: gpu, text: "Costs no GPU time", measure: gpu_hours_lost, op: "<=", value: 0}
"""


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 15 s ``spanwatch demo`` run, report included."""
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--duration", "15", "--out", str(out)]) == 0
    return out


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def write_analysis(folder: Path) -> Path:
    """A small analysis folder as ``spanwatch analyze`` writes it: 10 steps, 2 events, no archive.

    Args:
        folder: where to write (created).

    Returns:
        The config file written beside it.
    """
    folder.mkdir(parents=True, exist_ok=True)
    steps = [
        {
            "step": s,
            "rank": 0,
            "start_time": _at(s),
            "end_time": _at(s + (1.2 if s in (4, 5) else 1.0)),
            "duration_seconds": 1.2 if s in (4, 5) else 1.0,
            "baseline_seconds": 1.0,
            "inflation_seconds": 0.2 if s in (4, 5) else 0.0,
            "inflated": s in (4, 5),
            "events": 1 if s in (4, 5) else 0,
        }
        for s in range(10)
    ]
    events = [
        {
            "event_id": 0,
            "kind": "pfc",
            "link": "a-b",
            "device": "dci1.site-a",
            "interface": "Ethernet1/1",
            "start_time": _at(4),
            "end_time": _at(6),
            "duration_seconds": 2.0,
            "worst": 0.3,
            "metrics": "x",
            "samples": 3,
        },
        {
            "event_id": 1,
            "kind": "osnr",
            "link": "a-b",
            "device": "dci1.site-b",
            "interface": "Ethernet1/1",
            "start_time": _at(8),
            "end_time": _at(9),
            "duration_seconds": 1.0,
            "worst": 24.0,
            "metrics": "y",
            "samples": 2,
        },
    ]
    attribution = [
        {
            "step": s,
            "rank": 0,
            "event_id": 0,
            "link": "a-b",
            "device": "dci1.site-a",
            "interface": "Ethernet1/1",
            "kind": "pfc",
            "overlap_seconds": 1.0,
            "share": 1.0,
            "attributed_seconds": 0.2,
        }
        for s in (4, 5)
    ]
    links = [
        {
            "link": "a-b",
            "steps_affected": 2,
            "exposed_total_seconds": 0.4,
            "exposed_p50_seconds": 0.0,
            "exposed_p99_seconds": 0.2,
            "share_of_run": 0.04,
            "gpu_hours_lost": None,
        }
    ]
    measures = [
        ("device", "dci1.site-a", "dropped_packets_per_terabyte", 0.0, "packets/TB"),
        ("device", "dci1.site-a", "exposed_latency_p99_seconds", 0.2, "s"),
        ("device", "dci1.site-b", "osnr_min_db", 24.0, "dB"),
        ("run", "all", "exposed_latency_p50_seconds", 0.0, "s"),
        ("run", "all", "exposed_latency_p99_seconds", 0.2, "s"),
    ]
    tables = {
        "steps": pl.DataFrame(steps, schema=schemas.STEP_ANALYSIS, strict=False),
        "events": pl.DataFrame(events, schema=schemas.EVENTS, strict=False),
        "attribution": pl.DataFrame(attribution, schema=schemas.ATTRIBUTION, strict=False),
        "links": pl.DataFrame(links, schema=schemas.LINK_EXPOSURE, strict=False),
        "measures": pl.DataFrame(measures, schema=schemas.MEASURES, orient="row"),
    }
    for name, frame in tables.items():
        frame.write_parquet(folder / f"{name}.parquet")
    config = folder / "config.yaml"
    config.write_text(CONFIG)
    summary = {
        "inputs": {"archive": None, "config": str(config), "claims": None, "logs": ["steps.jsonl"]},
        "gpus": None,
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return config


@pytest.fixture
def small_analysis(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(analysis folder, config, claims) of the hand-made analysis."""
    folder = tmp_path / "analysis"
    config = write_analysis(folder)
    claims = tmp_path / "claims.yaml"
    claims.write_text(CLAIMS)
    return folder, config, claims
