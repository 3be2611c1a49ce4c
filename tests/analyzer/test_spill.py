"""The narrow spill copy: one folder per device batch, labels once per series."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from synthetic_fabric import Episode, write_archive

from analyzer import network, spill, telemetry


def test_each_batch_gets_its_devices_rows_and_a_batch_with_none_is_empty(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    write_archive(archive, 30, [Episode("drops", "a1", 5, 10)])
    every = telemetry.scan_archive(archive, metrics=network.NEEDED).collect()
    plan = [["a1", "b1"], ["vanished"], ["a2", "b2"]]  # a device the archive no longer holds
    keep = spill.row_filter(None, None, None, network.NEEDED)
    folder = tmp_path / "spill"
    parts = spill.spill_batches(spill.files_in_range(archive, None, None), keep, plan, folder)
    assert len(parts) == 3
    for devices, (readings, labels) in zip(plan, parts, strict=True):
        rows, series = readings.collect(), labels.collect()
        expected = every.filter(pl.col("device").is_in(devices))
        assert rows.height == expected.height
        assert set(series["device"]) == set(expected["device"])
        assert set(rows["series"]) == set(series["series"])  # every reading's labels, once per series
        assert series["series"].is_unique().all()
    assert parts[1][0].collect().is_empty()
