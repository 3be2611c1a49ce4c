"""A lossless claim is about the job's traffic class: another tenant's best-effort drops (queue 0) beside a
clean lossless queue (queue 3) do not fail it, and the verdict says which class it read. ``traffic_class:
all`` keeps the old reading (every class together), and says so."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from analyzer import measures, schemas
from analyzer.claims import Claim, load_claims
from analyzer.errors import InputError
from analyzer.report import readings
from analyzer.report.verdicts import Tables, evaluate

T0 = datetime(2026, 12, 1, 10, tzinfo=UTC)
BEST_EFFORT_DROPS = 3.4e7


def _totals() -> pl.DataFrame:
    rows = [
        # (metric, queue, increase): a terabyte sent; best effort dropped, the job's lossless queue did not
        (measures.TX_BYTES, None, 1e12),
        (measures.DROPPED, "0", BEST_EFFORT_DROPS),
        (measures.DROPPED, "3", 0.0),
    ]
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
                "last": T0,
                "no_signal": 0,
                "run": "all",
            }
            for m, q, v in rows
        ]
    )


def _measured(job_class: str | None) -> pl.DataFrame:
    inputs = measures.MeasureInputs(
        totals=_totals(),
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


def _tables(job_class: str | None) -> Tables:
    seen = readings.empty(None)
    counts = pl.DataFrame(
        {
            "device": ["dci-a", "dci-a"],
            "metric": [measures.DROPPED, measures.TX_BYTES],
            "n": [100, 100],
            "first": [T0, T0],
            "last": [T0, T0],
            "no_signal": [0, 0],
        },
        schema=seen.counts.schema,
    )
    return Tables(
        pl.DataFrame(schema=schemas.STEP_ANALYSIS),
        pl.DataFrame(schema=schemas.EVENTS),
        pl.DataFrame(schema=schemas.ATTRIBUTION),
        _measured(job_class),
        dataclasses.replace(seen, counts=counts),
        None,
        job_class=job_class,
    )


def _claims(tmp_path: Path, extra: str = "") -> Claim:
    path = tmp_path / "claims.yaml"
    path.write_text(
        "vendors:\n  - name: A\n    match: {vendor: a}\n    claims:\n"
        f"      - {{id: lossless, text: Zero loss, measure: dropped_packets_per_terabyte, op: '<=', value: 0{extra}}}\n"
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
