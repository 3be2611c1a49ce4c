"""What the boards and rules ask Prometheus: their expressions, the metric names in them, and checks.

Shared by the deploy tests: the expressions come from the committed dashboards/*.json and
deploy/prometheus/rules/*.yml, with the boards' variables replaced by concrete values.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from collector.contracts.catalog import CATALOG, Kind

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "dashboards"
RULES = ROOT / "deploy" / "prometheus" / "rules"
PROMTOOL = shutil.which("promtool")

# Series Prometheus itself makes: allowed in rules although no catalogue entry names them.
PROMETHEUS_SERIES = {"up", "ALERTS"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
             "unless", "inf", "nan", "Inf", "NaN"}  # fmt: skip

# The boards' variables, as a user picking one site, link and device would set them.
VARIABLES = {"$__rate_interval": "10s", "$site": "a", "$link": "l1", "$device": "dci1.site-a"}


@dataclass(frozen=True)
class Expression:
    """One PromQL expression and where it is used."""

    where: str
    expr: str


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (not functions, labels, keywords or numbers)."""
    s = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    found = re.findall(r"(?<![\w.:])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()", s)
    return {name for name in found if name not in _KEYWORDS}


def known(name: str, recorded: set[str]) -> bool:
    """Whether ``name`` is a catalogue metric (histogram series included), a recorded rule or Prometheus's."""
    if name in CATALOG or name in recorded or name in PROMETHEUS_SERIES:
        return True
    return any(
        name.endswith(s)
        and (spec := CATALOG.get(name.removesuffix(s))) is not None
        and spec.kind is Kind.HISTOGRAM
        for s in HISTOGRAM_SUFFIXES
    )


def substitute(expr: str, variables: Mapping[str, str] = VARIABLES) -> str:
    for variable, value in variables.items():
        expr = expr.replace(variable, value)
    return expr


def _panels(board: dict[str, object]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for p in board.get("panels", []):  # type: ignore[attr-defined]
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def board_files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def dashboard_expressions(
    substituted: bool = True, variables: Mapping[str, str] = VARIABLES
) -> list[Expression]:
    """Every panel query, annotation query and variable query (``label_values(sel, label)`` as ``count by``), with
    ``variables`` substituted unless ``substituted`` is false."""
    out: list[Expression] = []
    for path in board_files():
        board = json.loads(path.read_text())
        for p in _panels(board):
            for t in p.get("targets", []) or []:  # type: ignore[attr-defined]
                out.append(Expression(f"{path.name}: {p.get('title')} {t['refId']}", t["expr"]))
        for a in board.get("annotations", {}).get("list", []):
            if a.get("expr"):
                out.append(Expression(f"{path.name}: annotation {a['name']}", a["expr"]))
        for v in board["templating"]["list"]:
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", str(v.get("query", "")))
            if v["type"] == "query" and m:
                out.append(Expression(f"{path.name}: variable {v['name']}", f"count by ({m[2]}) ({m[1]})"))
    return [Expression(e.where, substitute(e.expr, variables)) for e in out] if substituted else out


def rule_groups() -> list[dict[str, object]]:
    groups: list[dict[str, object]] = []
    for path in sorted(RULES.glob("*.yml")):
        groups += yaml.safe_load(path.read_text())["groups"]
    return groups


def rule_expressions() -> list[Expression]:
    return [
        Expression(f"rule {r.get('record') or r.get('alert')}", r["expr"])
        for g in rule_groups()
        for r in g["rules"]  # type: ignore[attr-defined]
    ]


def alert_rules() -> list[dict[str, str]]:
    """Every alerting rule (``alert``, ``expr``, ``for`` ...) of every group."""
    return [r for g in rule_groups() for r in g["rules"] if "alert" in r]  # type: ignore[attr-defined]


_COMPARISON = re.compile(r"(==|!=|>=|<=|>|<)(\s*bool)?")


def _top_level(expr: str) -> str:
    """``expr`` with everything inside brackets, braces, parentheses and strings blanked out."""
    out: list[str] = []
    depth, quote, escaped = 0, "", False
    for c in expr:
        top = depth == 0 and not quote
        if quote:
            escaped, quote = (not escaped and c == "\\"), ("" if c == quote and not escaped else quote)
        elif c in "\"'`":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        out.append(c if top and depth == 0 and not quote else " ")
    return "".join(out)


def strip_threshold(expr: str) -> str:
    """An alert expression without its final threshold comparison, in each top-level ``or`` branch.

    ``a / (b > 0) > 0.05 or c > 0`` becomes ``a / (b > 0) or c``: the series the alert compares, which
    exist whether or not the alert fires (comparisons inside brackets are kept).
    """
    flat = _top_level(expr)
    cuts = [m.start() for m in re.finditer(r"(?<![\w:])or(?![\w:])", flat)]
    branches, start = [], 0
    for cut in [*cuts, len(expr)]:
        matches = list(_COMPARISON.finditer(flat, start, cut))
        branches.append(expr[start : matches[-1].start() if matches else cut].strip())
        start = cut + 2
    return " or ".join(branches)


def recorded_names() -> set[str]:
    return {r["record"] for g in rule_groups() for r in g["rules"] if "record" in r}  # type: ignore[attr-defined]


def promtool_check(expressions: list[Expression], tmp: Path) -> subprocess.CompletedProcess[str]:
    """``promtool check rules`` on a rule file recording every expression: it parses each one."""
    assert PROMTOOL is not None
    rules = [{"record": f"check:expression:{i}", "expr": e.expr} for i, e in enumerate(expressions)]
    path = tmp / "expressions.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "expressions", "rules": rules}]}))
    return subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
