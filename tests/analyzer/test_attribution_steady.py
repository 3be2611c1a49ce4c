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


def test_a_links_slack_is_how_much_sooner_than_the_slowest_it_ends_a_clean_step() -> None:
    # 0.10 s and 0.03 s of serialization, 1 ms round trips; a link carrying none of the job's bytes has none.
    links = pl.DataFrame(
        {
            "link": ["slow", "fast", "idle"],
            "round_trip_seconds": [1e-3, 1e-3, 1e-3],
            "serialization_seconds": [0.10, 0.03, 0.0],
            "capacity": [1e11, 1e11, 1e11],
            "bytes": [1e10, 3e9, 0.0],
        }
    )
    assert dict(steady.slack(links).iter_rows()) == pytest.approx({"slow": 0.0, "fast": 0.07})
    unknown = links.with_columns(
        bytes=pl.lit(None, pl.Float64), serialization_seconds=pl.lit(None, pl.Float64)
    )
    assert dict(steady.slack(unknown).iter_rows()) == {"slow": 0.0, "fast": 0.0, "idle": 0.0}
