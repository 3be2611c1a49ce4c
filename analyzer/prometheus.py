"""Telemetry from a Prometheus server's HTTP API instead of the archive (``--prometheus URL``).

``/api/v1/query_range`` returns every matching series at a fixed resolution; the rows are put in the archive's
shape (``schemas.TELEMETRY``), so the rest of the analysis cannot tell the difference. Prometheus stores
floats, so the ``counter`` column is filled from the value where it is integral (counter totals are), and
the resets are found the same way as in the archive. Also reads the collector's clock-offset metric, which
the archive does not carry, to derive the clock-skew tolerance.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from typing import Any

import polars as pl

from analyzer import schemas
from analyzer.errors import InputError

DEVICE_SELECTOR = '{__name__=~"dci_.+"}'
CLOCK_OFFSET = "spanwatch_gnmi_clock_offset_seconds"


def query_range(url: str, query: str, start: datetime, end: datetime, step: float) -> list[dict[str, Any]]:
    """Run one range query.

    Args:
        url: the server's base URL (``http://prometheus:9090``).
        query: PromQL.
        start: range start (aware).
        end: range end.
        step: resolution in seconds.

    Returns:
        The ``data.result`` list (one entry per series: ``metric`` labels and ``values`` pairs).

    Raises:
        InputError: the server cannot be reached or answers with an error.
    """
    params = urllib.parse.urlencode(
        {"query": query, "start": start.timestamp(), "end": end.timestamp(), "step": step}
    )
    address = f"{url.rstrip('/')}/api/v1/query_range?{params}"
    try:
        with urllib.request.urlopen(address, timeout=60) as response:
            body = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise InputError(url, f"Prometheus query failed: {exc}") from None
    if body.get("status") != "success":
        raise InputError(url, f"Prometheus query failed: {body.get('error', body)}")
    result: list[dict[str, Any]] = body.get("data", {}).get("result", [])
    return result


def _rows(result: list[dict[str, Any]]) -> pl.DataFrame:
    columns: dict[str, list[Any]] = {name: [] for name in ("time", *schemas.SERIES_KEYS, "value")}
    for series in result:
        labels = {**series.get("metric", {}), "metric": series.get("metric", {}).get("__name__")}
        for stamp, text in series.get("values", []):
            columns["time"].append(int(float(stamp) * 1e9))
            columns["value"].append(float(text))
            for key in schemas.SERIES_KEYS:
                columns[key].append(labels.get(key))
    frame = pl.DataFrame(columns, schema_overrides={"time": pl.Int64(), "value": pl.Float64()})
    return frame.with_columns(pl.col("time").cast(schemas.TIME))


def read_prometheus(url: str, start: datetime, end: datetime, step: float = 1.0) -> pl.LazyFrame:
    """Every device series (``dci_*``) of a time range, as archive-shaped readings.

    Args:
        url: the server's base URL.
        start: range start (aware).
        end: range end.
        step: resolution in seconds (the collector's sample interval is the useful finest).

    Returns:
        A LazyFrame with the ``schemas.TELEMETRY`` columns.

    Raises:
        InputError: the server cannot be reached or answers with an error.
    """
    frame = _rows(query_range(url, DEVICE_SELECTOR, start, end, step)).lazy()
    integral = (pl.col("value") >= 0) & (pl.col("value") == pl.col("value").floor())
    exact = pl.when(integral).then(pl.col("value")).cast(pl.UInt64)
    return schemas.conform_lazy(schemas.TELEMETRY, frame.with_columns(counter=exact))


def clock_skew(url: str, start: datetime, end: datetime) -> float:
    """The largest device-to-collector clock offset seen in a range, as a tolerance in seconds.

    Args:
        url: the server's base URL.
        start: range start (aware).
        end: range end.

    Returns:
        max |offset| over every device and sample; 0 when the metric is absent.

    Raises:
        InputError: the server cannot be reached or answers with an error.
    """
    step = max(1.0, (end - start).total_seconds() / 1000)
    result = query_range(url, f"max(abs({CLOCK_OFFSET}))", start, end, step)
    values = [abs(float(v)) for series in result for _, v in series.get("values", [])]
    return max(values, default=0.0)
