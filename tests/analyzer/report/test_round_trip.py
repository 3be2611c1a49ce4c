"""The report's links: the measured round trip beside the fibre's, the length the dispersion gives, and
the flag of a route longer than its fibre."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest

from analyzer.report import data, readings
from analyzer.report.markdown import glance_rows
from analyzer.report.model import Glance
from collector import config as configuration


def _config() -> configuration.Config:
    member = {"device": "d1", "interface": "e1"}
    return configuration.parse(
        {
            "targets": [{"name": "d1", "snmp": {"address": "127.0.0.1:1", "community_env": "HOME"}}],
            "links": [
                {"name": "near", "site_a": "a", "site_b": "b", "distance_km": 100, "members": [member]},
                {"name": "far", "site_a": "a", "site_b": "c", "distance_km": 100,
                 "members": [{"device": "d1", "interface": "e2"}]},
                {"name": "unprobed", "site_a": "a", "site_b": "d", "distance_km": 10,
                 "members": [{"device": "d1", "interface": "e3"}]},
            ],
        }
    )  # fmt: skip


def test_measured_round_trip_beside_the_fibre_and_a_longer_route_flagged() -> None:
    links = pl.DataFrame(
        {
            "link": ["near", "far"],
            "rtt_min": [0.00099, 0.0013],
            "rtt_median": [0.001, 0.0014],
            "cd": [1700.0, 1702.0],
        }
    )
    empty = readings.empty(None)
    got = {link.name: link for link in data._links(_config(), replace(empty, links=links))}
    near, far, unprobed = got["near"], got["far"], got["unprobed"]
    assert near.rtt_seconds == pytest.approx(0.00098)
    assert near.measured_rtt_min_seconds == 0.00099 and near.route_longer_than_fibre is False
    assert near.dispersion_km == pytest.approx(100.0)
    assert far.route_longer_than_fibre is True  # 1.3 ms over a 0.98 ms fibre
    assert unprobed.measured_rtt_min_seconds is None and unprobed.route_longer_than_fibre is None


def test_the_glance_row_says_it() -> None:
    links = pl.DataFrame({"link": ["far"], "rtt_min": [0.0013], "rtt_median": [0.0014], "cd": [1700.0]})
    config = _config()
    infos = data._links(config, replace(readings.empty(None), links=links))
    glance = Glance(None, None, None, 0, 0, None, None, 0, infos, 100.0, 0, 0.0, None, None)
    row = dict(glance_rows(glance))["Links"]
    assert "far (100 km, 1 member interfaces; fibre round trip" in row
    assert "ROUTE LONGER THAN THE FIBRE" in row and "100 km of fibre by chromatic dispersion" in row
