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

The NCCL Inspector gives the other view (``inspector_records``, ``inspector_step_communication``). What it
gives directly: each operation's execution time (its longest kernel channel, GPU-timed when the timing
source is ``kernel_gpu``), the communicator, the rank inside it, host and pid, and (verbose output only)
the wall-clock time of the CPU call. What it cannot give: overlap with compute (it sees no compute
kernel), hence no exposed communication: its communication per step only bounds the exposed part from
above, and Kineto remains the only source of that part. What is inferred:

* the global rank: the process's rank in its largest communicator (the world communicator when the job
  made one, as ``torch.distributed`` does for the default group); a job with only sub-group communicators
  cannot be placed by rank correctly from Inspector output alone;
* the step: the operation is placed at its CPU call (as HTA and ``analyzer.ingest.kineto`` place kernels
  at their launch) and given to the step of that rank whose span holds it. Without verbose output the only
  time is the dump, written after the operation ended: it is placed at dump time minus its execution time,
  later than its kernel start by up to one dump interval (``NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS``,
  500 us in NVIDIA's examples) and later than its call by however long the kernel queued on its stream;
* a step's communication is the *sum* of its operations' times, not a union: operations on communicators
  that run concurrently count twice (Kineto's union counts them once), and operations the Inspector never
  wrote (v4.0 keeps one per communicator per dump; later versions report ring overflows) count zero.
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


def assign_to_steps(points: pl.LazyFrame, steps: pl.LazyFrame) -> pl.LazyFrame:
    """Give each point the step of its rank whose ``[start_time, end_time)`` holds the point's ``time``.

    Args:
        points: any rows with ``rank`` and ``time`` (a null time gets no step).
        steps: ``step``, ``rank``, ``start_time``, ``end_time``; when a faulty log overlaps two steps of a
            rank, the later-starting one wins.

    Returns:
        ``points`` with a ``step`` column (null where no step of the rank holds the time): timed rows in time
        order, then untimed ones.
    """
    spans = (
        steps.filter(pl.col("start_time").is_not_null())
        .select("rank", "step", pl.col("start_time").alias("time"), pl.col("end_time").alias("step_end"))
        .sort("time")
    )
    timed = points.drop("step", strict=False).filter(pl.col("time").is_not_null()).sort("time")
    untimed = points.drop("step", strict=False).filter(pl.col("time").is_null())
    # Both sides are sorted by time above; polars cannot verify that itself when joining by rank.
    joined = timed.join_asof(spans, on="time", by="rank", strategy="backward", check_sortedness=False)
    placed = joined.with_columns(step=pl.when(pl.col("time") < pl.col("step_end")).then(pl.col("step")))
    return pl.concat([placed.drop("step_end"), untimed], how="diagonal")


def inspector_records(collectives: pl.LazyFrame, steps: pl.LazyFrame) -> pl.LazyFrame:
    """NCCL Inspector operations on the training timeline: global rank, a time and the step holding it.

    Args:
        collectives: ``schemas.COLLECTIVES`` rows of the NCCL Inspector.
        steps: ``step``, ``rank``, ``start_time``, ``end_time`` (``correlate.prepare_steps`` output).

    Returns:
        The Inspector rows with ``rank`` the inferred global rank, ``comm_rank`` the rank in the communicator,
        ``time`` where the operation is placed, ``timed_by`` (``"call"``: the CPU call; ``"dump"``: inferred
        from the dump time; null: no time) and ``step`` (null outside every step of the rank).
    """
    process = (
        pl.when(pl.col("pid").is_not_null())
        .then(pl.format("{}/{}", pl.col("host").fill_null(""), pl.col("pid")))
        .otherwise(pl.col("source_file"))
    )
    largest = pl.col("rank").sort_by(pl.col("group_size").fill_null(0), descending=True).first()
    dumped = pl.col("dump_time") - pl.duration(
        microseconds=(pl.col("duration_seconds") * 1e6).round().cast(pl.Int64)
    )
    records = collectives.with_columns(
        comm_rank=pl.col("rank"),
        rank=pl.coalesce(largest.over(process), pl.col("rank")),
        time=pl.coalesce(pl.col("start_time"), dumped),
        timed_by=pl.when(pl.col("start_time").is_not_null())
        .then(pl.lit("call"))
        .when(pl.col("dump_time").is_not_null())
        .then(pl.lit("dump")),
    )
    return assign_to_steps(records, steps)


def inspector_step_communication(records: pl.LazyFrame) -> pl.LazyFrame:
    """Per (step, rank): the Inspector's summed operation time and operation count.

    Args:
        records: ``inspector_records`` output.

    Returns:
        ``step``, ``rank``, ``inspector_communication_seconds``, ``inspector_collectives`` for steps holding
        at least one operation.
    """
    return (
        records.filter(pl.col("step").is_not_null())
        .group_by("step", "rank")
        .agg(
            inspector_communication_seconds=pl.col("duration_seconds").sum(),
            inspector_collectives=pl.len().cast(pl.Int64),
        )
    )
