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


def test_a_job_that_sends_in_fewer_than_half_of_the_windows_sends_sparsely() -> None:
    rates = pl.DataFrame(
        {"link": ["ab", "ab"], "device": ["a", "b"], "base_rate": [0.0, 0.0], "mean_rate": [2e9, 1e9]}
    )
    assert steady.sends_sparsely(rates)  # DiLoCo: bytes over the run, no typical rate anywhere
    assert not steady.sends_sparsely(rates.with_columns(base_rate=pl.Series([5e9, 0.0])))  # every step
    assert not steady.sends_sparsely(rates.with_columns(mean_rate=pl.lit(0.0)))  # no job-class bytes at all
