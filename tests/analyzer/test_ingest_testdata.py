"""Every real training file in the shared test data parses, auto-detected, with counts checked independently.

Expected counts come from reading the raw files here with plain string tests (grep-like), never from the
parsers' own output.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path

import polars as pl
import pytest

from analyzer.analysis import Analysis, AnalysisInputs
from analyzer.ingest import detect, parse_file


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as stream:
        return stream.read().splitlines()


def _all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != "SOURCES.md")


def test_every_file_is_detected_and_parses_cleanly(training_data: Path) -> None:
    files = _all_files(training_data)
    assert files, "no training test files"
    for path in files:
        result = parse_file(path)
        assert result.formats, path
        assert result.problems == [], (path, result.problems[:3])


def test_megatron_iteration_lines(training_data: Path) -> None:
    path = training_data / "bigscience" / "meg_gpt2_base_n4_dp1_tp4_pp4-1809579.out"
    raw = [line for line in _lines(path) if "elapsed time per iteration" in line]
    expected_steps = [int(line.split("iteration", 1)[1].split("/")[0]) for line in raw]
    expected_ms = [float(line.split("elapsed time per iteration (ms):")[1].split("|")[0]) for line in raw]

    assert detect(path) == ["megatron"]
    steps = parse_file(path).table("steps")

    assert steps["step"].to_list() == expected_steps
    assert steps["duration_seconds"].to_list() == pytest.approx([ms / 1000 for ms in expected_ms])
    assert steps["interval_average"].all()  # Megatron's figure is a mean over the log interval
    assert steps["interval_steps"].to_list() == [10] * len(raw)


def test_deepspeed_step_lines(training_data: Path) -> None:
    path = training_data / "deepspeed" / "opt-1.3b-globalBatchSize128.log"
    raw = [line for line in _lines(path) if "[Rank 0] step=" in line]
    expected = [int(re.search(r"step=(\d+),", line).group(1)) for line in raw]  # type: ignore[union-attr]

    assert detect(path) == ["deepspeed"]
    steps = parse_file(path).table("steps")

    assert steps["step"].to_list() == expected
    assert steps["rank"].unique().to_list() == [0]
    assert steps["end_time"].null_count() == 0
    # Wall-clock gap between the first two step lines, divided by the 10 steps between them.
    first, second = raw[0][1:24].replace(",", "."), raw[1][1:24].replace(",", ".")
    gap = (
        pl.Series([second]).str.to_datetime() - pl.Series([first]).str.to_datetime()
    ).dt.total_milliseconds()
    assert steps["duration_seconds"][1] == pytest.approx(gap[0] / 1000 / 10)
    assert steps["duration_seconds"][0] is None


def test_nccl_debug_topology(training_data: Path) -> None:
    path = training_data / "bigscience" / "all_reduce_bench-a100-n4.txt"
    lines = _lines(path)
    init = [line for line in lines if "NCCL INFO" in line and "Init COMPLETE" in line]
    channels = [line for line in lines if "NCCL INFO Channel" in line and " -> " in line]
    hosts = {line.split(":", 1)[0] for line in lines if " NCCL INFO " in line}
    ranks_seen = {int(line.split(" rank ")[1].split()[0]) for line in init}

    assert detect(path) == ["allreduce_bench", "nccl_debug"]  # the bench's busbw lines, and NCCL's init
    result = parse_file(path)
    ranks, connections = result.table("nccl_ranks"), result.table("nccl_connections")

    assert ranks.height == len(init)
    assert set(ranks["rank"].to_list()) == ranks_seen
    assert set(ranks["host"].to_list()) == hosts
    assert connections.height == len(channels)
    assert connections["crosses_network"].sum() == sum("via NET/" in line for line in channels)
    assert connections.filter(pl.col("crosses_network"))["transport"].unique().to_list() == ["NET/IB"]
    # Every network hop joins ranks on different hosts, every P2P hop ranks on the same host.
    host_of = dict(zip(ranks["rank"].to_list(), ranks["host"].to_list(), strict=True))
    for rank, peer, crosses in connections.select("rank", "peer", "crosses_network").iter_rows():
        assert (host_of[rank] != host_of[peer]) == crosses


def test_allreduce_bench_busbw_lines(training_data: Path, tmp_path: Path) -> None:
    path = training_data / "bigscience" / "all_reduce_bench-a100-n4.txt"
    lines = _lines(path)
    busbw_gbit = [float(line.split()[1]) for line in lines if line.startswith(" busbw: ")]
    labels = [int(line[:-1]) for line in lines if line[:-1].isdigit() and line.endswith(":")]
    payload = {line.split(" data size: ")[1] for line in lines if " data size: " in line}
    world = sum(" data size: " in line for line in lines)  # each rank prints its payload once
    assert (len(busbw_gbit), len(labels), payload, world) == (160, 160, {"4.0 GB"}, 32)

    result = parse_file(path)
    rows = result.table("collectives").filter(pl.col("format") == "allreduce_bench")

    assert result.problems == []
    assert result.counts["result_rows"] == rows.height == len(busbw_gbit)
    assert rows["busbw_gbps"].to_list() == pytest.approx([gbit / 8 for gbit in busbw_gbit])  # bits -> bytes
    assert rows["collective"].unique().to_list() == ["all_reduce"]
    assert rows["size_bytes"].unique().to_list() == [4.0e9]
    # Interleaved records keep no rank; every rank kept is one that printed, and as often at most.
    paired = rows.filter(pl.col("rank").is_not_null())
    assert result.counts["interleaved"] == rows.height - paired.height
    assert 0 < paired.height < rows.height
    for rank, count in paired.group_by("rank").len().iter_rows():
        assert count <= labels.count(rank)
    # A paired row's busbw is its own duration's: size / time x 2 (n - 1) / n, the script's formula.
    expected = 4.0e9 / paired["duration_seconds"] * 2 * (world - 1) / world / 1e9
    assert paired["busbw_gbps"].to_list() == pytest.approx(expected.to_list(), rel=1e-3)
    assert paired["algbw_gbps"].to_list() == pytest.approx(
        (4.0 / paired["duration_seconds"]).to_list(), rel=1e-3
    )

    analysis = Analysis(AnalysisInputs(logs=(path,))).run()
    analysis.write(tmp_path)
    (row,) = pl.read_parquet(tmp_path / "bus_bandwidth.parquet").iter_rows(named=True)
    assert (row["runs"], row["ranks"], row["size_bytes"]) == (len(busbw_gbit), world, 4.0e9)
    assert row["busbw_gbps"] == pytest.approx(sum(busbw_gbit) / len(busbw_gbit) / 8)


@pytest.mark.parametrize("name", ["nccl_data.json.gz", "sampled_rank-0.json.gz", "sampled_rank-1.json.gz"])
def test_kineto_traces(training_data: Path, name: str) -> None:
    path = training_data / "hta" / name
    with gzip.open(path, "rt") as stream:
        document = json.load(stream)
    events = document["traceEvents"]
    profiler_steps = sorted(
        int(e["name"].split("#")[1]) for e in events if e.get("name", "").startswith("ProfilerStep#")
    )
    nccl_kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl")]

    assert detect(path) == ["kineto"]
    result = parse_file(path)

    assert result.table("steps")["step"].to_list() == profiler_steps
    assert result.table("steps")["rank"].unique().to_list() == [document["distributedInfo"]["rank"]]
    assert result.table("collectives").height == len(nccl_kernels)
    summary = result.table("kineto_steps")
    assert summary["step"].to_list() == profiler_steps
    assert summary["communication_kernels"].sum() == len(nccl_kernels)
    assert (summary["exposed_communication_seconds"] <= summary["communication_seconds"]).all()


@pytest.mark.parametrize("name", ["golden_values_dev_dgx_h100.json", "golden_values_dev_dgx_gb200.json"])
def test_megatron_golden_values(training_data: Path, name: str) -> None:
    path = training_data / "megatron" / name
    values = json.loads(path.read_text())["iteration-time"]["values"]

    assert detect(path) == ["megatron_golden"]
    steps = parse_file(path).table("steps")

    assert steps["step"].to_list() == sorted(int(step) for step in values)
    assert steps["duration_seconds"].to_list() == pytest.approx([values[str(s)] for s in steps["step"]])


def test_tracelens_summary(training_data: Path) -> None:
    path = training_data / "tracelens" / "nccl_summary_implicit_sync.csv"
    with path.open(newline="") as stream:
        records = list(csv.DictReader(stream))

    assert detect(path) == ["tracelens_nccl"]
    collectives = parse_file(path).table("collectives")

    assert collectives.height == len(records)
    assert collectives["occurrences"].sum() == sum(int(r["count"]) for r in records)
    assert collectives["collective"].to_list() == [r["Collective name"] for r in records]
