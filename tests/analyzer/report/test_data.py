"""The report's numbers, computed without rendering: verdicts, evidence, sections, JSON schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from analyzer.claims import load_claims
from analyzer.report import data
from analyzer.report.model import to_json
from analyzer.topology import load_config

SCHEMA = json.loads((Path(data.__file__).parent / "schema.json").read_text())


def _build(small_analysis: tuple[Path, Path, Path]) -> data.ReportData:
    folder, config, claims = small_analysis
    return data.build_report(data.load_analysis(folder), load_config(config), load_claims(claims))


def test_verdicts_and_evidence(small_analysis: tuple[Path, Path, Path]) -> None:
    report = _build(small_analysis)
    acme, zenith = report.vendors
    assert acme.devices == ["dci1.site-a"] and zenith.devices == ["dci1.site-b"]
    verdicts = {c.id: (c.verdict, c.measured) for c in acme.claims}
    assert verdicts == {"lossless": ("pass", 0.0), "latency": ("fail", 0.2), "osnr": ("no data", None)}
    latency = acme.claims[1]
    assert latency.evidence.basis == "steps" and latency.evidence.samples == 10
    assert [e.event_id for e in latency.evidence.events] == [0]
    # Steps were logged and site-b reported an event, but nothing was attributed to it: it measured zero.
    assert zenith.claims[0].verdict == "pass" and zenith.claims[0].measured == 0.0
    assert zenith.claims[1].verdict == "no data" and "--gpus" in zenith.claims[1].reason
    assert (acme.passed, acme.failed, acme.no_data) == (1, 1, 1)


def test_sections(small_analysis: tuple[Path, Path, Path]) -> None:
    report = _build(small_analysis)
    g = report.glance
    assert (g.steps, g.ranks, g.events, g.inflated_steps, g.distance_km) == (10, 1, 2, 2, 100.0)
    assert g.exposed_total_seconds == pytest.approx(0.4)
    assert report.timeline.t[:3] == [0.0, 1.0, 2.0] and len(report.timeline.bands) == 2
    assert (
        report.timeline.bands[0].category == "congestion" and report.timeline.bands[1].category == "optical"
    )
    assert report.link_exposure[0].by_kind == {"pfc": pytest.approx(0.4)}
    inflation = report.distributions[0].step_inflation_seconds
    assert inflation.n == 10 and inflation.values[0] == 0.0 and inflation.values[-1] == pytest.approx(0.2)
    # No archive: the report says so instead of failing, and the plan needs the traffic moved.
    assert report.notes and "no archive" in report.notes[0]
    assert report.plan is None


def test_json_matches_schema(small_analysis: tuple[Path, Path, Path]) -> None:
    jsonschema.validate(to_json(_build(small_analysis)), SCHEMA)


def test_cdf_quantiles() -> None:
    cdf = data.cdf([float(v) for v in range(101)])
    assert cdf.n == 101 and cdf.values[50] == 50.0 and len(cdf.values) == 101
    assert data.cdf([]).values == []


def test_demo_report(demo_dir: Path) -> None:
    """The demo ends with the report; its JSON follows the schema and carries every section."""
    document = json.loads((demo_dir / "report.json").read_text())
    jsonschema.validate(document, SCHEMA)
    assert [v["name"] for v in document["vendors"]] == [
        "Vendor A deep-buffer DCI (site a)",
        "Vendor B coherent DCI (site b)",
    ]
    assert all(c["verdict"] in ("pass", "fail", "no data") for v in document["vendors"] for c in v["claims"])
    assert document["plan"] is not None and document["optics"]["series"]
    assert document["glance"]["steps"] > 10 and document["timeline"]["step"]
