"""NCCL Inspector operations placed on training steps, summed per (step, rank), and checked against Kineto.

The shared test data holds no NCCL Inspector capture (``training/SOURCES.md`` lists none), so the test on
real data writes Inspector records from a real Kineto trace's NCCL kernels: the clock, the step spans, the
launch times and the kernel times are real, and every expected figure is computed here from the raw trace
JSON, never from the analyzer. It checks our placement and sums against Kineto's; how far a real Inspector's
kernel timing differs from CUPTI's needs a job captured with both.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from analyzer import gpu_time, schemas
from analyzer.analysis import Analysis, AnalysisInputs
from analyzer.ingest import detect, parse_file

T0 = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)
T0_US = int(T0.timestamp() * 1_000_000)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _us(seconds: float) -> int:
    return T0_US + round(seconds * 1_000_000)


def _record(comm: str, rank: int, n_ranks: int, perf: Mapping[str, Any], dump_s: float) -> dict[str, Any]:
    """One self-contained (v4.0-v4.2) Inspector record of process 11 on host node-a."""
    return {
        "header": {"id": comm, "rank": rank, "n_ranks": n_ranks, "nnodes": 1},
        "metadata": {
            "inspector_output_format_version": "v4.0",
            "dump_timestamp_us": _us(dump_s),
            "hostname": "node-a",
            "pid": 11,
        },
        "coll_perf": dict(perf),
    }


def _write_jsonl(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in objects), encoding="utf-8")
    return path


def test_assign_to_steps_uses_half_open_spans_of_the_same_rank() -> None:
    steps = pl.DataFrame(
        {
            "step": [1, 2, 1],
            "rank": [0, 0, 1],
            "start_time": [_at(0), _at(1), _at(0.5)],
            "end_time": [_at(1), _at(1.8), _at(1.5)],
        },
        schema_overrides={"start_time": schemas.TIME, "end_time": schemas.TIME},
    )
    points = pl.DataFrame(
        {
            "id": ["start", "inside", "end", "gap", "other rank", "untimed", "unknown rank"],
            "rank": [0, 0, 0, 0, 1, 0, 2],
            "time": [_at(0), _at(0.999), _at(1), _at(1.9), _at(1.2), None, _at(0.5)],
        },
        schema_overrides={"time": schemas.TIME},
    )
    placed = gpu_time.assign_to_steps(points.lazy(), steps.lazy()).collect()
    step_of = dict(zip(placed["id"], placed["step"], strict=True))
    assert step_of == {
        "start": 1,  # a span holds its start...
        "inside": 1,
        "end": 2,  # ...but not its end, which is the next step's start
        "gap": None,  # after the last step of the rank
        "other rank": 1,  # rank 1's step 1 runs 0.5-1.5 s
        "untimed": None,
        "unknown rank": None,
    }


def test_v4_3_markers_give_context_to_bare_records_and_skip_proxy_traces(tmp_path: Path) -> None:
    header = {"id": "0xd1", "comm_name": "DP", "rank": 3, "n_ranks": 4, "nnodes": 1}
    metadata = {
        "inspector_output_format_version": "v4.3",
        "dump_timestamp_us": _us(2),
        "hostname": "b",
        "pid": 9,
    }
    stats = {
        "coll_records": 1,
        "coll_dropped_since_last_dump": 5,
        "p2p_records": 1,
        "p2p_dropped_since_last_dump": 2,
    }
    coll = {"coll": "ReduceScatter", "coll_sn": 40, "coll_msg_size_bytes": 65536, "coll_exec_time_us": 110}
    p2p = {"p2p": "Send", "p2p_sn": 7, "p2p_peer": 0, "p2p_msg_size_bytes": 8192, "p2p_exec_time_us": 25}
    proxy = {"record_type": "proxy_op", "record_sn": 1, "parent_type": "coll", "parent_sn": 40, "rank": 3}
    path = _write_jsonl(
        tmp_path / "node-b-pid9.log",
        [
            {"header": header, "metadata": metadata, "dump_stats": stats},
            {"coll_perf": {**coll, "coll_timing_source": "kernel_gpu"}},
            {"p2p_perf": {**p2p, "p2p_timing_source": "kernel_cpu"}},
            {"proxy_trace": proxy},
        ],
    )
    assert detect(path) == ["nccl_inspector"]
    result = parse_file(path)
    rows = result.table("collectives")
    assert result.problems == []
    assert result.counts == {"inspector_records": 2, "inspector_dropped": 7, "inspector_proxy_records": 1}
    assert rows["collective"].to_list() == ["ReduceScatter", "Send"]
    assert rows["sequence"].to_list() == [40, 7]
    assert rows["duration_seconds"].to_list() == pytest.approx([110e-6, 25e-6])
    assert rows["timing_source"].to_list() == ["kernel_gpu", "kernel_cpu"]
    # The marker's header and metadata, written once, belong to both records.
    assert rows["rank"].to_list() == [3, 3]
    assert rows["process_group"].to_list() == ["0xd1", "0xd1"]
    assert rows["host"].to_list() == ["b", "b"]
    assert rows["pid"].to_list() == [9, 9]
    assert rows["dump_time"].to_list() == [_at(2), _at(2)]


def test_inspector_communication_per_step_beside_a_step_log(tmp_path: Path) -> None:
    steplog = _write_jsonl(
        tmp_path / "steps.jsonl",
        [
            {"step": 1, "start": _at(0).isoformat(), "end": _at(1).isoformat(), "rank": 5},
            {"step": 2, "start": _at(1).isoformat(), "end": _at(2).isoformat(), "rank": 5},
        ],
    )
    world = {"coll": "AllReduce", "coll_msg_size_bytes": 1 << 20, "coll_timing_source": "kernel_gpu"}
    tensor = {"coll": "AllGather", "coll_msg_size_bytes": 1 << 16, "coll_timing_source": "kernel_gpu"}

    def called_at(seconds: float) -> dict[str, Any]:  # verbose output: the CPU call's wall-clock time
        return {"event_trace_ts": {"coll_start_ts": _us(seconds), "coll_stop_ts": _us(seconds) + 4}}

    inspector = _write_jsonl(
        tmp_path / "node-a-pid11.log",
        [
            # Rank 5 of the 8-rank world communicator: placed at its call, in step 1.
            _record(
                "0xworld", 5, 8, {**world, "coll_sn": 10, "coll_exec_time_us": 30000, **called_at(0.2)}, 0.3
            ),
            # Rank 1 of a 2-rank communicator of the same process: global rank 5 by inference, placed at
            # dump time minus execution time (1.5 s - 20 ms), in step 2.
            _record("0xtp", 1, 2, {**tensor, "coll_sn": 3, "coll_exec_time_us": 20000}, 1.5),
            # coll_sn 11 was never written (v4.0 keeps one operation per communicator per dump).
            _record(
                "0xworld", 5, 8, {**world, "coll_sn": 12, "coll_exec_time_us": 40000, **called_at(1.1)}, 1.2
            ),
            # After the last step: counted, not placed.
            _record("0xworld", 5, 8, {**world, "coll_sn": 13, "coll_exec_time_us": 1000}, 5.0),
        ],
    )
    result = Analysis(AnalysisInputs(logs=(steplog, inspector))).run()

    steps = result.steps.sort("step")
    assert steps["rank"].to_list() == [5, 5]
    assert steps["inspector_communication_seconds"].to_list() == pytest.approx([0.030, 0.020 + 0.040])
    assert steps["inspector_collectives"].to_list() == [1, 2]
    assert steps["communication_seconds"].null_count() == 2  # no Kineto trace: nothing to cross-check
    check = result.summary["inspector_crosscheck"]
    assert check["records"] == 4
    assert check["assigned_to_steps"] == 3
    assert check["timed_by"] == {"call": 2, "dump": 2}
    assert check["timing_sources"] == {"kernel_gpu": 4}
    assert check["missing_sequence_numbers"] == 1
    assert check["dropped_by_inspector"] == 0
    assert check["steps"] == 2
    assert check["kineto_steps"] == 0
    assert check["kineto_relative_difference_max"] is None

    alone = Analysis(AnalysisInputs(logs=(steplog,))).run()
    assert alone.summary["inspector_crosscheck"] is None


def _trace_kernels(
    trace: Path,
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[int, tuple[float, float]]]:
    """From the raw trace: its document, its NCCL kernels with their launch call, and the step spans (us)."""
    with gzip.open(trace, "rt", encoding="utf-8") as stream:
        document = json.load(stream)
    base = document.get("baseTimeNanoseconds", 0) / 1000
    complete = [e for e in document["traceEvents"] if e.get("ph") == "X"]
    calls = {e["args"]["correlation"]: e for e in complete if e.get("cat") == "cuda_runtime"}
    kernels = [
        {**e, "call": calls[e["args"]["correlation"]]}
        for e in complete
        if e.get("cat") == "kernel" and e["name"].startswith("nccl") and "Kernel_" in e["name"]
    ]
    spans = {
        int(e["name"].split("#")[1]): (base + e["ts"], base + e["ts"] + e["dur"])
        for e in complete
        if e["name"].startswith("ProfilerStep#")
    }
    return document, sorted(kernels, key=lambda e: e["ts"]), spans


@pytest.mark.parametrize("trace_name", ["nccl_data.json.gz", "sampled_rank-1.json.gz"])
@pytest.mark.parametrize("verbose", [True, False], ids=["call-time", "dump-time"])
def test_inspector_built_from_real_kernels_agrees_with_kineto(
    training_data: Path, tmp_path: Path, trace_name: str, verbose: bool
) -> None:
    trace = training_data / "hta" / trace_name
    document, kernels, spans = _trace_kernels(trace)
    base = document.get("baseTimeNanoseconds", 0) / 1000
    info = document["distributedInfo"]
    dump_interval_us = 500
    records, expected_seconds, expected_count = [], {step: 0.0 for step in spans}, dict.fromkeys(spans, 0)
    for number, kernel in enumerate(kernels):
        exec_us = int(kernel["dur"])  # the Inspector writes whole microseconds
        dump_us = int(base + kernel["ts"] + kernel["dur"]) + dump_interval_us
        perf: dict[str, Any] = {
            "coll": kernel["args"].get("Collective name", "unknown"),
            "coll_sn": number,
            "coll_msg_size_bytes": 0,
            "coll_exec_time_us": exec_us,
            "coll_timing_source": "kernel_gpu",
        }
        anchor = dump_us - exec_us
        if verbose:
            call_us = int(base + kernel["call"]["ts"])
            perf["event_trace_ts"] = {"coll_start_ts": call_us, "coll_stop_ts": call_us + 1}
            anchor = call_us
        record = {
            "header": {"id": "0xfeed", "rank": info["rank"], "n_ranks": info["world_size"], "nnodes": 1},
            "metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": dump_us, "pid": 1},
            "coll_perf": perf,
        }
        records.append(record)
        for step, (start, end) in spans.items():
            if start <= anchor < end:
                expected_seconds[step] += exec_us / 1e6
                expected_count[step] += 1
    inspector = _write_jsonl(tmp_path / "inspector.log", records)

    result = Analysis(AnalysisInputs(logs=(trace, inspector))).run()

    steps = result.steps.sort("step")
    assert steps["step"].to_list() == sorted(spans)
    assert steps["inspector_communication_seconds"].to_list() == pytest.approx(
        [expected_seconds[step] for step in sorted(spans)]
    )
    assert steps["inspector_collectives"].to_list() == [expected_count[step] for step in sorted(spans)]
    check = result.summary["inspector_crosscheck"]
    assert check["records"] == len(kernels)
    assert check["assigned_to_steps"] == sum(expected_count.values())
    assert check["timed_by"] == {"call" if verbose else "dump": len(kernels)}
    assert check["kineto_steps"] == len(spans)
    # Both sides time the same kernels; the Inspector truncates to whole microseconds and the Kineto side
    # is shrunk to whole microseconds as HTA does: at most 2 us apart per kernel.
    slack = max(2e-6 * expected_count[step] / expected_seconds[step] for step in spans)
    assert check["kineto_relative_difference_max"] <= slack
