"""One colour-blind-safe colour per event kind and per blame cause, from the kind's declaration, so no two
kinds of a chart share a colour and none falls back to grey."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analyzer.kinds import KINDS
from analyzer.report import charts
from analyzer.report.model import Cdf, LinkExposure, VendorDistributions


def test_every_kind_has_its_own_colour_declared_with_it() -> None:
    colours = [kind.colour for kind in KINDS.values()]
    assert len(set(colours)) == len(colours) == len(KINDS)
    assert all(charts.KIND_COLORS[name] == kind.colour for name, kind in KINDS.items())
    causes = list(charts.CAUSE_COLORS.values())
    assert len(set(causes)) == len(causes)
    assert charts.UNKNOWN_KIND not in {*colours, *causes}


def test_the_demos_exposed_kinds_each_have_a_colour(demo_dir: Path) -> None:
    kinds = set(pl.read_parquet(demo_dir / "attribution.parquet")["kind"].unique().to_list())
    assert kinds <= set(charts.KIND_COLORS)


def test_the_exposure_bar_draws_each_kind_in_its_colour() -> None:
    by_kind = {"loss_recovery": 1.0, "lost_capacity": 0.5, "queueing": 0.2, "burst": 0.1, "wave_down": 0.3}
    row = LinkExposure("ab", 3, 2.1, 0.0, 1.0, 0.1, None, by_kind)
    svg = charts.link_exposure([row]).lower()
    for kind in by_kind:
        assert charts.KIND_COLORS[kind].lower() in svg, kind
    assert charts.UNKNOWN_KIND.lower() not in svg


def test_equal_distributions_stay_visible_and_a_thin_one_is_listed() -> None:
    same = [0.1 * i for i in range(1, 102)]  # quantiles at 0, 1, ..., 100 %
    thin = [0.0] * 100 + [12.0]
    rows = [
        VendorDistributions("switches", _cdf(thin), _cdf(same)),
        VendorDistributions("optics", _cdf(thin), _cdf(same)),
    ]
    svg = charts.distributions(rows)
    assert "stroke-dasharray" in svg  # the second, equal curve is dashed over the first
    assert "too few non-zero values for a distribution" in svg and "switches: 12000" in svg


def _cdf(values: list[float]) -> Cdf:
    return Cdf(n=len(values), values=sorted(values))
