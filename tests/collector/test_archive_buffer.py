"""The archive's columnar buffer: every row that a column can hold comes back as it went in, in order, across
chunks, hour partitions, a failed flush and a flush running while rows arrive; every other row is counted."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.exporters.archive import ROW_BYTES, Archive, Buffer

T0 = 1_764_496_800 * 10**9  # 2025-11-30T10:00:00Z
HOUR = 3600 * 10**9
MAX64 = 2**64 - 1

good_rows = st.tuples(
    st.integers(T0 - HOUR, T0 + 2 * HOUR),  # across three hour partitions
    st.integers(T0, T0 + HOUR),
    st.sampled_from(["sw1", "sw2"]),
    st.sampled_from(["snmp", "gnmi"]),
    st.sampled_from(["dci_interface_receive_bytes_total", "dci_interface_oper_up"]),
    st.sampled_from([(), (("interface", "Et1"),), (("interface", "Et2"), ("queue", "3"))]),
    st.sampled_from([None, "l1"]),
    st.floats(allow_nan=False),
    st.none() | st.integers(0, MAX64),
)
bad_rows = st.one_of(
    good_rows.map(lambda r: (*r[:8], -1)),  # a counter below 0
    good_rows.map(lambda r: (*r[:8], MAX64 + 1)),  # a counter past 64 bits
    good_rows.map(lambda r: (float(r[0]), *r[1:])),  # a time that is not an integer
    good_rows.map(lambda r: (2**63, *r[1:])),  # a time past int64
    good_rows.map(lambda r: r[:8]),  # a row of the wrong shape
)


def _read(files: list[Path | str]) -> list[tuple]:
    if not files:
        return []
    frame = pl.read_parquet(files).sort("time", maintain_order=True)
    return [
        (t, r, d, s, m, tuple((k, v) for k, v in (("interface", i), ("queue", q)) if v is not None), link, v, c)
        for t, r, d, s, m, i, q, link, v, c in frame.select(
            pl.col("time").dt.epoch("ns"),
            pl.col("received_time").dt.epoch("ns"),
            "device", "source", "metric", "interface", "queue", "link", "value", "counter",
        ).iter_rows()
    ]  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), good_rows, bad_rows), max_size=60), st.integers(1, 7))
def test_what_goes_in_comes_out_and_what_cannot_is_counted(
    tmp_path_factory, rows: list[tuple[bool, tuple, tuple]], chunk: int
) -> None:
    folder = tmp_path_factory.mktemp("archive")
    archive = Archive(folder, writer="w", max_buffer_bytes=ROW_BYTES * 10**6)
    archive._buffer.chunk = chunk  # fold often: rows cross chunks
    sent = [good if ok else bad for ok, good, bad in rows]
    for row in sent:
        archive.add(row)  # type: ignore[arg-type]
    expected = [good for ok, good, _ in rows if ok]
    assert archive.pending + archive.rows_dropped.get("unwritable", 0) == len(sent)
    assert archive.rows() == expected
    written = _read(archive.flush())
    assert sorted(written, key=lambda r: r[0]) == sorted(expected, key=lambda r: r[0])
    assert archive.rows_dropped.get("unwritable", 0) == len(sent) - len(expected)
    assert archive.rows_written == len(expected) and archive.pending == 0


def _hold_writes(
    archive: Archive, then: Callable[[int, Buffer], Path | str]
) -> tuple[threading.Event, threading.Event]:
    """Make ``archive``'s writing thread say it started, wait to be released, then do ``then``.

    Returns:
        the started and release events.
    """
    started, release = threading.Event(), threading.Event()

    def held(hour: int, part: Buffer) -> Path | str:
        started.set()
        release.wait(5)
        return then(hour, part)

    archive._write = held  # type: ignore[method-assign]
    return started, release


def _disk_full(hour: int, part: Buffer) -> Path | str:
    raise OSError("disk full")


def test_a_failed_flush_puts_its_rows_before_the_ones_that_came_during_it(tmp_path: Path) -> None:
    archive = Archive(tmp_path, writer="w")
    archive._buffer.chunk = 3
    started, release = _hold_writes(archive, _disk_full)
    rows = [(T0 + i, T0 + i, "sw1", "snmp", "m", (), None, float(i), i) for i in range(10)]

    async def main() -> None:
        for row in rows[:7]:
            archive.add(row)
        flushing = asyncio.create_task(archive.flush_async())
        await asyncio.to_thread(started.wait, 5)
        for row in rows[7:]:  # arrive while the write that will fail runs
            archive.add(row)
        release.set()
        assert await flushing == []

    asyncio.run(main())
    assert archive.write_errors == 1 and archive.rows() == rows


def test_rows_added_while_a_flush_writes_go_to_the_next(tmp_path: Path) -> None:
    archive = Archive(tmp_path, writer="w")
    started, release = _hold_writes(archive, archive._write)
    first = [(T0 + i, T0, "sw1", "snmp", "m", (), None, 1.0, None) for i in range(5)]
    later = [(T0 + 10 + i, T0, "sw1", "snmp", "m", (), None, 2.0, 7) for i in range(3000)]

    async def main() -> list[Path | str]:
        for row in first:
            archive.add(row)
        flushing = asyncio.create_task(archive.flush_async())
        await asyncio.to_thread(started.wait, 5)
        for row in later:  # folded into the live buffer while the thread writes the taken one
            archive.add(row)
        release.set()
        return await flushing

    files = asyncio.run(main())
    assert _read(files) == first
    assert archive.rows() == later and archive.rows_written == len(first)


def test_a_flush_cancelled_mid_write_keeps_its_rows(tmp_path: Path) -> None:
    """Stopping the daemon cancels its flush task: the rows it took must still be counted and kept."""
    archive = Archive(tmp_path, writer="w")
    started, release = _hold_writes(archive, _disk_full)
    rows = [(T0 + i, T0, "sw1", "snmp", "m", (), None, 1.0, i) for i in range(5)]

    async def main() -> None:
        for row in rows:
            archive.add(row)
        flushing = asyncio.create_task(archive.flush_async())
        await asyncio.to_thread(started.wait, 5)
        flushing.cancel()
        release.set()
        with contextlib.suppress(asyncio.CancelledError):
            await flushing

    asyncio.run(main())
    assert archive.write_errors == 1 and archive.rows() == rows
