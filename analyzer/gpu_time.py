"""Where a GPU's time goes: compute, communication, and communication no compute hides (pure LazyFrame logic).

Definitions follow HolisticTraceAnalysis (HTA) so figures can be checked against it:

* a GPU event is a trace event on a CUDA stream (kernels, memcpy, memset);
* communication = kernel name matches ``^nccl.*Kernel`` (``ncclKernel_*`` and ``ncclDevKernel_*``);
* memory = name starts with ``Memcpy``, ``Memset`` or ``dma``;
* compute = everything else, except names that contain ``Memcpy`` or end in a ``Sync`` wait;
* time of a class = length of the *union* of its intervals (two overlapping kernels count once);
* overlapped communication = length of (communication union ∩ compute union); exposed communication =
  communication union minus that: NCCL running while no compute kernel runs on any stream of that GPU.

Everything is vectorised: unions by sort + cumulative max, intersections by a +1/-1, +2/-2 sweep.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

COMMUNICATION = "communication"
MEMORY = "memory"
COMPUTE = "compute"
OTHER = "other"

_COMM_RE = r"^nccl.*Kernel"
_MEMORY_RE = r"^(?:Memcpy|Memset|dma)"
# HTA excludes these from compute: NCCL kernels, anything mentioning Memcpy, Memset, and *Sync waits.
_NOT_COMPUTE_RE = r"^nccl.*Kernel|^.*Memcpy|^Memset|^.*Sync"


def kernel_class(name: pl.Expr) -> pl.Expr:
    """Classify GPU events by name into communication / memory / compute / other.

    Args:
        name: an expression yielding the kernel name.

    Returns:
        A String expression with one of the module's class constants.
    """
    return (
        pl.when(name.str.contains(_COMM_RE))
        .then(pl.lit(COMMUNICATION))
        .when(name.str.contains(_MEMORY_RE))
        .then(pl.lit(MEMORY))
        .when(~name.str.contains(_NOT_COMPUTE_RE))
        .then(pl.lit(COMPUTE))
        .otherwise(pl.lit(OTHER))
    )


def merge_intervals(intervals: pl.LazyFrame, by: Sequence[str]) -> pl.LazyFrame:
    """Union of ``[start, end)`` intervals per group: overlapping or touching intervals become one.

    Args:
        intervals: columns ``by`` + ``start`` + ``end`` (any numeric or temporal type, ``end >= start``).
        by: the grouping columns (at least one).

    Returns:
        Disjoint intervals ``by`` + ``start`` + ``end``, sorted.

    Raises:
        ValueError: ``by`` is empty.
    """
    keys = _keys(by)
    reach = pl.col("end").cum_max().shift(1).over(keys)
    # A block starts where an interval begins after everything before it (in its group) has ended.
    new_block = (pl.col("start") > reach).fill_null(True)
    blocks = intervals.sort([*keys, "start"]).with_columns(
        block=new_block.cast(pl.Int64).cum_sum().over(keys)
    )
    merged = blocks.group_by([*keys, "block"]).agg(pl.col("start").min(), pl.col("end").max())
    return merged.drop("block").sort([*keys, "start"])


def _keys(by: Sequence[str]) -> list[str]:
    if not by:
        raise ValueError("group by at least one column (add a constant column for a single group)")
    return list(by)


def union_length(intervals: pl.LazyFrame, by: Sequence[str], name: str) -> pl.LazyFrame:
    """Total length of the union of intervals per group.

    Args:
        intervals: columns ``by`` + ``start`` + ``end``.
        by: the grouping columns.
        name: name of the output length column.

    Returns:
        ``by`` + ``name``.
    """
    merged = merge_intervals(intervals, by)
    return merged.group_by(list(by)).agg((pl.col("end") - pl.col("start")).sum().alias(name))


def intersection_length(
    first: pl.LazyFrame, second: pl.LazyFrame, by: Sequence[str], name: str
) -> pl.LazyFrame:
    """Length of (union of ``first``) ∩ (union of ``second``) per group, by a sweep over interval edges.

    Args:
        first: columns ``by`` + ``start`` + ``end``.
        second: same columns.
        by: the grouping columns.
        name: name of the output length column.

    Returns:
        ``by`` + ``name`` for groups present in either input (0 where they never meet).
    """
    keys = _keys(by)

    def edges(frame: pl.LazyFrame, weight: int) -> pl.LazyFrame:
        merged = merge_intervals(frame, keys)
        opening = merged.select([*keys, pl.col("start").alias("time"), pl.lit(weight).alias("delta")])
        closing = merged.select([*keys, pl.col("end").alias("time"), pl.lit(-weight).alias("delta")])
        return pl.concat([opening, closing])

    # Both sets are merged, so the running sum is 3 exactly while one of each is open.
    sweep = pl.concat([edges(first, 1), edges(second, 2)]).sort([*keys, "time"])
    spans = sweep.with_columns(
        running=pl.col("delta").cum_sum().over(keys), following=pl.col("time").shift(-1).over(keys)
    )
    both = pl.when(pl.col("running") == 3).then(pl.col("following") - pl.col("time")).otherwise(0)
    return spans.group_by(keys).agg(both.sum().alias(name))


def breakdown(events: pl.LazyFrame, by: Sequence[str]) -> pl.LazyFrame:
    """Compute, communication, overlapped and exposed communication time per group, in seconds.

    Args:
        events: GPU events with ``by`` columns, ``name``, ``start_ns`` and ``end_ns`` (integer nanoseconds).
        by: the grouping columns, e.g. ``["rank", "step"]``.

    Returns:
        ``by`` + ``kernels``, ``communication_kernels``, ``compute_seconds``, ``communication_seconds``,
        ``overlapped_seconds``, ``exposed_communication_seconds``, ``memory_seconds`` (0 where a class is
        absent).

    Raises:
        ValueError: ``by`` is empty.
    """
    keys = _keys(by)
    classified = events.select(
        [
            *keys,
            kernel_class(pl.col("name")).alias("class"),
            pl.col("start_ns").alias("start"),
            pl.col("end_ns").alias("end"),
        ]
    )

    def of(kind: str) -> pl.LazyFrame:
        return classified.filter(pl.col("class") == kind).select([*keys, "start", "end"])

    counts = classified.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("kernels"),
        (pl.col("class") == COMMUNICATION).sum().cast(pl.Int64).alias("communication_kernels"),
    )
    lengths = [
        union_length(of(COMPUTE), keys, "compute"),
        union_length(of(COMMUNICATION), keys, "communication"),
        union_length(of(MEMORY), keys, "memory"),
        intersection_length(of(COMMUNICATION), of(COMPUTE), keys, "overlapped"),
    ]
    table = counts
    for frame in lengths:
        table = table.join(frame, on=keys, how="left", nulls_equal=True)
    seconds = [
        (pl.col(c).fill_null(0) / 1e9).alias(f"{c}_seconds")
        for c in ("compute", "communication", "memory", "overlapped")
    ]
    return table.select([*keys, "kernels", "communication_kernels", *seconds]).with_columns(
        exposed_communication_seconds=pl.col("communication_seconds") - pl.col("overlapped_seconds")
    )
