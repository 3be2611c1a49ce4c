"""A vendor's claims about the job's steps read the same per-step attribution as the link's cost: network
time blamed on a link but on none of its devices (the blame's physics causes, ``unexplained``) counts for
each of the link's devices, so "adds under 1 ms to a step" cannot pass on 0 s while the link cost seconds."""

from __future__ import annotations

import polars as pl
import pytest

from analyzer import measures, schemas

STEPS = 10


def _inputs(link_devices: pl.DataFrame | None) -> measures.MeasureInputs:
    steps = pl.DataFrame(
        {"step": list(range(STEPS)), "rank": [0] * STEPS}, schema={"step": pl.Int64(), "rank": pl.Int64()}
    )
    attribution = pl.DataFrame(
        [
            {"step": s, "rank": 0, "event_id": None, "link": "ab", "device": None, "interface": None,
             "kind": "loss_recovery", "overlap_seconds": None, "share": 1.0, "attributed_seconds": 1.2}
            for s in range(STEPS)
        ],
        schema=schemas.ATTRIBUTION,
    ).with_columns(run=pl.lit("all"))  # fmt: skip
    empty = pl.DataFrame(schema={"device": pl.String(), "link": pl.String(), "run": pl.String()})
    return measures.MeasureInputs(
        totals=empty, samples=empty, events=empty, attribution=attribution, steps=steps, gpus=None,
        link_devices=link_devices,
    )  # fmt: skip


def _values(inputs: measures.MeasureInputs, key: str, measure: str) -> dict[str, float]:
    frame = measures.MEASURES[measure].compute(inputs, key)
    return dict(zip(frame[key].to_list(), frame["value"].to_list(), strict=True))


def test_a_links_cost_on_no_one_device_is_each_of_its_devices() -> None:
    inputs = _inputs(pl.DataFrame({"link": ["ab", "ab"], "device": ["dci-a", "dci-b"]}))
    link = _values(inputs, "link", "exposed_latency_p99_seconds")["ab"]
    assert link == pytest.approx(1.2)
    per_device = _values(inputs, "device", "exposed_latency_p99_seconds")
    assert per_device == {"dci-a": pytest.approx(link), "dci-b": pytest.approx(link)}
    totals = _values(inputs, "device", "exposed_latency_total_seconds")
    assert totals == {"dci-a": pytest.approx(12.0), "dci-b": pytest.approx(12.0)}
    assert _values(inputs, "run", "exposed_latency_total_seconds") == {"all": pytest.approx(12.0)}  # once


def test_without_the_links_members_nothing_is_spread() -> None:
    assert _values(_inputs(None), "device", "exposed_latency_p99_seconds") == {}
