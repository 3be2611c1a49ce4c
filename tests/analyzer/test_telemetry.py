"""Archive scanning with pushdown, counters to rates with resets, Prometheus rows."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from synthetic_fabric import SPEED, T0, T0_NS, write_archive

from analyzer import prometheus, telemetry
from analyzer.errors import InputError
from collector.exporters.archive import Archive


def _archive_drops(path: Path, readings: Iterable[tuple[int, int]]) -> None:
    """An archive at ``path`` of one drop counter's ``(second, total)`` readings, written in that order."""
    archive = Archive(path, writer="t")
    for i, total in readings:
        ns = T0_NS + i * 10**9
        archive.add(
            (
                ns,
                ns,
                "a1",
                "gnmi",
                "dci_queue_dropped_packets_total",
                (("interface", "e1"),),
                None,
                float(total),
                total,
            )
        )
    archive.flush()


def test_scan_pushes_down_time_and_devices(tmp_path: Path) -> None:
    write_archive(tmp_path, 60, [])
    start, end = T0 + timedelta(seconds=10), T0 + timedelta(seconds=20)
    frame = telemetry.scan_archive(tmp_path, start, end, ["a1"]).collect()
    assert frame["device"].unique().to_list() == ["a1"]
    assert frame["time"].min() == start
    assert frame["time"].max() == end - timedelta(seconds=1)
    plan = telemetry.scan_archive(tmp_path, start, end, ["a1"]).explain()
    assert "hive" in plan.lower() or "SELECTION" in plan or "selection" in plan


def test_a_counter_reset_gives_no_negative_rate_and_no_spike(tmp_path: Path) -> None:
    write_archive(tmp_path, 60, [], resets={"a1": 30})
    sig = telemetry.signals(telemetry.scan_archive(tmp_path, devices=["a1"])).collect()
    tx = sig.filter(pl.col("metric") == "dci_interface_transmit_bytes_total").drop_nulls("value")
    assert tx["value"].min() >= 0
    # the interval across the reset counts what was counted since the reset: one normal second
    assert tx["value"].max() == pytest.approx(SPEED * 0.5)
    assert tx["value"].min() == pytest.approx(SPEED * 0.5)


def test_exact_counter_column_is_used_beyond_float_precision(tmp_path: Path) -> None:
    base = 2**60  # float64 cannot tell base from base + 1
    _archive_drops(tmp_path, enumerate([base, base + 1, base + 3]))
    sig = telemetry.signals(telemetry.scan_archive(tmp_path)).collect()
    assert sig["increase"].to_list() == [None, 1.0, 2.0]


def test_missing_archive_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="archive directory not found"):
        telemetry.scan_archive(tmp_path / "nope")
    with pytest.raises(InputError, match="no Parquet files"):
        telemetry.scan_archive(tmp_path)


def test_prometheus_series_become_archive_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    result: list[dict[str, Any]] = [
        {
            "metric": {
                "__name__": "dci_queue_dropped_packets_total",
                "device": "a1",
                "interface": "e1",
                "queue": "3",
                "link": "l1",
                "vendor": "x",
            },
            "values": [[T0.timestamp(), "10"], [T0.timestamp() + 1, "4"]],
        }
    ]
    monkeypatch.setattr(prometheus, "read_samples", lambda *a, **k: result)
    rows = prometheus.read_prometheus("http://x", T0, T0 + timedelta(seconds=2)).collect()
    assert rows["counter"].to_list() == [10, 4]
    sig = telemetry.signals(rows.lazy()).collect()
    assert sig["value"].to_list() == [None, 4.0]  # the decrease is a reset


def test_prometheus_unreachable_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="Prometheus query failed"):
        prometheus.read_samples("http://127.0.0.1:9", "up", T0, T0 + timedelta(seconds=1), 1.0)


def test_readings_out_of_time_order_are_sorted(tmp_path: Path) -> None:
    _archive_drops(tmp_path, reversed(list(enumerate([0, 10, 30, 60]))))  # newest first
    sig = telemetry.signals(telemetry.scan_archive(tmp_path)).collect()
    assert sig["value"].to_list() == [None, 10.0, 20.0, 30.0]


def test_prometheus_reads_only_the_needed_metrics_of_the_devices_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    def samples(url: str, selector: str, *args: object, **kwargs: object) -> list[dict[str, Any]]:
        asked.append(selector)
        return [
            {
                "metric": {"__name__": "dci_queue_dropped_packets_total", "device": device},
                "values": [[T0.timestamp(), "1"]],
            }
            for device in ("a1", "b1")
        ]

    monkeypatch.setattr(prometheus, "read_samples", samples)
    metrics = frozenset({"dci_queue_dropped_packets_total", "dci_interface_oper_up"})
    rows = prometheus.read_prometheus("http://x", T0, T0 + timedelta(seconds=2), metrics, ["b1"]).collect()
    assert asked == ['{__name__=~"dci_interface_oper_up|dci_queue_dropped_packets_total"}']
    assert rows["device"].to_list() == ["b1"]
    assert prometheus.selector() == prometheus.DEVICE_SELECTOR
