"""The steady cost per link (``analyzer.attribution.steady``)."""

from __future__ import annotations

import polars as pl
import pytest

from analyzer.attribution import steady


def test_steady_figures_from_probes_capacity_and_bytes() -> None:
    members = pl.DataFrame({"link": ["l1", "l1"], "device": ["a", "b"], "rtt_seconds": [0.00098, 0.00098]})
    ends = pl.DataFrame(
        {"link": ["l1", "l1"], "device": ["a", "b"], "interfaces": [4, 4], "capacity": [4e11, 4e11]},
        schema_overrides={"interfaces": pl.UInt32},
    )
    probes = pl.DataFrame({"link": ["l1"], "rtt_seconds": [0.001]})
    table = steady.steady(members, ends, probes, pl.DataFrame({"link": ["l1"], "bytes": [1.4e10]}))
    row = table.row(0, named=True)
    assert row["round_trip_seconds"] == 0.001  # measured, over the fibre's
    assert row["serialization_seconds"] == pytest.approx(0.035)
