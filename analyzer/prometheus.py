"""Telemetry from a Prometheus server's HTTP API instead of the archive (``--prometheus URL``).

The samples are read as Prometheus stored them, each with its own timestamp: instant queries of a range
selector (``{__name__=~"dci_.+"}[10m]``), one per window of the time range. ``/api/v1/query_range`` is not
used because it resamples: at each step it repeats the latest sample, for up to the 5-minute lookback and
past a series' end, and drops samples between steps. A counter scraped every 10 s and read at a 1 s step
shows nine idle seconds and a tenfold spike; a range longer than 11,000 steps is refused outright.

The rows are put in the archive's shape (``schemas.TELEMETRY``) over the same half-open range
``[start, end)``, so the rest of the analysis cannot tell the difference. Prometheus stores floats, so the
``counter`` column is filled from the value for counter series whose every value is a non-negative integer
(totals of events are), and resets are then found the same way as in the archive. Also reads the collector's
clock-offset metric, which the archive does not carry, to derive the clock-skew tolerance.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl

from analyzer import schemas
from analyzer.errors import InputError
from analyzer.telemetry import COUNTERS

DEVICE_SELECTOR = '{__name__=~"dci_.+"}'
CLOCK_OFFSET = "spanwatch_gnmi_clock_offset_seconds"
# One query per window: 10 minutes of 1 s samples is 600 per series, far below Prometheus' default cap
# of 50 million samples a query may load (--query.max-samples) for any fabric we monitor.
WINDOW_SECONDS = 600.0
TIMEOUT_SECONDS = 60.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ms(moment: datetime) -> int:
    """The first whole millisecond (Prometheus' resolution) at or after ``moment``, exactly."""
    return -((_EPOCH - moment) // timedelta(milliseconds=1))


def _query(url: str, params: dict[str, str]) -> list[dict[str, Any]]:
    """One ``/api/v1/query`` request: its ``data.result``, or an ``InputError`` saying why not."""
    address = f"{url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(address, timeout=TIMEOUT_SECONDS) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        # Prometheus explains a refused query (bad selector, too many samples) in a JSON body.
        try:
            body = json.loads(exc.read())
        except (OSError, ValueError):
            body = {"error": f"HTTP {exc.code} {exc.reason}"}
        finally:
            exc.close()
    except urllib.error.URLError as exc:
        raise InputError(url, f"Prometheus query failed: {exc.reason}") from None
    except (OSError, ValueError) as exc:
        raise InputError(url, f"Prometheus query failed: {exc}") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error", body) if isinstance(body, dict) else body
        raise InputError(url, f"Prometheus query failed: {error}")
    result: list[dict[str, Any]] = body.get("data", {}).get("result", [])
    return result


def read_samples(
    url: str, selector: str, start: datetime, end: datetime, window: float = WINDOW_SECONDS
) -> list[dict[str, Any]]:
    """Every stored sample of the series ``selector`` matches, with ``start <= time < end``.

    Args:
        url: the server's base URL (``http://prometheus:9090``).
        selector: a series selector (``up``, ``{__name__=~"dci_.+"}``), not an arbitrary expression.
        start: range start (aware).
        end: range end, excluded.
        window: seconds read per request.

    Returns:
        One entry per series and window: ``metric`` labels and ``values`` as ``[seconds, "value"]`` pairs.

    Raises:
        InputError: the server cannot be reached or answers with an error.
    """
    first, stop = _ms(start), _ms(end)
    width = max(1, round(window * 1000))
    result: list[dict[str, Any]] = []
    for low in range(first, stop, width):
        high = min(low + width, stop)
        # A range selector's left edge is inclusive in Prometheus 2 and exclusive in 3: reach one
        # millisecond further and cut here, so a sample on a window edge is read exactly once.
        params = {"query": f"{selector}[{high - low + 1}ms]", "time": f"{high / 1000:.3f}"}
        for series in _query(url, params):
            values = [v for v in series.get("values", []) if low <= round(float(v[0]) * 1000) < high]
            if values:
                result.append({"metric": series.get("metric", {}), "values": values})
    return result


def _rows(result: list[dict[str, Any]]) -> pl.DataFrame:
    """``read_samples`` output as one row per sample: time, the series labels, value."""
    columns: dict[str, list[Any]] = {name: [] for name in ("time", *schemas.SERIES_KEYS, "value")}
    for series in result:
        labels = {**series.get("metric", {}), "metric": series.get("metric", {}).get("__name__")}
        for stamp, text in series.get("values", []):
            columns["time"].append(round(float(stamp) * 1000) * 1_000_000)  # exact milliseconds
            columns["value"].append(float(text))
            for key in schemas.SERIES_KEYS:
                columns[key].append(labels.get(key))
    frame = pl.DataFrame(columns, schema_overrides={"time": pl.Int64(), "value": pl.Float64()})
    return frame.with_columns(pl.col("time").cast(schemas.TIME))


def selector(metrics: frozenset[str] | None = None) -> str:
    """The series selector for ``metrics`` (catalogue names: ``[a-z_]`` only, nothing to escape), or every
    device series (``DEVICE_SELECTOR``)."""
    return f'{{__name__=~"{"|".join(sorted(metrics))}"}}' if metrics else DEVICE_SELECTOR


def read_prometheus(
    url: str,
    start: datetime,
    end: datetime,
    metrics: frozenset[str] | None = None,
    devices: list[str] | None = None,
) -> pl.LazyFrame:
    """The device series of a time range, as archive-shaped readings.

    Args:
        url: the server's base URL.
        start: range start (aware).
        end: range end, excluded.
        metrics: catalogue names to read (the server filters), or None for every ``dci_*`` series.
        devices: devices to keep, or None for all (filtered here: device names would need PromQL escaping).

    Returns:
        A LazyFrame with the ``schemas.TELEMETRY`` columns.

    Raises:
        InputError: the server cannot be reached or answers with an error.
    """
    frame = _rows(read_samples(url, selector(metrics), start, end)).lazy()
    if devices:
        frame = frame.filter(pl.col("device").is_in(devices))
    value = pl.col("value")
    integral = (value >= 0) & (value < 2.0**64) & (value == value.floor())
    # Per series, not per sample: a float counter (pause seconds) that passes a whole number on the way
    # would otherwise mix exact and float readings, and the increase into an exact reading that follows a
    # float one would count as a reset.
    counter = pl.col("metric").is_in(sorted(COUNTERS)) & integral.all().over(schemas.SERIES_KEYS)
    exact = pl.when(counter).then(value).cast(pl.UInt64)
    return schemas.conform_lazy(schemas.TELEMETRY, frame.with_columns(counter=exact))


def clock_skew(url: str, start: datetime, end: datetime) -> float:
    """The largest device-to-collector clock offset seen in a range, as a tolerance in seconds.

    Args:
        url: the server's base URL.
        start: range start (aware).
        end: range end, excluded.

    Returns:
        max |offset| over every device and sample; 0 when the metric is absent.

    Raises:
        InputError: the server cannot be reached or answers with an error.
    """
    result = read_samples(url, CLOCK_OFFSET, start, end)
    values = [abs(float(v)) for series in result for _, v in series.get("values", [])]
    return max(values, default=0.0)
