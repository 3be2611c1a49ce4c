"""The archive's own Parquet writer, read back by polars (the analyzer's reader) and pyarrow where installed:
every value, null and type as written, whatever the values (property tests), and the archive's rows the same
as polars' own writer gives them."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.contracts import archive as layout
from collector.contracts.catalog import SERIES_LABELS
from collector.exporters import archive, parquet
from collector.exporters.parquet import Column, Gathered

INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)  # no lone surrogates: not UTF-8
DTYPES = {
    "timestamp": pl.Datetime("ns", "UTC"),
    "string": pl.String(),
    "float64": pl.Float64(),
    "uint64": pl.UInt64(),
}


def _read(columns: Sequence[Column]) -> pl.DataFrame:
    return pl.read_parquet(parquet.encode(columns))


def _expanded(values: Sequence[object] | Gathered) -> list[object]:
    return [values.values[k] for k in values.rows] if isinstance(values, Gathered) else list(values)


def _same(read: list[object], written: list[object]) -> bool:
    return all(
        (isinstance(w, float) and math.isnan(w) and isinstance(r, float) and math.isnan(r)) or r == w
        for r, w in zip(read, written, strict=True)
    )


@st.composite
def tables(draw: st.DrawFn) -> list[Column]:
    rows = draw(st.integers(0, 40))
    kinds = draw(st.lists(st.sampled_from(list(DTYPES)), min_size=1, max_size=6))
    columns: list[Column] = []
    for n, kind in enumerate(kinds):
        name = f"c{n}"
        if kind == "timestamp":
            columns.append((name, kind, draw(st.lists(INT64, min_size=rows, max_size=rows))))
        elif kind == "float64":
            columns.append((name, kind, draw(st.lists(st.floats(), min_size=rows, max_size=rows))))
        elif kind == "uint64":
            value = st.none() | st.integers(0, 2**64 - 1)
            columns.append((name, kind, draw(st.lists(value, min_size=rows, max_size=rows))))
        elif draw(st.booleans()):
            keys = draw(st.lists(st.none() | TEXT, min_size=1, max_size=5))
            picks = st.lists(st.integers(0, len(keys) - 1), min_size=rows, max_size=rows)
            columns.append((name, kind, Gathered(keys, draw(picks))))
        else:
            columns.append((name, kind, draw(st.lists(st.none() | TEXT, min_size=rows, max_size=rows))))
    return columns


@settings(max_examples=300, deadline=None)
@given(tables())
def test_polars_reads_every_value_null_and_type_as_written(columns: list[Column]) -> None:
    frame = _read(columns)
    assert frame.columns == [name for name, _, _ in columns]
    for name, kind, values in columns:
        assert frame.schema[name] == DTYPES[kind]
        read = frame[name].to_list()
        if kind == "timestamp":
            read = frame[name].dt.epoch("ns").to_list()
        assert _same(read, _expanded(values)), name


@settings(max_examples=100, deadline=None)
@given(tables())
def test_pyarrow_reads_what_polars_reads(columns: list[Column]) -> None:
    pq = pytest.importorskip("pyarrow.parquet")  # the bench extra; CI reads with polars above
    table = pq.read_table(io.BytesIO(parquet.encode(columns)))
    for name, kind, values in columns:
        column = table.column(name)
        read = column.cast("int64").to_pylist() if kind == "timestamp" else column.to_pylist()
        assert _same(read, _expanded(values)), name


@pytest.mark.parametrize("distinct", [1, 256, 257, 65_536, 65_537])
def test_dictionary_indices_at_every_bit_width(distinct: int) -> None:
    values = [f"v{i}" for i in range(distinct)] + [None, "v0"]
    frame = _read([("s", "string", values)])
    assert frame["s"].to_list() == values


def test_an_empty_table_keeps_its_schema() -> None:
    frame = _read([(name, kind, []) for name, kind in layout.COLUMNS])
    assert frame.height == 0
    assert dict(frame.schema) == {name: DTYPES[kind] for name, kind in layout.COLUMNS}


def test_a_time_filter_skips_a_file_by_its_statistics(tmp_path: Path) -> None:
    """The pages are overwritten with garbage after writing: a reader that reaches them fails, so a filter
    outside the file's time range passes only if the footer's min and max let polars skip the file."""
    data = bytearray(
        parquet.encode([("time", "timestamp", [100, 300, 200]), ("value", "float64", [1.0, 2.0, 3.0])])
    )
    pages_end = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    data[4:pages_end] = b"\xab" * (pages_end - 4)
    path = tmp_path / "f.parquet"
    path.write_bytes(data)

    def after(ns: int) -> pl.LazyFrame:
        return pl.scan_parquet(path).filter(pl.col("time") > pl.lit(ns).cast(DTYPES["timestamp"]))

    assert after(300).collect().height == 0
    with pytest.raises(pl.exceptions.ComputeError):  # inside the range: the pages are read
        after(150).collect()


@pytest.mark.parametrize(
    "columns",
    [
        [("a", "string", ["x"]), ("b", "string", ["x", "y"])],
        [("s", "string", [1])],
        [("s", "string", ["\ud800"])],
        [("t", "timestamp", [2**63])],
        [("c", "uint64", [-1])],
    ],
)
def test_what_a_column_cannot_hold_is_an_error_before_the_file_is_whole(columns: list[Column]) -> None:
    with pytest.raises((ValueError, TypeError, OverflowError)):
        parquet.encode(columns)


def _rows() -> list[archive.Row]:
    t0 = 1_764_496_800 * 10**9
    rows: list[archive.Row] = []
    for i in range(3_000):
        labels = (("interface", f"Eth{i % 16}"),) + ((("queue", "3"), ("direction", "tx")) if i % 3 else ())
        link = f"l{i % 4}" if i % 16 < 4 else None
        counter = i * 1_000 if i % 5 else None
        rows.append(
            (
                t0 + i * 10**6,
                t0 + i * 10**6 + 7,
                f"sw{i % 7}",
                "snmp",
                f"m{i % 9}",
                labels,
                link,
                i / 3,
                counter,
            )
        )
    rows.append(
        (
            t0,
            t0,
            "sw0",
            "gnmi",
            "dci_optics_rx_power_dbm",
            (("component", "och 1/1/1"), ("lane", "é")),
            None,
            -2.5,
            2**64 - 1,
        )
    )
    return rows


def _polars_frame(rows: list[archive.Row]) -> pl.DataFrame:
    """The archive's rows as polars builds them from the same tuples (the reference)."""
    fields = list(zip(*rows, strict=True))
    by_name = dict(zip(("time", "received_time", "device", "source", "metric"), fields[:5], strict=True))
    by_name |= {"link": fields[6], "value": fields[7], "counter": fields[8]}
    for name in SERIES_LABELS:
        by_name[name] = [dict(labels).get(name) for labels in fields[5]]
    series = [
        pl.Series(name, by_name[name], pl.Int64).cast(DTYPES[kind])
        if kind == "timestamp"
        else pl.Series(name, by_name[name], DTYPES[kind])
        for name, kind in layout.COLUMNS
    ]
    return pl.DataFrame(series)


def test_the_archive_writes_the_frame_polars_builds_from_the_same_rows(tmp_path: Path) -> None:
    rows = _rows()
    store = archive.Archive(tmp_path, writer="w")
    for row in rows:
        store.add(row)
    files = store.flush()
    assert len(files) == 1
    read = pl.read_parquet(files[0])
    assert read.equals(_polars_frame(rows), null_equal=True)


@pytest.mark.parametrize(
    "labels",
    [(("interface", "Eth\udcff"),), (("interface",),), "interface=Eth0"],
    ids=["not utf-8", "a label without a value", "labels not pairs"],
)
def test_the_archive_drops_a_row_it_cannot_hold_and_writes_the_rest(tmp_path: Path, labels: object) -> None:
    rows = _rows()[:3]
    bad = (*rows[0][:5], labels, *rows[0][6:])
    store = archive.Archive(tmp_path, writer="w")
    for row in (rows[0], bad, rows[1]):
        store.add(row)  # type: ignore[arg-type]
    files = store.flush()
    assert store.rows_dropped == {"unwritable": 1}
    assert pl.read_parquet(files)["interface"].to_list() == ["Eth0", "Eth1"]


def test_duckdb_reads_the_archive_as_polars_does(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")  # the bench extra: a third reader, not polars' code or Arrow's
    store = archive.Archive(tmp_path, writer="w")
    for row in _rows():
        store.add(row)
    (path,) = store.flush()
    table = f"read_parquet('{path}', hive_partitioning = false)"
    read = duckdb.sql(f"select * exclude (time, received_time), epoch_ns(time) as t from {table}").fetchall()
    frame = pl.read_parquet(path)
    expected = frame.with_columns(t=pl.col("time").dt.epoch("ns")).drop("time", "received_time").rows()
    assert [tuple(row) for row in read] == expected
