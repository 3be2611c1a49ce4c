"""PyTorch profiler (Kineto) traces -> ``steps``, ``collectives`` and ``kineto_steps``.

A trace is one JSON document (``.json`` or ``.json.gz``); its ``traceEvents`` are read incrementally
(``ijson``), a slice of decoded bytes at a time, into columns: a trace never sits in memory as Python
objects (HolisticTraceAnalysis users report a 200 GB trace set needing 950 GB that way). Per rank (``distributedInfo.rank``,
else ``rank-N``/``rank_N`` in the file name) it yields:

* ``steps``: the ``ProfilerStep#N`` CPU spans (start, end, duration; wall clock = ``ts`` +
  ``baseTimeNanoseconds`` when the trace has it, as recent PyTorch writes relative timestamps). Recent Kineto
  mirrors each onto the GPU timeline as a ``gpu_user_annotation`` event of the same name, whose args carry no
  stream: those are not steps (they would double every step);
* ``collectives``: one row per NCCL kernel (``ncclKernel_*``, ``ncclDevKernel_*``, and NCCL < 2.7's
  ``ncclAllReduceRingLLKernel_sum_f32``) with the collective, dtype, element count, group size and process
  group when PyTorch recorded them in the kernel args, else the collective taken from the kernel name;
* ``kineto_steps``: per (rank, step) compute, communication, overlapped and exposed communication time
  (``analyzer.gpu_time`` for the definitions, which follow HolisticTraceAnalysis).

A GPU event belongs to the step whose ``ProfilerStep`` span contains the CPU call that launched it (linked by
``args.correlation``), as HTA assigns iterations; events launched outside any step get a null step and are
left out of ``kineto_steps``. Events missing ``ts``/``dur`` are reported as malformed with their index in
``traceEvents`` (a JSON document has no useful line numbers).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ijson  # type: ignore[import-untyped]
import polars as pl

from analyzer import gpu_time, schemas
from analyzer.errors import UnreadableFileError
from analyzer.ingest._common import Malformed, ParseResult, open_binary

NAME = "kineto"

_ARGS = pl.Struct(
    {
        "stream": pl.Int64(),
        "correlation": pl.Int64(),
        "Collective name": pl.String(),
        "In msg nelems": pl.Int64(),
        "dtype": pl.String(),
        "Group size": pl.Int64(),
        "Process Group Name": pl.String(),
    }
)
_EVENT = {
    "ph": pl.String(),
    "cat": pl.String(),
    "name": pl.String(),
    "ts": pl.Float64(),
    "dur": pl.Float64(),
    "args": _ARGS,
}
_STEP_RE = r"^ProfilerStep\s*#\s*(\d+)"
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
# Bytes per element of the dtypes PyTorch writes into NCCL kernel args.
_DTYPE_BYTES = {
    "Float": 4,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "Int": 4,
    "Long": 8,
    "Short": 2,
    "Char": 1,
    "Byte": 1,
    "Bool": 1,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
}


def sniff(lines: Sequence[str]) -> float:
    """Score how likely the head of a file is a Kineto trace.

    Args:
        lines: the first lines of the file.

    Returns:
        1.0 if the document opens with Kineto's keys (``schemaVersion``, ``traceEvents``...), else 0.
    """
    head = "\n".join(lines[:50])[:65536].lstrip()
    if head.startswith("[") and '"ph"' in head and '"ts"' in head:
        return 0.8  # the old chrome-trace export: a bare list of events
    if not head.startswith("{"):
        return 0.0
    return (
        1.0 if any(key in head for key in ('"traceEvents"', '"schemaVersion"', '"deviceProperties"')) else 0.0
    )


READ_BYTES = 1 << 20
"""Decoded bytes fed to the parser at a time: the events they complete become columns at once."""


@dataclass
class Trace:
    """A trace's events as columns (``_EVENT``, ``index`` in ``traceEvents``, dict items only) and what
    else the analysis reads of the document."""

    events: pl.DataFrame
    count: int  # items of traceEvents
    rank: int | None  # distributedInfo.rank
    base_ns: int  # baseTimeNanoseconds, 0 when absent


def _pieces(stream: Iterable[bytes], prefix: str) -> Iterator[tuple[pl.DataFrame, int]]:
    """The items under ``prefix`` as ``_EVENT`` frames, one per slice of the stream, with the items'
    count (non-objects counted, not kept)."""
    found = ijson.sendable_list()
    parser = ijson.items_coro(found, prefix, use_float=True)
    for chunk in stream:
        parser.send(chunk)
        if found:
            items = [item for item in found if isinstance(item, dict)]
            yield pl.from_dicts(items, schema=_EVENT, strict=False), len(found)
            del found[:]
    parser.close()
    if found:
        items = [item for item in found if isinstance(item, dict)]
        yield pl.from_dicts(items, schema=_EVENT, strict=False), len(found)


_KEY = b'"traceEvents"'


def read_trace(path: Path) -> Trace:
    """Read a trace (plain or gzip) in one streaming pass.

    Args:
        path: the trace.

    Returns:
        Its events and metadata.

    Raises:
        UnreadableFileError: not readable, not JSON, or not an object with a ``traceEvents`` list.
    """
    with open_binary(path) as stream:
        head = stream.read(READ_BYTES)
        bare = head.lstrip()[:1] == b"["  # the old chrome-trace export: a bare list of events
        if not bare and head.lstrip()[:1] != b"{":
            raise UnreadableFileError(path, "not a Kineto trace: no 'traceEvents' list")
        # The two small values read beside the events, each by its own parser (in C: building every
        # top-level value to pick two would build the events as Python objects).
        rank, base = ijson.sendable_list(), ijson.sendable_list()
        side = (
            []
            if bare
            else [
                ijson.items_coro(rank, "distributedInfo.rank"),
                ijson.items_coro(base, "baseTimeNanoseconds"),
            ]
        )
        feed = _Feed(_chunks(head, stream), side)
        frames, count = [], 0
        try:
            for frame, items in _pieces(feed, "item" if bare else "traceEvents.item"):
                frames.append(frame)
                count += items
            for parser in side:
                parser.close()
        except ijson.JSONError as exc:
            raise UnreadableFileError(path, f"not valid JSON ({exc})") from exc
    if not (bare or feed.keyed):
        raise UnreadableFileError(path, "not a Kineto trace: no 'traceEvents' list")
    events = pl.concat(frames) if frames else pl.DataFrame(schema=_EVENT)
    return Trace(
        events.with_row_index("index"),
        count,
        next((int(r) for r in rank if isinstance(r, int)), None),
        next((int(b) for b in base if isinstance(b, int)), 0),
    )


def _chunks(head: bytes, stream: Any) -> Iterator[bytes]:
    yield head
    while chunk := stream.read(READ_BYTES):
        yield chunk


class _Feed:
    """The decoded chunks, each also sent to the side parsers; ``keyed``: whether the document names a
    ``traceEvents`` key (its events may be an empty list)."""

    def __init__(self, chunks: Iterator[bytes], side: list[Any]) -> None:
        self.chunks, self.side, self.keyed = chunks, side, False

    def __iter__(self) -> Iterator[bytes]:
        tail = b""
        for chunk in self.chunks:
            for parser in self.side:
                parser.send(chunk)
            self.keyed = self.keyed or _KEY in tail + chunk[: len(_KEY)] or _KEY in chunk
            tail = chunk[-len(_KEY) :]
            yield chunk


def _rank(trace: Trace, path: Path) -> int | None:
    if trace.rank is not None:
        return trace.rank
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def events_frame(
    trace: Trace, path: Path, *, whole_microseconds: bool = True
) -> tuple[pl.DataFrame, list[Malformed]]:
    """The complete ('X') events of a trace with integer-nanosecond wall-clock bounds.

    Args:
        trace: a read trace (``read_trace``).
        path: its file, for problem reports.
        whole_microseconds: shrink each event inward to whole microseconds (start rounded up, end down), as
            HolisticTraceAnalysis does for nanosecond-resolution traces to undo PyTorch's float rounding
            (pytorch/pytorch#122425), so our figures agree with HTA's; a no-op on microsecond traces.
            False keeps the nanoseconds.

    Returns:
        Columns ``cat``, ``name``, ``start_ns``, ``end_ns`` and the unnested args, plus the problems found.
    """
    complete = trace.events.filter(pl.col("ph") == "X")
    broken = complete.filter(pl.col("ts").is_null() | pl.col("dur").is_null() | (pl.col("dur") < 0))
    problems = [
        Malformed(str(path), 0, f"traceEvents[{index}]: complete event without valid ts/dur")
        for index in broken["index"].to_list()
    ]
    good = complete.filter(pl.col("ts").is_not_null() & (pl.col("dur") >= 0)).unnest("args")
    return good.with_columns(**_bounds_ns(whole_microseconds, trace.base_ns)), problems


def _bounds_ns(whole_microseconds: bool, base: int) -> dict[str, pl.Expr]:
    end_us = pl.col("ts") + pl.col("dur")
    if whole_microseconds:
        start = pl.col("ts").ceil().cast(pl.Int64) * 1000
        # A sub-microsecond event can round to end < start; HTA keeps it negative, we make it empty.
        end = pl.max_horizontal(end_us.floor().cast(pl.Int64) * 1000, start)
    else:
        start = (pl.col("ts") * 1000).round().cast(pl.Int64)
        end = (end_us * 1000).round().cast(pl.Int64)
    return {"start_ns": start + base, "end_ns": end + base}


def profiler_steps(events: pl.DataFrame) -> pl.DataFrame:
    """The ``ProfilerStep#N`` spans of a trace.

    Args:
        events: from ``events_frame``.

    Returns:
        ``step``, ``start_ns``, ``end_ns``, sorted by start.
    """
    on_cpu = pl.col("stream").is_null() & (pl.col("cat").fill_null("") != "gpu_user_annotation")
    spans = events.filter(pl.col("name").str.contains(_STEP_RE) & on_cpu)
    return spans.select(
        pl.col("name").str.extract(_STEP_RE).cast(pl.Int64).alias("step"), "start_ns", "end_ns"
    ).sort("start_ns")


def gpu_events(events: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """GPU events (on a stream) with the step of the CPU call that launched them (null if outside steps).

    Args:
        events: from ``events_frame``.
        steps: from ``profiler_steps``.

    Returns:
        GPU events with a ``step`` column.
    """
    on_gpu = events.filter(pl.col("stream").is_not_null() & (pl.col("cat") != "gpu_user_annotation"))
    launches = (
        events.filter(pl.col("stream").is_null() & pl.col("correlation").is_not_null())
        .group_by("correlation")
        .agg(pl.col("start_ns").min().alias("launch_ns"))
        .sort("launch_ns")
    )
    in_step = launches.join_asof(
        steps.rename({"start_ns": "step_start", "end_ns": "step_end"}),
        left_on="launch_ns",
        right_on="step_start",
        strategy="backward",
    )
    step_of_launch = in_step.select(
        "correlation", pl.when(pl.col("launch_ns") < pl.col("step_end")).then(pl.col("step")).alias("step")
    )
    return on_gpu.join(step_of_launch, on="correlation", how="left")


def _collectives(gpu: pl.DataFrame, rank: int | None) -> pl.DataFrame:
    nccl = gpu.filter(pl.col("name").str.contains(r"^nccl.*Kernel"))
    # "ncclDevKernel_AllGather_RING_LL", "ncclKernel_SendRecv_..", and before NCCL 2.7 "ncclAllReduceRingLLKernel..".
    from_name = pl.coalesce(
        pl.col("name").str.extract(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)"),
        pl.col("name").str.extract(r"^nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv)"),
    )
    element_bytes = pl.col("dtype").replace_strict(_DTYPE_BYTES, default=None, return_dtype=pl.Int64)
    frame = nccl.select(
        pl.lit(rank, dtype=pl.Int64).alias("rank"),
        "step",
        pl.coalesce(pl.col("Collective name"), from_name).alias("collective"),
        "dtype",
        pl.col("In msg nelems").alias("elements"),
        (pl.col("In msg nelems") * element_bytes).cast(pl.Float64).alias("size_bytes"),
        pl.col("Group size").alias("group_size"),
        pl.col("Process Group Name").alias("process_group"),
        pl.from_epoch("start_ns", time_unit="ns").dt.replace_time_zone("UTC").alias("start_time"),
        ((pl.col("end_ns") - pl.col("start_ns")) / 1e9).alias("duration_seconds"),
        pl.lit(1, dtype=pl.Int64).alias("occurrences"),
    )
    return frame


def _steps(spans: pl.DataFrame, rank: int | None) -> pl.DataFrame:
    return spans.select(
        pl.lit(rank, dtype=pl.Int64).alias("rank"),
        "step",
        pl.from_epoch("start_ns", time_unit="ns").dt.replace_time_zone("UTC").alias("start_time"),
        pl.from_epoch("end_ns", time_unit="ns").dt.replace_time_zone("UTC").alias("end_time"),
        ((pl.col("end_ns") - pl.col("start_ns")) / 1e9).alias("duration_seconds"),
        pl.lit(False).alias("interval_average"),
        pl.lit(1, dtype=pl.Int64).alias("interval_steps"),
    )


def _origin(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    return frame.with_columns(source_file=pl.lit(str(path)), format=pl.lit(NAME))


def parse(path: Path, *, whole_microseconds: bool = True) -> ParseResult:
    """Parse one rank's Kineto trace (read streaming: ``read_trace``).

    Args:
        path: the trace (``.json`` or ``.json.gz``).
        whole_microseconds: HTA-compatible rounding of event bounds (see ``events_frame``).

    Returns:
        ``steps``, ``collectives`` and ``kineto_steps``; problems for events without valid ts/dur.

    Raises:
        UnreadableFileError: the file is not a readable Kineto trace.
    """
    trace = read_trace(path)
    rank = _rank(trace, path)
    events, problems = events_frame(trace, path, whole_microseconds=whole_microseconds)
    spans = profiler_steps(events)
    gpu = gpu_events(events, spans)
    in_steps = gpu.filter(pl.col("step").is_not_null()).with_columns(rank=pl.lit(rank, dtype=pl.Int64))
    summary = gpu_time.breakdown(in_steps.lazy(), ["rank", "step"]).sort("step").collect()
    tables = {
        "steps": schemas.conform("steps", _origin(_steps(spans, rank), path)),
        "collectives": schemas.conform("collectives", _origin(_collectives(gpu, rank), path)),
        "kineto_steps": schemas.conform("kineto_steps", _origin(summary, path)),
    }
    counts = {
        "trace_events": trace.count,
        "gpu_events": gpu.height,
        "profiler_steps": spans.height,
    }
    return ParseResult(path, [NAME], tables, problems, 0, counts)
