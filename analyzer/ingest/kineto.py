"""PyTorch profiler (Kineto) traces -> ``steps``, ``collectives`` and ``kineto_steps``.

A trace is one JSON document (``.json`` or ``.json.gz``), so unlike the text logs it is loaded whole:
profiler traces cover a few steps and stay in the hundreds of MB at most. Per rank (``distributedInfo.rank``,
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

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from analyzer import gpu_time, schemas
from analyzer.errors import UnreadableFileError
from analyzer.ingest._common import Malformed, ParseResult, open_text

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


def load_document(path: Path) -> dict[str, Any]:
    """Load a trace document whole (plain or gzip).

    Args:
        path: the trace.

    Returns:
        The decoded JSON object.

    Raises:
        UnreadableFileError: not readable, not JSON, or not an object with a ``traceEvents`` list.
    """
    with open_text(path) as stream:
        try:
            document = json.load(stream)
        except json.JSONDecodeError as exc:
            raise UnreadableFileError(path, f"line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    if isinstance(document, list):
        # The old chrome-trace export (torch.autograd.profiler) is a bare list of events.
        document = {"traceEvents": document}
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise UnreadableFileError(path, "not a Kineto trace: no 'traceEvents' list")
    return document


def _rank(document: dict[str, Any], path: Path) -> int | None:
    info = document.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def events_frame(
    document: dict[str, Any], path: Path, *, whole_microseconds: bool = True
) -> tuple[pl.DataFrame, list[Malformed]]:
    """The complete ('X') events of a trace with integer-nanosecond wall-clock bounds.

    Args:
        document: a loaded trace.
        path: its file, for problem reports.
        whole_microseconds: shrink each event inward to whole microseconds (start rounded up, end down), as
            HolisticTraceAnalysis does for nanosecond-resolution traces to undo PyTorch's float rounding
            (pytorch/pytorch#122425), so our figures agree with HTA's; a no-op on microsecond traces.
            False keeps the nanoseconds.

    Returns:
        Columns ``cat``, ``name``, ``start_ns``, ``end_ns`` and the unnested args, plus the problems found.
    """
    raw = [event for event in document["traceEvents"] if isinstance(event, dict)]
    frame = pl.from_dicts(raw, schema=_EVENT, strict=False).with_row_index("index")
    complete = frame.filter(pl.col("ph") == "X")
    broken = complete.filter(pl.col("ts").is_null() | pl.col("dur").is_null() | (pl.col("dur") < 0))
    problems = [
        Malformed(str(path), 0, f"traceEvents[{index}]: complete event without valid ts/dur")
        for index in broken["index"].to_list()
    ]
    base = int(document.get("baseTimeNanoseconds") or 0)
    good = complete.filter(pl.col("ts").is_not_null() & (pl.col("dur") >= 0)).unnest("args")
    return good.with_columns(**_bounds_ns(whole_microseconds, base)), problems


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
    """Parse one rank's Kineto trace (loaded whole: it is one JSON document).

    Args:
        path: the trace (``.json`` or ``.json.gz``).
        whole_microseconds: HTA-compatible rounding of event bounds (see ``events_frame``).

    Returns:
        ``steps``, ``collectives`` and ``kineto_steps``; problems for events without valid ts/dur.

    Raises:
        UnreadableFileError: the file is not a readable Kineto trace.
    """
    document = load_document(path)
    rank = _rank(document, path)
    events, problems = events_frame(document, path, whole_microseconds=whole_microseconds)
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
        "trace_events": len(document["traceEvents"]),
        "gpu_events": gpu.height,
        "profiler_steps": spans.height,
    }
    return ParseResult(path, [NAME], tables, problems, 0, counts)
