"""Whether two analyses are the same: every table equal (exact counts and keys, floats to a relative
tolerance) whatever the row order, and the summaries equal. The engines' and storages' equivalence tests
and the distributed bench use it.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from analyzer.analysis import FILES, AnalysisResult

RELATIVE = 1e-9


def table_differences(name: str, left: pl.DataFrame, right: pl.DataFrame, rel: float = RELATIVE) -> list[str]:
    """What differs between two tables (empty: equal), rows compared after sorting on every column."""
    if left.schema != right.schema:
        return [f"{name}: schemas differ: {left.schema} != {right.schema}"]
    if left.height != right.height:
        return [f"{name}: {left.height} rows != {right.height} rows"]
    if left.height == 0:
        return []
    order = [c for c, t in left.schema.items() if t.is_numeric() or t.is_temporal() or t == pl.String()]
    a, b = left.sort(order, nulls_last=True), right.sort(order, nulls_last=True)
    out = []
    for column, dtype in left.schema.items():
        x, y = a[column], b[column]
        if dtype.is_float():
            scale = pl.DataFrame({"x": x.abs(), "y": y.abs()}).select(pl.max_horizontal("x", "y")).to_series()
            close = (x - y).abs() <= rel * scale
            same = close.fill_null(False) | (x.is_null() & y.is_null()) | (x.is_nan() & y.is_nan())
            bad = int((~same.fill_null(False)).sum())
        else:
            bad = int((~(x.eq_missing(y))).sum())
        if bad:
            out.append(f"{name}.{column}: {bad} of {left.height} values differ")
    return out


def value_differences(path: str, left: Any, right: Any, rel: float = RELATIVE) -> list[str]:
    """What differs between two JSON-like values (floats to ``rel``), each difference named by its path."""
    if isinstance(left, dict) and isinstance(right, dict):
        keys = sorted(set(left) | set(right), key=str)
        return [d for k in keys for d in value_differences(f"{path}.{k}", left.get(k), right.get(k), rel)]
    if isinstance(left, list) and isinstance(right, list):
        if len(left) != len(right):
            return [f"{path}: {len(left)} items != {len(right)} items"]
        return [
            d
            for i, (x, y) in enumerate(zip(left, right, strict=True))
            for d in value_differences(f"{path}[{i}]", x, y, rel)
        ]
    if isinstance(left, float) and isinstance(right, float):
        if math.isnan(left) and math.isnan(right):
            return []
        return [] if math.isclose(left, right, rel_tol=rel, abs_tol=0.0) else [f"{path}: {left} != {right}"]
    return [] if left == right else [f"{path}: {left!r} != {right!r}"]


def differences(left: AnalysisResult, right: AnalysisResult, rel: float = RELATIVE) -> list[str]:
    """Every difference between two analyses' tables and summaries (empty: the same analysis)."""
    out = []
    for name in FILES:
        out += table_differences(name, getattr(left, name), getattr(right, name), rel)
    return out + value_differences("summary", left.summary, right.summary, rel)
