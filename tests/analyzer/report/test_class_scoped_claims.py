"""A lossless claim is about the job's traffic class: another tenant's best-effort drops (queue 0) beside a
clean lossless queue (queue 3) do not fail it, and the verdict says which class it read. ``traffic_class:
all`` keeps the old reading (every class together), and says so. A PFC claim too: pauses on another class's
priority are not the job's, from the archive's priority label to the verdict."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from analyzer import measures, network, schemas
from analyzer.claims import Claim, load_claims
from analyzer.errors import InputError
from analyzer.report import markdown, readings
from analyzer.report.verdicts import Tables, evaluate, vendor_reports

GOLDEN = Path(__file__).parents[2] / "golden" / "claims-best-effort-beside-lossless.md"
T0 = datetime(2026, 12, 1, 10, tzinfo=UTC)
HOUR = timedelta(hours=1)
BEST_EFFORT_DROPS = 3.4e7
# (metric, queue, increase): a terabyte sent; best effort dropped, the job's lossless queue did not
LOSS = [
    (measures.TX_BYTES, None, 1e12),
    (measures.DROPPED, "0", BEST_EFFORT_DROPS),
    (measures.DROPPED, "3", 0.0),
]
BEST_EFFORT_PAUSED_S = 600.0
# (metric, priority, increase) over an hour: priority 0 paused for 10 minutes, the job's priority 3 never
PAUSES = [(measures.PFC_SECONDS, "0", BEST_EFFORT_PAUSED_S), (measures.PFC_SECONDS, "3", 0.0)]
Rows = list[tuple[str, str | None, float]]


def _totals(rows: Rows) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "device": "dci-a",
                "interface": "e1",
                "link": "ab",
                "metric": m,
                "queue": q,
                "increase": v,
                "max": v,
                "min": 0.0,
                "first": T0,
                "last": T0 + HOUR,
                "no_signal": 0,
                "run": "all",
            }
            for m, q, v in rows
        ]
    )


def _measured(job_class: str | None, rows: Rows) -> pl.DataFrame:
    inputs = measures.MeasureInputs(
        totals=_totals(rows),
        samples=pl.DataFrame(
            schema={
                "device": pl.String(),
                "interface": pl.String(),
                "link": pl.String(),
                "metric": pl.String(),
                "queue": pl.String(),
                "bucket": pl.Int32(),
                "count": pl.Int64(),
                "run": pl.String(),
            }
        ),
        events=pl.DataFrame(schema=schemas.EVENTS).with_columns(run=pl.lit("all")),
        attribution=pl.DataFrame(schema=schemas.ATTRIBUTION).with_columns(run=pl.lit("all")),
        steps=pl.DataFrame(schema=schemas.STEP_ANALYSIS),
        gpus=None,
        job_class=job_class,
    )
    return measures.compute_all(inputs, [])


def _best_effort_events() -> pl.DataFrame:
    """The episodes the other tenant's class raised: drops in queue 0, pauses on priority 0."""
    rows = [(0, "drops", measures.DROPPED), (1, "pfc", measures.PFC_SECONDS)]
    return pl.DataFrame(
        [
            {
                "event_id": event_id,
                "kind": kind,
                "link": "ab",
                "device": "dci-a",
                "interface": "e1",
                "queue": "0",
                "start_time": T0 + HOUR / 4,
                "end_time": T0 + HOUR / 2,
                "duration_seconds": 900.0,
                "worst": 1.0,
                "metrics": metric,
                "samples": 10,
            }
            for event_id, kind, metric in rows
        ],
        schema=schemas.EVENTS,
    )


def _tables(job_class: str | None, rows: Rows = LOSS, events: pl.DataFrame | None = None) -> Tables:
    seen = readings.empty(None)
    metrics = sorted({metric for metric, _, _ in rows})
    counts = pl.DataFrame(
        {
            "device": ["dci-a"] * len(metrics),
            "metric": metrics,
            "n": [100] * len(metrics),
            "first": [T0] * len(metrics),
            "last": [T0 + HOUR] * len(metrics),
            "no_signal": [0] * len(metrics),
        },
        schema=seen.counts.schema,
    )
    return Tables(
        pl.DataFrame(schema=schemas.STEP_ANALYSIS),
        pl.DataFrame(schema=schemas.EVENTS) if events is None else events,
        pl.DataFrame(schema=schemas.ATTRIBUTION),
        _measured(job_class, rows),
        dataclasses.replace(seen, counts=counts),
        None,
        job_class=job_class,
    )


def _claims(tmp_path: Path, extra: str = "", measure: str = "dropped_packets_per_terabyte") -> Claim:
    path = tmp_path / "claims.yaml"
    path.write_text(
        "vendors:\n  - name: A\n    match: {vendor: a}\n    claims:\n"
        f"      - {{id: lossless, text: Zero loss, measure: {measure}, op: '<=', value: 0{extra}}}\n"
    )
    return load_claims(path).vendors[0].claims[0]


def test_best_effort_drops_beside_a_clean_lossless_queue_pass_the_lossless_claim(tmp_path: Path) -> None:
    claim = _claims(tmp_path)
    assert claim.traffic_class == "job"  # the default of a measure read from queue counters
    result = evaluate(claim, ["dci-a"], _tables("3"))
    assert (result.verdict, result.measured) == ("pass", 0.0)
    assert "the job's traffic class 3" in result.reason


def test_every_class_together_still_reads_the_best_effort_drops(tmp_path: Path) -> None:
    claim = _claims(tmp_path, ", traffic_class: all")
    result = evaluate(claim, ["dci-a"], _tables("3"))
    assert result.verdict == "fail" and result.measured == pytest.approx(BEST_EFFORT_DROPS)


def test_without_a_known_class_the_verdict_says_it_read_every_class(tmp_path: Path) -> None:
    result = evaluate(_claims(tmp_path), ["dci-a"], _tables(None))
    assert result.verdict == "fail"
    assert "every traffic class: the analysis knew no job's class" in result.reason


def test_a_class_on_a_measure_without_classes_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "claims.yaml"
    path.write_text(
        "vendors:\n  - name: A\n    match: {vendor: a}\n    claims:\n"
        "      - {id: osnr, text: OSNR, measure: osnr_min_db, op: '>=', value: 28, traffic_class: job}\n"
    )
    with pytest.raises(InputError, match="'osnr_min_db' is not measured per traffic class"):
        load_claims(path)


def test_pauses_on_another_class_priority_pass_the_pfc_claim_on_the_jobs(tmp_path: Path) -> None:
    claim = _claims(tmp_path, measure="pfc_pause_seconds_per_hour")
    assert claim.traffic_class == "job"  # PFC pause counters are per priority: the job's by default
    result = evaluate(claim, ["dci-a"], _tables("3", PAUSES))
    assert (result.verdict, result.measured) == ("pass", 0.0)
    assert "the job's traffic class 3" in result.reason


def test_every_priority_together_still_reads_the_other_class_pauses(tmp_path: Path) -> None:
    claim = _claims(tmp_path, ", traffic_class: all", measure="pfc_pause_seconds_per_hour")
    result = evaluate(claim, ["dci-a"], _tables("3", PAUSES))
    assert result.verdict == "fail" and result.measured == pytest.approx(BEST_EFFORT_PAUSED_S)


def test_a_pfc_series_priority_is_its_class_in_the_totals() -> None:
    """The archive names a PFC series' class in its ``priority`` label (no ``queue``): the totals the
    measures read carry it as the series' class, as the events do."""
    labels = pl.DataFrame(
        {
            "series": [1, 2, 3],
            "device": ["dci-a"] * 3,
            "interface": ["e1"] * 3,
            "link": ["ab"] * 3,
            "metric": [measures.PFC_SECONDS, measures.PFC_SECONDS, measures.DROPPED],
            "queue": [None, None, "0"],
            "priority": ["0", "3", None],
            "direction": ["rx", "rx", None],
        }
    )
    signals = pl.DataFrame(
        {
            "series": [1, 1, 2, 2, 3, 3],
            "metric": [measures.PFC_SECONDS] * 4 + [measures.DROPPED] * 2,
            "time": [T0, T0 + HOUR] * 3,
            "value": [0.0, 600.0, 0.0, 0.0, 0.0, 5.0],
            "increase": [0.0, 600.0, 0.0, 0.0, 0.0, 5.0],
        }
    )
    totals = network.totals(signals.lazy(), labels.lazy()).collect()
    by_class = {(m, q): v for m, q, v in totals.select("metric", "queue", "increase").iter_rows()}
    assert by_class == {
        (measures.PFC_SECONDS, "0"): 600.0,
        (measures.PFC_SECONDS, "3"): 0.0,
        (measures.DROPPED, "0"): 5.0,
    }


GOLDEN_CLAIMS = """
vendors:
  - name: Acme DCI
    match: {vendor: acme}
    claims:
      - {id: lossless, text: Zero loss under full load, measure: dropped_packets_per_terabyte, op: "<=", value: 0}
      - id: lossless-every-class
        text: Zero loss, every tenant's traffic
        measure: dropped_packets_per_terabyte
        op: "<="
        value: 0
        traffic_class: all
      - {id: pfc-quiet, text: PFC pauses under 1% of the time, measure: pfc_pause_seconds_per_hour, op: "<=", value: 36}
      - id: pfc-quiet-every-priority
        text: PFC pauses under 1% of the time, every priority
        measure: pfc_pause_seconds_per_hour
        op: "<="
        value: 36
        traffic_class: all
"""


def test_the_claim_table_golden(tmp_path: Path, update_golden: bool) -> None:
    """The report's claim table for best-effort drops and pauses beside a clean lossless queue: the job's
    claims pass, say which class they read and list none of the other class's episodes; the every-class
    ones fail on the other tenant's figures and list its episodes.
    ``pytest --update-golden`` rewrites the file (on purpose only; review its diff)."""
    path = tmp_path / "claims.yaml"
    path.write_text(GOLDEN_CLAIMS)
    (vendor,) = vendor_reports(
        load_claims(path), {"Acme DCI": ("dci-a",)}, _tables("3", LOSS + PAUSES, _best_effort_events())
    )
    text = "\n".join(markdown._vendor(vendor)) + "\n"
    if update_golden:
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()
