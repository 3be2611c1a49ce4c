"""Declared polars schemas of the tables the ingest layer produces (one schema per table, SuzieQ-style).

Every parser returns DataFrames with exactly these columns and dtypes (``conform`` enforces it), so code
downstream never guesses what a column holds. Times are ``Datetime(ns, UTC)``; a column is null where the
log format has no such information (NCCL INFO lines without NCCL_DEBUG_TIMESTAMP_LEVELS carry no time,
Megatron iteration lines usually carry none).

Tables:
    steps            one row per training step (or per logged interval, see ``interval_average``)
    collectives      one row per collective measurement (a kernel, an nccl-tests size, an Inspector record,
                     or an aggregated summary row with ``occurrences`` > 1)
    nccl_ranks       one row per (communicator, rank) NCCL reported at init: where each rank runs
    nccl_connections one row per NCCL channel connection: which rank pairs cross the network, over what
    kineto_steps     per (rank, step) GPU time split of a PyTorch profiler trace
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from collector.contracts import archive as layout
from collector.contracts.catalog import CATALOG

TIME = pl.Datetime("ns", "UTC")

# Columns every table carries, so rows from many files can be concatenated and still traced to their origin.
_ORIGIN: dict[str, pl.DataType] = {"source_file": pl.String(), "format": pl.String()}

STEPS: pl.Schema = pl.Schema(
    {
        **_ORIGIN,
        "rank": pl.Int64(),
        "step": pl.Int64(),
        "start_time": TIME,
        "end_time": TIME,
        "duration_seconds": pl.Float64(),
        # True when duration_seconds is an average over the steps since the previous logged line
        # (Megatron's "elapsed time per iteration", DeepSpeed's and torchtitan's periodic prints), not one
        # measured step; interval_steps says over how many steps.
        "interval_average": pl.Boolean(),
        "interval_steps": pl.Int64(),
        "loss": pl.Float64(),
        # The step's time in collectives as the log itself timed it (a plain step log's ``comm_seconds``
        # plus its ``wait_seconds`` at the collective's entry), null when the log does not say.
        "logged_communication_seconds": pl.Float64(),
    }
)

COLLECTIVES: pl.Schema = pl.Schema(
    {
        **_ORIGIN,
        "rank": pl.Int64(),  # global rank (Kineto), or the rank inside ``process_group`` (NCCL Inspector)
        "host": pl.String(),
        "pid": pl.Int64(),
        "step": pl.Int64(),
        "collective": pl.String(),
        "sequence": pl.Int64(),  # the communicator's operation number (Inspector coll_sn / p2p_sn)
        "dtype": pl.String(),
        "elements": pl.Int64(),
        "size_bytes": pl.Float64(),
        "group_size": pl.Int64(),
        "process_group": pl.String(),
        "in_place": pl.Boolean(),
        # kernel start (Kineto); the CPU call that enqueued the collective (Inspector, verbose output only)
        "start_time": TIME,
        "duration_seconds": pl.Float64(),
        # how duration_seconds was timed: Inspector's kernel_gpu, kernel_cpu or collective_cpu
        "timing_source": pl.String(),
        "dump_time": TIME,  # when the NCCL Inspector wrote the record: the collective had ended by then
        "algbw_gbps": pl.Float64(),  # GB/s (10^9 bytes per second), as nccl-tests and NCCL print it
        "busbw_gbps": pl.Float64(),
        "occurrences": pl.Int64(),  # 1 for a single measurement; N for a summary row (N collectives averaged)
        "wrong": pl.Int64(),  # nccl-tests "#wrong" validation errors, when present
        # nccl-tests 2.17+ per-iteration spread of duration_seconds (a mean): i_min, i_max, i_p99, i_cv%
        "iteration_min_seconds": pl.Float64(),
        "iteration_max_seconds": pl.Float64(),
        "iteration_p99_seconds": pl.Float64(),
        "iteration_cv": pl.Float64(),  # coefficient of variation, a fraction (i_cv% / 100)
    }
)

NCCL_RANKS: pl.Schema = pl.Schema(
    {
        **_ORIGIN,
        "comm": pl.String(),
        "rank": pl.Int64(),
        "nranks": pl.Int64(),
        "host": pl.String(),
        "pid": pl.Int64(),
        "cuda_device": pl.Int64(),
        "bus_id": pl.String(),
        "time": TIME,
    }
)

NCCL_CONNECTIONS: pl.Schema = pl.Schema(
    {
        **_ORIGIN,
        "host": pl.String(),  # host of the process that logged the line
        "pid": pl.Int64(),
        "rank": pl.Int64(),  # the logging rank (sender for [send] and P2P/SHM lines, receiver for [receive])
        "peer": pl.Int64(),  # the rank at the other end
        "src_rank": pl.Int64(),
        "dst_rank": pl.Int64(),
        "channel": pl.Int64(),
        "direction": pl.String(),  # "send", "receive", or null when NCCL prints no direction (P2P, SHM)
        # the first two fields of the "via" clause: NET/IB, NET/Socket, P2P/IPC, SHM/direct
        "transport": pl.String(),
        "transport_detail": pl.String(),  # the whole "via" clause, e.g. NET/IB/1/GDRDMA
        "crosses_network": pl.Boolean(),  # the pair talks over a NIC (NET/*, CollNet), not NVLink/PCIe/SHM
        "time": TIME,
    }
)

KINETO_STEPS: pl.Schema = pl.Schema(
    {
        **_ORIGIN,
        "rank": pl.Int64(),
        "step": pl.Int64(),
        "kernels": pl.Int64(),
        "communication_kernels": pl.Int64(),
        "compute_seconds": pl.Float64(),  # union of compute-kernel intervals (HTA's compute_time)
        "communication_seconds": pl.Float64(),  # union of NCCL-kernel intervals
        "overlapped_seconds": pl.Float64(),  # NCCL time during which some compute kernel also ran
        "exposed_communication_seconds": pl.Float64(),  # NCCL time with no compute kernel running
        "memory_seconds": pl.Float64(),  # union of memcpy/memset intervals
    }
)

TABLES: Mapping[str, pl.Schema] = {
    "steps": STEPS,
    "collectives": COLLECTIVES,
    "nccl_ranks": NCCL_RANKS,
    "nccl_connections": NCCL_CONNECTIONS,
    "kineto_steps": KINETO_STEPS,
}


def empty(table: str) -> pl.DataFrame:
    """An empty DataFrame of a declared table.

    Args:
        table: a key of ``TABLES``.

    Returns:
        A zero-row DataFrame with the table's schema.

    Raises:
        KeyError: ``table`` is not declared.
    """
    return pl.DataFrame(schema=TABLES[table])


def conform(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """Give ``frame`` exactly the declared columns of ``table``, in order: missing ones become null.

    Args:
        table: a key of ``TABLES``.
        frame: a DataFrame holding a subset of the table's columns (extra columns are dropped).

    Returns:
        The DataFrame cast to the declared schema.

    Raises:
        KeyError: ``table`` is not declared.
        polars.exceptions.InvalidOperationError: a column cannot be cast to its declared type (a parser bug).
    """
    schema = TABLES[table]
    columns = [
        (pl.col(name) if name in frame.columns else pl.lit(None)).cast(dtype).alias(name)
        for name, dtype in schema.items()
    ]
    return frame.select(columns)


def from_rows(table: str, rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """Build a table from row dicts (only the keys a parser knows; the rest become null).

    Args:
        table: a key of ``TABLES``.
        rows: dicts keyed by column name.

    Returns:
        A DataFrame with the table's schema.

    Raises:
        KeyError: ``table`` is not declared.
    """
    schema = TABLES[table]
    if not rows:
        return empty(table)
    frame = pl.from_dicts(list(rows), schema=schema, strict=False)
    return conform(table, frame)


# -- Analysis tables (issue 5): telemetry in, events and attribution out ------------------------------------
# Kept apart from ``TABLES`` on purpose: ``TABLES`` is what log parsers fill, and every ParseResult carries
# one (possibly empty) frame per entry there.

_POLARS_TYPES: dict[str, pl.DataType] = {
    "timestamp": TIME,
    "string": pl.String(),
    "float64": pl.Float64(),
    "uint64": pl.UInt64(),
}
ARCHIVE: pl.Schema = pl.Schema({name: _POLARS_TYPES[kind] for name, kind in layout.COLUMNS})
"""Every column of the archive, as the collector writes it (``collector.contracts.archive``)."""

SERIES_KEYS: tuple[str, ...] = layout.SERIES_KEYS
"""The columns that identify one time series in the archive."""

TELEMETRY: pl.Schema = pl.Schema({name: ARCHIVE[name] for name in ("time", *SERIES_KEYS, "value", "counter")})
"""The archive's readings the analyzer uses (``received_time`` and ``source`` are not needed)."""

ECN_FRACTION = "ecn_marked_fraction"
"""Derived signal: the ECN-marked share of a queue's transmitted packets (``events.ecn_fraction``)."""

UTILIZATION = "utilization"
"""Derived sample: transmit rate / interface speed (``network.samples``)."""

METRIC = pl.Enum(sorted({*CATALOG, ECN_FRACTION, UTILIZATION}))
"""The metric of a signal row: an enum, so that tens of millions of rows filter, partition and move by a
small integer instead of a 35-character string."""

SIGNALS: pl.Schema = pl.Schema(
    {
        "series": pl.UInt64(),  # ``telemetry.series_id``: rows are grouped by series, in time order
        "metric": METRIC,
        "prev_time": TIME,  # the previous reading of the series: the interval a rate or a peak covers
        "time": TIME,
        "next_time": TIME,
        "value": pl.Float64(),  # a rate per second for counters, the reading itself for gauges
        "increase": pl.Float64(),  # counters: what the interval added (reset-aware); gauges: null
        "seconds": pl.Float64(),  # length of the interval (prev_time, time]
    }
)
"""One row per reading turned into a signal: counters become reset-aware rates.

Narrow on purpose (the labels live once per series in ``SERIES``): sorting and filtering tens of millions of
rows costs in proportion to their width.
"""

SERIES: pl.Schema = pl.Schema({"series": pl.UInt64(), **{name: ARCHIVE[name] for name in SERIES_KEYS}})
"""One row per series: its id and its labels."""


def series_class() -> pl.Expr:
    """The traffic class a series is about: its ``queue``, or for a PFC series (which names no queue) its
    ``priority``; null for interface- and optics-level series."""
    return pl.coalesce("queue", "priority")


EVENTS: pl.Schema = pl.Schema(
    {
        "event_id": pl.Int64(),
        "kind": pl.String(),
        "link": pl.String(),
        "device": pl.String(),
        "interface": pl.String(),
        # the queues (or PFC priorities) whose readings raised it, comma-separated; null for interface- and
        # optics-level kinds
        "queue": pl.String(),
        "start_time": TIME,
        "end_time": TIME,
        "duration_seconds": pl.Float64(),
        "worst": pl.Float64(),  # the most extreme signal value seen (max, or min for low-is-bad signals)
        "metrics": pl.String(),  # the catalogue names that raised it, comma-separated
        "samples": pl.Int64(),
    }
)
"""One row per congestion or health episode on a link member interface."""

STEP_ANALYSIS: pl.Schema = pl.Schema(
    {
        "step": pl.Int64(),
        "rank": pl.Int64(),
        "start_time": TIME,
        "end_time": TIME,
        "duration_seconds": pl.Float64(),
        "baseline_seconds": pl.Float64(),
        "inflation_seconds": pl.Float64(),
        "inflated": pl.Boolean(),
        "events": pl.Int64(),  # events overlapping the step (within the clock-skew tolerance)
        "top_link": pl.String(),  # the link most of the inflation is attributed to
        "top_kind": pl.String(),
        "top_device": pl.String(),  # the link member interface most of it is attributed to
        "top_interface": pl.String(),
        "communication_seconds": pl.Float64(),  # NCCL kernel time from a Kineto trace (union of kernels)
        "exposed_communication_seconds": pl.Float64(),  # from a Kineto trace, where one covers the step
        # NCCL Inspector: summed execution time of the collectives assigned to the step, and their count
        "inspector_communication_seconds": pl.Float64(),
        "inspector_collectives": pl.Int64(),
        # the clean network's propagation and serialization part of the step (not estimated yet: null)
        "steady_seconds": pl.Float64(),
        # inflation no event explains: the step's inflation minus what is attributed to events
        "unexplained_seconds": pl.Float64(),
        "source_file": pl.String(),
    }
)
"""One row per (step, rank) with what the network added to it."""

ATTRIBUTION: pl.Schema = pl.Schema(
    {
        "step": pl.Int64(),
        "rank": pl.Int64(),
        "event_id": pl.Int64(),
        "link": pl.String(),
        "device": pl.String(),
        "interface": pl.String(),
        "kind": pl.String(),
        "overlap_seconds": pl.Float64(),
        "share": pl.Float64(),  # fraction of the step's inflation given to this event
        "attributed_seconds": pl.Float64(),
    }
)
"""One row per (step, rank, overlapping event): the step's inflation split by overlap."""

LINK_EXPOSURE: pl.Schema = pl.Schema(
    {
        "link": pl.String(),
        "steps_affected": pl.Int64(),
        "exposed_total_seconds": pl.Float64(),
        "exposed_p50_seconds": pl.Float64(),
        "exposed_p99_seconds": pl.Float64(),
        "share_of_run": pl.Float64(),
        "gpu_hours_lost": pl.Float64(),
        # the steady figures a clean network has on the link (not measured yet: null)
        "round_trip_seconds": pl.Float64(),
        "serialization_seconds": pl.Float64(),
    }
)
"""Per link: the time the network exposed to the training job."""

BUS_BANDWIDTH: pl.Schema = pl.Schema(
    {
        "source_file": pl.String(),
        "collective": pl.String(),  # all_reduce, all_gather... ("unknown" when the output does not say)
        "dtype": pl.String(),
        "size_bytes": pl.Float64(),
        "ranks": pl.Int64(),  # ranks in nccl-tests' device list, when printed
        "time_seconds": pl.Float64(),  # out-of-place mean time per collective
        "algbw_gbps": pl.Float64(),  # GB/s (10^9 bytes/s), out-of-place
        "busbw_gbps": pl.Float64(),  # out-of-place bus bandwidth, GB/s
        "busbw_in_place_gbps": pl.Float64(),
        "wrong": pl.Int64(),  # validation errors, both runs
        "runs": pl.Int64(),  # result rows behind the figures (2 per table: out-of-place and in-place)
    }
)
"""nccl-tests bus bandwidth per collective and message size (``analyzer.bandwidth``)."""

MEASURES: pl.Schema = pl.Schema(
    {
        "scope": pl.String(),  # "link", "device", or "label:<name>" for a target label such as vendor
        "key": pl.String(),  # the link name, device name or label value
        "measure": pl.String(),
        "value": pl.Float64(),
        "unit": pl.String(),
    }
)
"""One row per (scope, key, measure)."""

ANALYSIS_TABLES: Mapping[str, pl.Schema] = {
    "telemetry": TELEMETRY,
    "signals": SIGNALS,
    "series": SERIES,
    "events": EVENTS,
    "step_analysis": STEP_ANALYSIS,
    "attribution": ATTRIBUTION,
    "link_exposure": LINK_EXPOSURE,
    "measures": MEASURES,
    "bus_bandwidth": BUS_BANDWIDTH,
}


def conform_lazy(schema: pl.Schema, frame: pl.LazyFrame) -> pl.LazyFrame:
    """Give a LazyFrame exactly the columns of ``schema``, in order: missing ones become null.

    Args:
        schema: a declared schema (e.g. ``EVENTS``).
        frame: a LazyFrame holding a subset of the columns (extra ones are dropped).

    Returns:
        The LazyFrame cast to the schema.
    """
    present = set(frame.collect_schema().names())
    return frame.select(
        (pl.col(name) if name in present else pl.lit(None)).cast(dtype).alias(name)
        for name, dtype in schema.items()
    )
