"""The method's rule table (``analyzer.attribution.rules``): every number of the method is in it, every rule
in it is used and names a test that exists, and the method's functions stay short."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from analyzer import physics
from analyzer.attribution import rules

ROOT = Path(__file__).resolve().parents[2]
METHOD = ROOT / "analyzer" / "attribution"
# The rule table itself and the page written from it hold no method.
NOT_METHOD = {"rules.py", "document.py"}
# 0, 1 and 2 as arithmetic (a complement, a mean of two, a square), and unit conversions (microseconds and
# nanoseconds per second) are not tunable.
TRIVIAL = {0, 1, 2, 1e6, 1e9}
LONGEST_FUNCTION = 80


def _method_modules() -> list[Path]:
    return sorted(p for p in METHOD.glob("*.py") if p.name not in NOT_METHOD)


def unnamed_numbers(source: str) -> list[float]:
    """The numeric literals of ``source`` that are not trivial (docstrings and strings are not numbers)."""
    return [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
        and node.value not in TRIVIAL
    ]


def test_the_scan_finds_an_unnamed_number() -> None:
    assert unnamed_numbers('"""0.5 in a docstring"""\nx = 2 * y + 0.3 - 1e6 * z\n') == [0.3]


def test_every_number_of_the_method_is_in_the_rule_table() -> None:
    found = {p.name: unnamed_numbers(p.read_text()) for p in _method_modules()}
    assert {name: numbers for name, numbers in found.items() if numbers} == {}, (
        "name these numbers in analyzer/attribution/rules.py"
    )
    # analyzer.physics reads the readings with two numbers of the method: they are the table's.
    assert physics.HELD_OVER_USUAL is rules.HELD_OVER_USUAL
    assert physics.STEADY_QUANTILE is rules.STEADY_QUANTILE


def test_every_rule_is_used_by_the_method() -> None:
    sources = [p.read_text() for p in _method_modules()] + [(ROOT / "analyzer" / "physics.py").read_text()]
    used = {
        node.id
        for source in sources
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Name) and node.id in rules.RULES
    }
    assert set(rules.RULES) - used == set()


def test_every_rule_has_a_reason_an_origin_and_a_test_that_exists() -> None:
    for rule in rules.RULES.values():
        assert rule.reason and rule.step in rules.STEPS
        assert rule.origin.startswith(("principle: ", "fitted: ")), rule.name
        if rule.test == "none":
            continue
        path, _, name = rule.test.partition("::")
        tests = {
            n.name for n in ast.walk(ast.parse((ROOT / path).read_text())) if isinstance(n, ast.FunctionDef)
        }
        assert name in tests, f"{rule.name}: {rule.test} does not exist"


def test_no_function_of_the_method_is_over_80_lines() -> None:
    long = [
        f"{p.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"  # type: ignore[operator]
        for p in _method_modules()
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > LONGEST_FUNCTION  # type: ignore[operator]
    ]
    assert long == []


def test_only_a_fitted_rule_has_an_off_value() -> None:
    """Ablation turns off what was fitted; a principle is not a candidate to leave."""
    offs = [rule for rule in rules.RULES.values() if rule.off is not None]
    assert offs
    assert [rule.name for rule in offs if not rule.origin.startswith("fitted: ")] == []


def _values_under(turned_off: str) -> subprocess.CompletedProcess[str]:
    probe = "from analyzer import physics; from analyzer.attribution import rules; "
    probe += "print(physics.HELD_OVER_USUAL, rules.RULES['HELD_OVER_USUAL'].value)"
    env = {**os.environ, rules.OFF_VARIABLE: turned_off}
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False)


def test_a_rule_named_in_the_environment_takes_its_off_value_and_the_table_keeps_its_own() -> None:
    """``bench/bench_ablation.py`` runs ``spanwatch analyze`` with one rule off this way."""
    done = _values_under("HELD_OVER_USUAL")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(rules.RULES["HELD_OVER_USUAL"].off), str(rules.HELD_OVER_USUAL)]


def test_a_name_that_is_no_rule_to_turn_off_is_refused() -> None:
    done = _values_under("HELD_OVER_USUAL,MAD_TO_SIGMA")
    assert done.returncode != 0
    assert "not a rule with an off value: MAD_TO_SIGMA" in done.stderr
