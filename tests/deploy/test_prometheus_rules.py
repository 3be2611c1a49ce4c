"""The Prometheus rules and scrape config: they parse, their unit tests pass, they name catalogue metrics."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from collector.contracts.catalog import CATALOG
from tests.deploy.promql import (
    PROMTOOL,
    RULES,
    known,
    metric_names,
    promtool_check,
    recorded_names,
    rule_expressions,
)

PROMETHEUS = RULES.parent
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)"
)


def _promtool(*args: str, cwd: Path = PROMETHEUS) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_every_metric_a_rule_names_is_in_the_catalogue() -> None:
    recorded = recorded_names()
    unknown = {
        (e.where, n) for e in rule_expressions() for n in metric_names(e.expr) if not known(n, recorded)
    }
    assert not unknown


def test_recorded_names_are_level_metric_operation_over_a_catalogue_metric() -> None:
    for name in recorded_names():
        level, metric, op = name.split(":")
        assert level and op
        assert metric in CATALOG or f"{metric}_total" in CATALOG, name


@needs_promtool
def test_rules_parse(tmp_path: Path) -> None:
    for path in sorted(RULES.glob("*.yml")):
        result = _promtool("check", "rules", str(path))
        assert result.returncode == 0, result.stdout + result.stderr
    result = promtool_check(rule_expressions(), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_rule_unit_tests_pass() -> None:
    tests = sorted((PROMETHEUS / "tests").glob("*.test.yml"))
    assert tests
    result = _promtool("test", "rules", *(p.name for p in tests), cwd=PROMETHEUS / "tests")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
@pytest.mark.parametrize("config", ["prometheus/prometheus.yml", "local/prometheus.yml"])
def test_scrape_configs_are_valid(config: str) -> None:
    path = PROMETHEUS.parent / config
    result = _promtool("check", "config", "--syntax-only", path.name, cwd=path.parent)
    assert result.returncode == 0, result.stdout + result.stderr
