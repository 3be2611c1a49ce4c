"""The report's numbers, computed without rendering: verdicts, evidence, sections, JSON schema."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from analyzer.claims import load_claims
from analyzer.report import data, verdicts
from analyzer.report.model import Evidence, to_json
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
    # Measured, but on too little: no archive (0 readings) and a p99 over 10 steps (100 needed).
    assert verdicts == {
        "lossless": ("insufficient data", 0.0),
        "latency": ("insufficient data", 0.2),
        "osnr": ("no data", None),
    }
    assert acme.claims[0].reason.startswith("only 0 readings of dci_queue_dropped_packets_total")
    latency = acme.claims[1]
    assert latency.reason.startswith("only 10 steps, 100 needed (measured: dci1.site-a measured 200 ms")
    assert latency.evidence.basis == "steps" and latency.evidence.samples == 10
    assert latency.evidence.minimum_samples == 100
    assert [e.event_id for e in latency.evidence.events] == [0]
    # Steps were logged and site-b reported an event, but nothing was attributed to it: it measured zero.
    assert zenith.claims[0].verdict == "insufficient data" and zenith.claims[0].measured == 0.0
    assert zenith.claims[1].verdict == "no data" and "--gpus" in zenith.claims[1].reason
    assert (acme.passed, acme.failed, acme.insufficient, acme.no_data) == (0, 0, 2, 1)


def test_pass_needs_coverage() -> None:
    """A PASS on telemetry covering 60 s of an 11 h run is insufficient data; a FAIL with samples stands."""
    evidence = Evidence("steps", 200_000, None, None, None, 0, [], coverage=60 / 41_000, minimum_samples=100)
    assert (
        verdicts._insufficient(evidence, "pass")
        == "telemetry covered 0.1% of the run, 90% needed to vouch for it"
    )
    assert verdicts._insufficient(evidence, "fail") is None
    assert verdicts._insufficient(replace(evidence, samples=99), "fail") == "only 99 steps, 100 needed"
    assert verdicts._insufficient(replace(evidence, coverage=0.95), "pass") is None


def test_sections(small_analysis: tuple[Path, Path, Path]) -> None:
    report = _build(small_analysis)
    g = report.glance
    assert (g.steps, g.ranks, g.events, g.hurt_steps, g.distance_km) == (10, 1, 2, 2, 100.0)
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
    verdict_names = ("pass", "fail", "insufficient data", "no data")
    assert all(c["verdict"] in verdict_names for v in document["vendors"] for c in v["claims"])
    # Optics verdicts rest on readings with signal: the demo's down wave is an outage, not a failed claim.
    claims = {(v["name"][:8], c["id"]): c for v in document["vendors"] for c in v["claims"]}
    assert claims[("Vendor A", "osnr-margin")]["measured"] > 20
    assert claims[("Vendor A", "coherent-ber")]["measured"] < 0.5
    # One p99 per series: the claim and the distribution table read the same watermark.
    b = next(d for d in document["distributions"] if d["vendor"].startswith("Vendor B"))
    assert claims[("Vendor B", "buffer-headroom")]["measured"] == b["queue_watermark_bytes"]["values"][99]
    assert document["summary"]["vendors"] and document["coverage"]["links"]
    assert document["plan"] is not None and document["optics"]["series"]
    assert document["glance"]["steps"] > 10 and document["timeline"]["step"]


def test_the_methodology_says_which_evidence_judged_the_steps(
    small_analysis: tuple[Path, Path, Path],
) -> None:
    folder, config, claims = small_analysis
    analysis = data.load_analysis(folder)
    analysis.summary["blame"] = {"evidence": {"communication": 1200, "step_time": 34}}
    report = data.build_report(analysis, load_config(config), load_claims(claims))
    assert report.methodology.blame[0].startswith("Evidence: 1,200 logged line(s) judged by their measured")
    assert "34 by their duration alone" in report.methodology.blame[0]


def test_the_methodology_says_how_the_hosts_clock_was_set_and_what_the_logs_allowed(
    small_analysis: tuple[Path, Path, Path],
) -> None:
    folder, config, claims = small_analysis
    analysis = data.load_analysis(folder)

    def clock(blame: dict[str, object]) -> str:
        analysis.summary["blame"] = blame
        report = data.build_report(analysis, load_config(config), load_claims(claims))
        return report.methodology.blame[-1]

    given = {"skew_seconds": -1.5, "skew_given": True, "skew_correlation": None, "skew_range_seconds": None}
    assert (
        clock(given)
        == "The hosts' clock was taken as -1.50 s off the switches' (hosts minus switches, given)."
    )
    loose = {
        "skew_seconds": 0.4,
        "skew_given": False,
        "skew_correlation": 0.6,
        "skew_range_seconds": [-1.1, 1.9],
    }
    text = clock(loose)
    assert text.startswith("The hosts' clock was read as +0.40 s off the switches' (hosts minus switches)")
    assert "anywhere from -1.10 s to +1.90 s" in text and "--skew" in text
    pinned = {**loose, "skew_range_seconds": [0.4, 0.4]}
    assert clock(pinned).endswith("lining the logged lines up with the telemetry.")
    unread = {**loose, "skew_seconds": 0.0, "skew_correlation": None, "skew_range_seconds": None}
    assert clock(unread).startswith("The hosts' clock could not be read from the logs")
    # An analysis from before the clock was reported says nothing of it.
    assert not clock({"evidence": {"communication": 1}}).startswith("The hosts' clock")


def test_the_methodology_says_how_finely_a_line_of_several_iterations_is_placed(
    small_analysis: tuple[Path, Path, Path],
) -> None:
    folder, config, claims = small_analysis
    analysis = data.load_analysis(folder)

    def said(blame: dict[str, object]) -> list[str]:
        analysis.summary["blame"] = blame
        return data.build_report(analysis, load_config(config), load_claims(claims)).methodology.blame

    short = {"interval_lines": 1200, "poll_seconds": 1.0, "typical_step_seconds": 0.17}
    text = said(short)[-1]
    assert text.startswith("1,200 logged line(s) average several iterations each.")
    assert "polled every 1 s" in text and "takes 0.17 s" in text and "one or more off" in text
    # Iterations longer than a poll are placed by it; a log of one line per step has nothing to place.
    for blame in ({**short, "typical_step_seconds": 2.5}, {**short, "interval_lines": 0}, {"evidence": {}}):
        assert not any("average several iterations" in t for t in said(blame))
