"""Two ways of handling large polars frames that keep memory to what the rows need (issue 31: millions of
steps and events on one driver)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl


def shared_text(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its text in buffers of its own, each value held once where values repeat.

    Two costs it removes. A concatenation (rechunked or not) gathers string views and keeps every source
    frame's string buffer alive, however few of its bytes are used: about 16 kB a file whatever its rows, so
    4,096 small traces held 60 MB more than 256 did (pola-rs/polars#19497). And a column read from a file
    holds every row's text: 4e6 steps' ``source_file`` is 143 MB of 35-byte paths for 4,096 distinct ones.
    A column whose distinct values are at most half its rows becomes views into one buffer of those values
    (16 bytes a row); any other is copied (appending ""), which costs one copy of its text.
    """
    return frame.with_columns(
        _shared(frame.get_column(name)) for name, dtype in frame.schema.items() if dtype == pl.String()
    )


def _shared(column: pl.Series) -> pl.Series:
    values = column.unique(maintain_order=True).drop_nulls()
    if 2 * values.len() > column.len():  # mostly distinct: a copy costs less than a lookup
        return column + ""
    # The distinct values copied too: ``unique`` gives views into the column's own buffers.
    return (values + "").gather(column.cast(pl.Enum(values)).to_physical()).alias(column.name)


def sorted_by(frame: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """``frame`` sorted by ``keys``, a column at a time: each column is gathered in the new order and the old
    one let go, so that the rows are held about once where ``sort`` holds them twice. The caller must not
    keep ``frame`` (pass it as the call's own expression), or nothing is let go."""
    order = frame.select(pl.arg_sort_by(list(keys))).to_series()
    columns = []
    for name in frame.columns:
        columns.append(frame.get_column(name).gather(order))
        frame = frame.drop(name)
    return pl.DataFrame(columns)
