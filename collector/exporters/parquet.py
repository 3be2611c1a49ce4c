"""A Parquet writer for the archive's four column types, with no dataframe library (issue 33).

Why not polars or pyarrow, which read and write everything: a collector that archives (the default) paid
for the library's floor in every process. Measured on this project's machine (RSS of a bare interpreter after
the import and one small zstd write): polars +22 MB at import and ~54 MB once writing, pyarrow +41 MB at
import and +57 MB once writing, against a whole collector's budget of 71 MB (four times Prometheus's
``snmp_exporter``). The archive needs a small part of the format, written here:

* one row group per file, one column chunk per column, one data page (v1) per chunk, each page compressed
  with zstd (``backports.zstd``, the standard library's ``compression.zstd`` from Python 3.14);
* ``timestamp``: INT64 annotated TIMESTAMP(UTC, NANOS), required, PLAIN, with min and max statistics, so a
  reader filtering on time skips files that cannot match;
* ``float64``: DOUBLE, required, PLAIN;
* ``uint64``: INT64 annotated INTEGER(64, unsigned), optional, PLAIN (the value's 64 bits as they are);
* ``string``: BYTE_ARRAY annotated STRING, optional, dictionary-encoded: the archive's strings repeat (a
  few devices, metrics and label sets), so each column stores its distinct values once and an index a row;
* nulls as definition levels of the RLE/bit-packing hybrid (one RLE run where every row is alike, else one
  bit-packed run); dictionary indices bit-packed at 8, 16 or 32 bits, where bit-packing is the plain
  little-endian array of the values (no shifting in Python).

The footer is Thrift's compact protocol (``_Struct``). The format's reference is ``parquet.thrift`` and
``Encodings.md`` of apache/parquet-format; ``tests/collector/test_parquet.py`` reads what this writes with
polars (and pyarrow and DuckDB where installed) and checks every value, null and type.
"""

from __future__ import annotations

import operator
import sys
from array import array
from collections.abc import Sequence
from itertools import compress, repeat
from typing import Any, Literal, NamedTuple, TypeGuard, cast

from backports import zstd

Kind = Literal["timestamp", "string", "float64", "uint64"]


class Gathered(NamedTuple):
    """A string column given as its values per distinct key and each row's key (``values[rows[r]]`` is row
    r's): a label column is a few thousand label sets' values, and encoding them per set, not per row, is
    most of what writing it costs."""

    values: Sequence[str | None]
    rows: Sequence[int]


class Masked(NamedTuple):
    """A uint64 column given as every row's number and a flag a row (1: present, 0: null): the archive
    buffers its counters so, as numbers in an array rather than objects."""

    values: Sequence[int]
    present: bytes


Column = tuple[str, Kind, "Sequence[Any] | Gathered | Masked"]
"""A column to write: its name, its kind and its values (``None`` for a null where the kind allows one)."""

MAGIC = b"PAR1"
CREATED_BY = "spanwatch collector.exporters.parquet"
ZSTD_LEVEL = 3  # zstd's default: the speed polars' writer uses too

# parquet.thrift's enums (the values this writer uses).
_INT64, _DOUBLE, _BYTE_ARRAY = 2, 5, 6
_REQUIRED, _OPTIONAL = 0, 1
_UTF8, _UINT_64 = 0, 14  # ConvertedType, still set beside the LogicalType for older readers
_PLAIN, _RLE, _RLE_DICTIONARY = 0, 3, 8
_ZSTD = 6
_DATA_PAGE, _DICTIONARY_PAGE = 0, 2

# Thrift compact protocol field types.
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _BINARY, _LIST, _STRUCT = 1, 2, 3, 4, 5, 6, 8, 9, 12

_LITTLE = sys.byteorder == "little"


def encode(columns: Sequence[Column]) -> bytes:
    """``columns`` (all of one length) as one Parquet file, made whole in memory: a value that cannot be
    written raises before any byte reaches a file.

    Raises:
        ValueError: columns of different lengths, or a string column's value that is not text.
        OverflowError: a timestamp or counter out of 64 bits.
        TypeError: a number column's value that is not a number.
    """
    rows = _length(columns[0][2]) if columns else 0
    if any(_length(values) != rows for _, _, values in columns):
        raise ValueError("parquet: columns of different lengths")
    parts, offset = [MAGIC], len(MAGIC)
    chunks, total_raw = [], 0
    for name, kind, values in columns:
        data, meta, raw = _column_chunk(name, kind, values, offset)
        parts.append(data)
        chunks.append(_Struct().i64(2, 0).struct(3, meta).end())
        offset += len(data)
        total_raw += raw
    group = (
        _Struct()
        .list(1, _STRUCT, chunks)
        .i64(2, total_raw)
        .i64(3, rows)
        .i64(5, len(MAGIC))
        .i64(6, offset - len(MAGIC))
        .i16(7, 0)
    )
    type_order = _Struct().struct(1, _Struct().end()).end()  # ColumnOrder{TYPE_ORDER: TypeDefinedOrder{}}
    footer = (
        _Struct()
        .i32(1, 1)
        .list(
            2,
            _STRUCT,
            [_Struct().binary(4, b"schema").i32(5, len(columns)).end()]
            + [_schema_element(name, kind) for name, kind, _ in columns],
        )
        .i64(3, rows)
        .list(4, _STRUCT, [group.end()])
        .binary(6, CREATED_BY.encode())
        .list(7, _STRUCT, [type_order] * len(columns))
        .end()
    )
    return b"".join([*parts, footer, len(footer).to_bytes(4, "little"), MAGIC])


def _length(values: Sequence[Any] | Gathered | Masked) -> int:
    if isinstance(values, Gathered):
        return len(values.rows)
    return len(values.present) if isinstance(values, Masked) else len(values)


def _schema_element(name: str, kind: Kind) -> bytes:
    element = _Struct()
    if kind == "timestamp":
        nanos = _Struct().struct(3, _Struct().end()).end()  # TimeUnit{NANOS: NanoSeconds{}}
        logical = _Struct().struct(8, _Struct().boolean(1, True).struct(2, nanos).end())
        return (
            element.i32(1, _INT64).i32(3, _REQUIRED).binary(4, name.encode()).struct(10, logical.end()).end()
        )
    if kind == "float64":
        return element.i32(1, _DOUBLE).i32(3, _REQUIRED).binary(4, name.encode()).end()
    if kind == "uint64":
        logical = _Struct().struct(10, _Struct().byte(1, 64).boolean(2, False).end())
        element.i32(1, _INT64).i32(3, _OPTIONAL).binary(4, name.encode()).i32(6, _UINT_64)
        return element.struct(10, logical.end()).end()
    logical = _Struct().struct(1, _Struct().end())  # LogicalType{STRING: StringType{}}
    element.i32(1, _BYTE_ARRAY).i32(3, _OPTIONAL).binary(4, name.encode()).i32(6, _UTF8)
    return element.struct(10, logical.end()).end()


def _column_chunk(
    name: str, kind: Kind, values: Sequence[Any] | Gathered | Masked, offset: int
) -> tuple[bytes, bytes, int]:
    """One column's pages, its ``ColumnMetaData`` (pages starting at ``offset``), and their raw size."""
    rows = _length(values)
    dictionary, dictionary_raw = b"", 0
    if kind == "string":
        physical, encoding = _BYTE_ARRAY, _RLE_DICTIONARY
        distinct, body, stats = _strings(values)
        header = _Struct().i32(1, len(distinct)).i32(2, _PLAIN)
        dictionary, dictionary_raw = _page(_DICTIONARY_PAGE, _plain_strings(distinct), header)
    elif isinstance(values, Gathered):
        raise TypeError(f"parquet: only a string column is given gathered, not {kind} {name}")
    elif kind == "uint64":
        physical, encoding = _INT64, _PLAIN
        body, stats = _counters(values)
    elif isinstance(values, Masked):
        raise TypeError(f"parquet: only a uint64 column is given masked, not {kind} {name}")
    else:
        physical, encoding = (_INT64, _PLAIN) if kind == "timestamp" else (_DOUBLE, _PLAIN)
        body, stats = _fixed(kind, values)
    data_header = _Struct().i32(1, rows).i32(2, encoding).i32(3, _RLE).i32(4, _RLE)
    data_page, data_raw = _page(_DATA_PAGE, body, data_header)
    pages, raw = dictionary + data_page, dictionary_raw + data_raw
    meta = _Struct().i32(1, physical)
    used = [_PLAIN, _RLE] if encoding == _PLAIN else [_PLAIN, _RLE, _RLE_DICTIONARY]
    meta.list(2, _I32, [_varint(_zigzag(e)) for e in used])
    meta.list(3, _BINARY, [_binary(name.encode())])
    meta.i32(4, _ZSTD).i64(5, rows).i64(6, raw).i64(7, len(pages)).i64(9, offset + len(dictionary))
    if dictionary:
        meta.i64(11, offset)
    meta.struct(12, stats.end())
    return pages, meta.end(), raw


def _strings(values: Sequence[Any] | Gathered) -> tuple[list[str], bytes, _Struct]:
    """A string column's dictionary, its data page body (levels, then indices) and its statistics."""
    distinct, ids = _dictionary(values)
    present = [i for i in ids if i is not None] if None in ids else cast(list[int], ids)
    body = _definition_levels(ids, len(present)) + _packed_indices(present, len(distinct))
    return distinct, body, _Struct().i64(3, len(ids) - len(present))


def _counters(values: Sequence[Any] | Masked) -> tuple[bytes, _Struct]:
    """A uint64 column's data page body (levels, then the values present) and its statistics."""
    present: Sequence[Any]
    if isinstance(values, Masked):
        flags = values.present
        nulls = flags.count(0)
        present = list(compress(values.values, flags)) if nulls else values.values
        levels = _definition_levels(flags, len(flags) - nulls, flags)
    else:
        plain = cast("Sequence[Any]", values)
        nulls = plain.count(None)
        present = [v for v in plain if v is not None] if nulls else plain
        levels = _definition_levels(plain, len(plain) - nulls)
    return levels + _le(array("Q", present)).tobytes(), _Struct().i64(3, nulls)


def _fixed(kind: Kind, values: Sequence[Any]) -> tuple[bytes, _Struct]:
    """A required timestamp or float64 column's data page body, and its statistics: a timestamp's min and
    max, so a reader filtering on time skips a file outside its range."""
    timestamps = kind == "timestamp"
    stats = _Struct().i64(3, 0)
    if timestamps and values:
        high, low = _le(array("q", [max(values)])), _le(array("q", [min(values)]))
        stats.binary(5, high.tobytes()).binary(6, low.tobytes())
    return _le(array("q" if timestamps else "d", values)).tobytes(), stats


def _plain_strings(values: Sequence[str]) -> bytes:
    """PLAIN byte arrays: each value's UTF-8 length (4 bytes, little-endian), then its bytes."""
    return b"".join(len(b).to_bytes(4, "little") + b for b in map(_utf8, values))


def _dictionary(values: Sequence[Any] | Gathered) -> tuple[list[str], list[int | None]]:
    """A string column's distinct values (first seen first) and each row's index among them (None: null)."""
    keyed, rows = (values.values, values.rows) if isinstance(values, Gathered) else (values, None)
    distinct = [v for v in dict.fromkeys(keyed) if v is not None]
    index: dict[object, int | None] = {v: i for i, v in enumerate(distinct)}
    index[None] = None
    ids = list(map(index.__getitem__, keyed))
    if rows is None:
        return distinct, ids
    if not distinct:  # every row null: no row's key needs reading
        return distinct, [None] * len(rows)
    return distinct, list(map(ids.__getitem__, rows))


def _page(kind: int, body: bytes, header: _Struct) -> tuple[bytes, int]:
    """A page (its compact Thrift header and its zstd-compressed body) and its size uncompressed."""
    packed = zstd.compress(body, level=ZSTD_LEVEL)
    head = _Struct().i32(1, kind).i32(2, len(body)).i32(3, len(packed))
    encoded = head.struct(5 if kind == _DATA_PAGE else 7, header.end()).end()
    return encoded + packed, len(encoded) + len(body)


def _definition_levels(values: Sequence[object], present: int, flags: bytes | None = None) -> bytes:
    """The definition levels (1: a value, 0: null; ``flags`` when they are known), prefixed with their
    length (data page v1): one RLE run where every row is alike, else one bit-packed run of them all."""
    n = len(values)
    if present in (0, n):
        runs = _varint(n << 1) + bytes((1 if present else 0,)) if n else b""
    else:
        groups = (n + 7) // 8
        if flags is None:
            flags = bytes(map(operator.is_not, values, repeat(None)))
        # Bit k of the run is row k's level (least significant bit first): the flags as binary digits, the
        # first row last, read as one integer.
        bits = int(flags.translate(_DIGITS)[::-1], 2).to_bytes(groups, "little")
        runs = _varint(groups << 1 | 1) + bits
    return len(runs).to_bytes(4, "little") + runs


_DIGITS = bytes.maketrans(b"\x00\x01", b"01")


def _packed_indices(indices: list[int], distinct: int) -> bytes:
    """Dictionary indices: their bit width, then one bit-packed run (8 values a group, the last padded)."""
    width, code = (8, "B") if distinct <= 1 << 8 else (16, "H") if distinct <= 1 << 16 else (32, "I")
    groups = (len(indices) + 7) // 8
    packed = array(code, indices)
    packed.extend([0] * (groups * 8 - len(indices)))
    return bytes((width,)) + _varint(groups << 1 | 1) + _le(packed).tobytes()


def _le(values: array) -> array:  # type: ignore[type-arg]
    """``values`` in little-endian order (Parquet's), whatever the host's."""
    if not _LITTLE:
        values.byteswap()
    return values


def is_text(value: object) -> TypeGuard[str]:
    """Whether ``value`` can be a Parquet string: a ``str`` that UTF-8 encodes (a lone surrogate does not)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _utf8(value: object) -> bytes:
    if not is_text(value):
        raise ValueError(f"parquet: a string column holds {value!r}, which is not text")
    return value.encode()


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _binary(value: bytes) -> bytes:
    return _varint(len(value)) + value


class _Struct:
    """A Thrift compact-protocol struct, written field by field in increasing field id order."""

    def __init__(self) -> None:
        self._out = bytearray()
        self._last = 0

    def _field(self, field: int, kind: int) -> _Struct:
        delta = field - self._last
        if 0 < delta <= 15:
            self._out.append(delta << 4 | kind)
        else:
            self._out.append(kind)
            self._out += _varint(_zigzag(field))
        self._last = field
        return self

    def boolean(self, field: int, value: bool) -> _Struct:
        return self._field(field, _TRUE if value else _FALSE)

    def byte(self, field: int, value: int) -> _Struct:
        self._field(field, _BYTE)._out.append(value & 0xFF)
        return self

    def i16(self, field: int, value: int) -> _Struct:
        self._field(field, _I16)._out += _varint(_zigzag(value))
        return self

    def i32(self, field: int, value: int) -> _Struct:
        self._field(field, _I32)._out += _varint(_zigzag(value))
        return self

    def i64(self, field: int, value: int) -> _Struct:
        self._field(field, _I64)._out += _varint(_zigzag(value))
        return self

    def binary(self, field: int, value: bytes) -> _Struct:
        self._field(field, _BINARY)._out += _binary(value)
        return self

    def struct(self, field: int, encoded: bytes) -> _Struct:
        """A nested struct or union, already ``end``-ed."""
        self._field(field, _STRUCT)._out += encoded
        return self

    def list(self, field: int, kind: int, encoded: Sequence[bytes]) -> _Struct:
        """A list of elements of one type, each already encoded."""
        self._field(field, _LIST)
        n = len(encoded)
        self._out += bytes((n << 4 | kind,)) if n < 15 else bytes((0xF0 | kind,)) + _varint(n)
        for item in encoded:
            self._out += item
        return self

    def end(self) -> bytes:
        return bytes(self._out) + b"\x00"
