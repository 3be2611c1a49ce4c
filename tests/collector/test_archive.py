"""The Parquet archive: layout, schema, atomic files, a failed flush keeps its rows, kill -9 loses one flush."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl

from collector.clock import FakeClock
from collector.contracts.catalog import SERIES_LABELS
from collector.exporters.archive import Archive

T0 = 1_764_496_800 * 10**9  # 2025-11-30T10:00:00Z


def _fill(archive: Archive, n: int, start_ns: int = T0) -> None:
    for i in range(n):
        archive.add(
            (
                start_ns + i * 10**6,
                start_ns + i * 10**6 + 500,
                "sw1",
                "gnmi",
                "dci_interface_receive_bytes_total",
                (("interface", f"Eth{i % 4}"),),
                "l1",
                float(i),
                i,
            )
        )
    archive.add(
        (
            start_ns,
            start_ns,
            "sw1",
            "snmp",
            "dci_optics_rx_power_dbm",
            (("interface", "Eth0"), ("lane", "1")),
            None,
            -2.25,
            None,
        )
    )


def test_layout_schema_and_values(tmp_path: Path) -> None:
    archive = Archive(tmp_path, FakeClock(), writer="w1")
    _fill(archive, 10)
    archive.add(
        (
            T0 + 3600 * 10**9,
            T0,
            "sw1",
            "snmp",
            "dci_interface_oper_up",
            (("interface", "Eth0"),),
            None,
            1.0,
            None,
        )
    )
    files = archive.flush()
    assert [f.relative_to(tmp_path).as_posix() for f in files] == [
        "date=2025-11-30/hour=10/w1-000001.parquet",
        "date=2025-11-30/hour=11/w1-000002.parquet",
    ]
    df = pl.read_parquet(tmp_path, hive_partitioning=True)
    assert df.height == 12
    assert df.schema["time"] == pl.Datetime("ns", "UTC")
    assert df.schema["counter"] == pl.UInt64
    lane = df.filter(pl.col("metric") == "dci_optics_rx_power_dbm").row(0, named=True)
    assert (lane["interface"], lane["lane"], lane["value"], lane["counter"], lane["link"]) == (
        "Eth0",
        "1",
        -2.25,
        None,
        None,
    )
    assert df["counter"].drop_nulls().max() == 9
    assert not list(tmp_path.rglob(".*"))  # no temporary file left behind


def test_each_row_carries_its_own_labels(tmp_path: Path) -> None:
    """Rows sharing label sets and rows with sets of their own, in any order: every row's label columns
    are its own pairs and null elsewhere (the columns are built once per distinct set)."""
    archive = Archive(tmp_path, FakeClock(), writer="w1")
    sets = [
        (),
        (("interface", "Eth0"),),
        (("interface", "Eth0"), ("queue", "3")),
        (("interface", "Eth1"), ("lane", "2"), ("direction", "rx")),
        (("pool", "0"), ("component", "OpticalChannel1/2")),
        (("priority", "3"),),
    ]
    expected = {}
    for i in range(600):
        pairs = sets[(i * 7) % len(sets)] if i % 5 else (("interface", f"Eth{i}"),)
        archive.add((T0 + i, T0 + i, "sw1", "snmp", "dci_interface_oper_up", pairs, None, float(i), None))
        expected[float(i)] = dict(pairs)
    archive.flush()
    df = pl.read_parquet(tmp_path, hive_partitioning=True)
    assert df.height == 600
    for row in df.iter_rows(named=True):
        own = expected[row["value"]]
        assert {k: row[k] for k in SERIES_LABELS} == {k: own.get(k) for k in SERIES_LABELS}


def test_a_failed_flush_keeps_its_rows(tmp_path: Path) -> None:
    blocked = tmp_path / "archive"
    blocked.write_text("a file where the folder should be")
    archive = Archive(blocked, FakeClock())
    _fill(archive, 5)
    assert archive.flush() == []
    assert archive.write_errors == 1 and archive.pending == 6
    blocked.unlink()
    assert len(archive.flush()) == 1 and archive.rows_written == 6


WRITER = textwrap.dedent("""
    import asyncio, sys, time
    from pathlib import Path
    from collector.exporters.archive import Archive

    async def main():
        archive = Archive(Path(sys.argv[1]))
        flusher = asyncio.create_task(archive.run(0.2))
        n = 0
        while True:
            now = time.time_ns()
            for _ in range(500):
                archive.add((now, now, "sw1", "snmp", "dci_interface_receive_bytes_total",
                            (("interface", "Eth1"),), None, float(n), n))
                n += 1
            print(n, flush=True)
            await asyncio.sleep(0.01)

    asyncio.run(main())
""")


def test_kill_9_loses_at_most_one_flush_interval(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 20
    added = 0
    while time.monotonic() < deadline and added < 60_000:
        added = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    added = max([added, *(int(line) for line in proc.stdout.read().split())])
    proc.stdout.close()
    visible = list(tmp_path.rglob("*.parquet"))
    df = pl.read_parquet(visible)  # every visible file is complete
    assert df.height > 0
    rows_per_interval = 500 / 0.01 * 0.2 * 2  # generous: the writer runs at most this fast
    assert added - df.height <= rows_per_interval
    assert sorted(df["counter"].to_list()) == list(range(df.height))  # nothing lost in the middle
