"""Two ways of handling large polars frames that keep memory to what the rows need (issue 31: millions of
steps and events on one driver)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl


def own_strings(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its text columns copied into buffers of their own. A concatenation (rechunked or not)
    gathers string views and keeps every source frame's string buffer alive, however few of its bytes are
    used: about 16 kB a file whatever its rows, so 4,096 small traces held 60 MB more than 256 did
    (pola-rs/polars#19497). Appending "" builds new strings; it costs one copy of the text."""
    return frame.with_columns(pl.col(pl.String) + "")


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
