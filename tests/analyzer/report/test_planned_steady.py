"""Planned and measured steady network time per step are one formula: serialization + the same number of
round trips (the analysis's), so the report's "Steady network time per step" row compares like with like."""

from __future__ import annotations

import pytest

from analyzer.plan import STEADY_ROUND_TRIPS, plan
from analyzer.report import planned
from collector.config import Config


def _config(distance_km: float) -> Config:
    return Config.model_validate(
        {
            "targets": [
                {"name": "a1", "labels": {"site": "a"}, "gnmi": {"address": "127.0.0.1:1", "insecure": True}},
                {"name": "b1", "labels": {"site": "b"}, "gnmi": {"address": "127.0.0.1:2", "insecure": True}},
            ],
            "links": [
                {
                    "name": "ab",
                    "site_a": "a",
                    "site_b": "b",
                    "distance_km": distance_km,
                    "members": [{"device": "a1", "interface": "e1"}, {"device": "b1", "interface": "e1"}],
                }
            ],
        }
    )


@pytest.mark.parametrize("distance_km", [100.0, 400.0])
def test_planned_steady_time_is_serialization_plus_the_analysis_round_trips(distance_km: float) -> None:
    given = planned.plan_input(_config(distance_km), 100e9, 1e9)
    assert given is not None
    figures = plan(given)
    comparison = planned.compare(given, {"steady_seconds_per_step": 0.004})
    row = next(r for r in comparison.rows if r.quantity.startswith("Steady network time"))
    assert row.planned == pytest.approx(
        figures.serialization_seconds + STEADY_ROUND_TRIPS * figures.round_trip_seconds
    )
    assert STEADY_ROUND_TRIPS == 2  # analyzer.blame's steady: serialization + 2 x round trip
    assert f"{STEADY_ROUND_TRIPS} round trips" in row.note
