"""The Grafana boards: up to date with their generator, named from the catalogue, and valid PromQL."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.deploy.promql import (
    DASHBOARDS,
    PROMTOOL,
    board_files,
    dashboard_expressions,
    known,
    metric_names,
    promtool_check,
    recorded_names,
    rule_groups,
)


def _build() -> ModuleType:
    pytest.importorskip(
        "grafana_foundation_sdk", reason="pip install grafana-foundation-sdk==1769699998!10.1.0"
    )
    spec = importlib.util.spec_from_file_location("dashboards_build", DASHBOARDS / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_boards_are_what_the_generator_builds() -> None:
    rendered = _build().render()
    assert sorted(rendered) == [p.name for p in board_files()], "a board file is missing or left over"
    for name, text in rendered.items():
        assert (DASHBOARDS / name).read_text() == text, f"{name} is stale: run python dashboards/build.py"


def test_the_generator_refuses_a_name_outside_the_catalogue() -> None:
    build = _build()
    assert build.metric("spanwatch_poll_duration_seconds_bucket")
    with pytest.raises(KeyError):
        build.metric("dci_interface_receive_octets_total")


def test_every_metric_a_board_names_is_in_the_catalogue_or_recorded() -> None:
    recorded = recorded_names()
    unknown = {
        (e.where, name)
        for e in dashboard_expressions()
        for name in metric_names(e.expr)
        if not known(name, recorded)
    }
    assert not unknown


def test_the_name_extractor_sees_every_metric() -> None:
    expr = 'sum by (le) (rate(a_total{x="y(z)"}[5m])) / on (link) group_left () max(b:c:d offset 1m) > 1e-3'
    assert metric_names(expr) == {"a_total", "b:c:d"}


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)")
def test_every_board_expression_parses(tmp_path: Path) -> None:
    expressions = dashboard_expressions()
    assert len(expressions) > 30
    assert not any("$" in e.expr for e in expressions), "a variable was left unsubstituted"
    result = promtool_check(expressions, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_boards_have_variables_units_legends_and_rate_interval() -> None:
    for path in board_files():
        board = json.loads(path.read_text())
        names = [v["name"] for v in board["templating"]["list"]]
        assert names == ["datasource", "site", "link", "device"], path.name
        for p in board["panels"]:
            if p["type"] == "row":
                continue
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert p["fieldConfig"]["defaults"].get("unit"), f"{path.name}: {p['title']} has no unit"
            if p["type"] == "timeseries":
                assert p["options"]["legend"]["showLegend"] is True, p["title"]
            for t in p["targets"]:
                assert "[$__rate_interval]" in t["expr"] or not re.search(r"\[\d+[smh]\]", t["expr"]), t[
                    "expr"
                ]
    exprs = [e.expr for e in dashboard_expressions(substituted=False)]
    assert any("$__rate_interval" in e for e in exprs)


def test_board_thresholds_match_the_alert_rules() -> None:
    """The boards' dashed lines are the default profile's limits, which the rules apply to series of no
    link (series of a link are compared with their link's profile, exported by the collector)."""
    build = _build()
    alerts = {r["alert"]: r["expr"] for g in rule_groups() for r in g["rules"] if "alert" in r}  # type: ignore[attr-defined]
    assert "group_left" in alerts["SpanwatchPreFecBerNearLimit"]
    assert "dci_link_optics_fec_ber_limit" in alerts["SpanwatchPreFecBerNearLimit"]
    (fraction, default) = re.findall(r"> ([0-9.]+) \* ([0-9.e+-]+)", alerts["SpanwatchPreFecBerNearLimit"])[0]
    assert float(default) == build.PRE_FEC_BER_LIMIT and 0 < float(fraction) < 1
    assert "dci_link_optics_required_osnr_db" in alerts["SpanwatchOsnrMarginLow"]
    (required, margin) = re.findall(r"< ([0-9.]+) \+ ([0-9.]+)", alerts["SpanwatchOsnrMarginLow"])[0]
    assert float(required) == build.REQUIRED_OSNR_DB and float(margin) > 0
    factor = re.findall(r"> on \(link\) \(([0-9.]+) \* 2 \*", alerts["SpanwatchRouteLongerThanFibre"])
    assert factor and float(factor[0]) == build.ROUTE_LONGER_FACTOR


def test_every_panel_has_a_description() -> None:
    for path in board_files():
        for p in json.loads(path.read_text())["panels"]:
            if p["type"] != "row":
                assert len(p.get("description", "")) > 20, f"{path.name}: {p['title']} has no description"


def test_optics_legends_name_the_wave() -> None:
    board = json.loads((DASHBOARDS / "spanwatch-optics.json").read_text())
    for p in board["panels"]:
        for t in p.get("targets", []):
            if "dci_optics_" in t["expr"]:
                assert "{{interface}}{{component}}" in t["legendFormat"], (p["title"], t["legendFormat"])
