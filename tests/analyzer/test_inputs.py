"""Every parsed input reaches the output: launcher tags anywhere in a row, nccl-tests bus bandwidth as a table,
and a warning for every input that could not be used (unknown, no rows, no wall clock).

Expected counts come from the raw files read here with plain string tests, never from the parsers.

``data/p5_all_reduce_perf_tag_output.log`` is a real AWS P5 run: ``all_reduce_perf`` 8 B .. 16 GiB (32 sizes)
on two p5.48xlarge (16 H100, EFA) under the Kubeflow MPI operator's ``mpirun --tag-output``, as its launcher's
``kubectl logs`` printed it (aws-ia/terraform-aws-eks-blueprints @ fe3291d8, patterns/nvidia-gpu-efa/README.md,
Apache-2.0; the figures, header and footer as published, the device list was elided there). That page shows
the tag once per row; in the log issue 30 quotes, mpirun printed it at each of the three writes nccl-tests
makes per row (``args->reporter->parameters`` up to ``root``, then ``result`` for the out-of-place and for the
in-place group), so each row here carries the tag at exactly those three places::

    [1,0]<stdout>:           8             2     float     sum      -1[1,0]<stdout>:    87.96 ... 0[1,0]<stdout>: ...
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from pathlib import Path

import polars as pl
import pytest

from analyzer import inputs
from analyzer.analysis import Analysis, AnalysisInputs
from analyzer.ingest import detect, parse_file
from analyzer.ingest._common import untag
from analyzer.inputs import describe, parse_logs
from spanwatch.cli import main

P5 = Path(__file__).parent / "data" / "p5_all_reduce_perf_tag_output.log"
TAG = "[1,0]<stdout>:"


def _expected_rows(text: str) -> list[tuple[float, float, float]]:
    """(size, out-of-place busbw, in-place busbw) of every result row, split at the tag's three places."""
    rows = []
    for line in text.splitlines():
        pieces = line.split(TAG)
        if len(pieces) == 4 and pieces[1].split()[2:4] == ["float", "sum"]:
            rows.append(
                (float(pieces[1].split()[0]), float(pieces[2].split()[2]), float(pieces[3].split()[2]))
            )
    return rows


def test_p5_fixture_has_the_tag_three_times_in_every_row() -> None:
    rows = [line for line in P5.read_text().splitlines() if "float" in line]
    assert len(rows) == 32
    assert all(line.count(TAG) == 3 for line in rows)
    assert all(re.search(r" -1\[1,0\]<stdout>: ", line) for line in rows)  # glued to root, as printed
    sizes = [size for size, _, _ in _expected_rows(P5.read_text())]
    assert sizes == [8 * 2**k for k in range(32)]  # 8 B .. 16 GiB


@pytest.mark.parametrize(
    "prefix",
    ["", "   ", "2026-11-30T10:00:00.123456789Z ", "Mon Nov 30 10:00:00 2026"],
    ids=["tag-output", "indented", "kubectl-timestamps", "timestamp-output"],
)
def test_p5_tag_output_parses_every_row(prefix: str, tmp_path: Path) -> None:
    text = "".join(prefix + line + "\n" for line in P5.read_text().splitlines())
    path = tmp_path / "all_reduce_perf.log"  # the collective comes from the name
    path.write_text(text)
    expected = _expected_rows(text)
    assert len(expected) == 32

    assert detect(path)[0] == "nccl_tests"
    result = parse_file(path)
    rows = result.table("collectives")

    assert result.counts["result_rows"] == len(expected)
    assert rows.height == 2 * len(expected)  # out-of-place and in-place
    assert result.problems == []
    out_of_place = rows.filter(~pl.col("in_place"))
    in_place = rows.filter(pl.col("in_place"))
    assert list(zip(out_of_place["size_bytes"], out_of_place["busbw_gbps"], strict=True)) == [
        (size, busbw) for size, busbw, _ in expected
    ]
    assert in_place["busbw_gbps"].to_list() == [busbw for _, _, busbw in expected]
    assert out_of_place["collective"].to_list() == ["all_reduce"] * 32


def test_untag_keeps_ordinary_rows() -> None:
    assert untag("   [1,12]<stderr>:hello") == "hello"
    assert untag("  [rank3]: iteration 5/ 10 |") == "[rank3]: iteration 5/ 10 |"
    assert untag("[2024-05-02 10:11:12] iteration 100/ 500 |") == "[2024-05-02 10:11:12] iteration 100/ 500 |"
    assert untag("host:1:2 [0] NCCL INFO x") == "host:1:2 [0] NCCL INFO x"


def test_bus_bandwidth_table_and_summary(tmp_path: Path) -> None:
    result = Analysis(AnalysisInputs(logs=(P5,))).run()
    paths = result.write(tmp_path)

    assert tmp_path / "bus_bandwidth.parquet" in paths
    table = pl.read_parquet(tmp_path / "bus_bandwidth.parquet")
    expected = _expected_rows(P5.read_text())
    assert table.height == 32
    assert table["size_bytes"].to_list() == [size for size, _, _ in expected]
    assert table["busbw_gbps"].to_list() == [busbw for _, busbw, _ in expected]
    largest, busbw, busbw_in_place = max(expected)
    (row,) = table.filter(pl.col("size_bytes") == largest).iter_rows(named=True)
    assert (row["busbw_gbps"], row["busbw_in_place_gbps"]) == (busbw, busbw_in_place)
    assert table["ranks"].null_count() == 32  # the published excerpt has no device list
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["inputs"]["files"][0]["rows"]["collectives"] == 64
    assert summary["warnings"] == []


def test_every_unusable_input_is_a_warning(tmp_path: Path) -> None:
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello\nworld\n")
    logs = parse_logs([P5, unknown])
    assert logs.result.table("collectives").height == 64
    assert [w.input for w in logs.warnings] == [str(unknown)]
    assert "not a recognised training log" in logs.warnings[0].problem

    forced = parse_logs([P5], "steplog")  # the wrong format, forced: no rows, never a silent success
    assert len(forced.warnings) == 1
    assert forced.warnings[0].problem.startswith("no rows: read as steplog")


def test_megatron_without_clock_is_not_placeable(training_data: Path, tmp_path: Path) -> None:
    path = training_data / "bigscience" / "meg_gpt2_base_n4_dp1_tp4_pp4-1809579.out"
    lines = sum(
        "elapsed time per iteration" in line for line in path.read_text(errors="replace").splitlines()
    )
    result = Analysis(AnalysisInputs(logs=(path,))).run()
    result.write(tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    (warning,) = summary["warnings"]
    assert warning["input"] == str(path)
    assert f"{lines} of {lines} step rows have no wall clock" in warning["problem"]
    assert "not placeable in time" in warning["problem"]


def test_analyze_says_what_each_input_gave(
    training_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = training_data / "bigscience" / "all_reduce_bench-a100-n4.txt"
    init = tmp_path / "nccl_init.log"  # the bench's own NCCL_DEBUG=INFO lines: an NCCL init log, no steps
    init.write_text("".join(line + "\n" for line in bench.read_text().splitlines() if " NCCL INFO " in line))
    ranks = sum("Init COMPLETE" in line for line in init.read_text().splitlines())
    channels = sum("NCCL INFO Channel" in line and " -> " in line for line in init.read_text().splitlines())
    tracelens = training_data / "tracelens" / "nccl_summary_implicit_sync.csv"
    with tracelens.open(newline="") as stream:
        summaries = sum(1 for _ in csv.DictReader(stream))

    assert main(["analyze", "--logs", str(init), str(tracelens), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out

    assert (
        f"input {init}: nccl_debug: {ranks} NCCL rank rows, {channels} NCCL connection rows (no step rows in it)"
    ) in out.splitlines()
    assert (
        f"input {tracelens}: tracelens_nccl: {summaries} collective rows (no step rows in it)"
        in out.splitlines()
    )


def test_analyze_says_interval_lines_became_their_steps(
    training_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = training_data / "bigscience" / "meg_gpt2_base_n4_dp1_tp4_pp4-1809579.out"
    lines = [
        line for line in path.read_text(errors="replace").splitlines() if "elapsed time per iteration" in line
    ]
    iterations = [int(line.split("iteration", 1)[1].split("/")[0]) for line in lines]
    (every,) = {later - earlier for earlier, later in itertools.pairwise(iterations)}

    assert main(["analyze", "--logs", str(path), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out

    steps = len(lines) * every
    assert (
        f"input {path}: megatron: {len(lines)} step rows; "
        f"{len(lines)} lines are each the mean of {every} steps: read as {steps} steps"
    ) in out.splitlines()
    assert pl.read_parquet(tmp_path / "steps.parquet").height == steps  # what the analysis did, as said
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["inputs"]["files"][0]["interval_lines"] == {str(every): len(lines)}


def test_describe_names_each_interval_length_malformed_lines_and_unused_inputs(tmp_path: Path) -> None:
    log = tmp_path / "megatron.log"  # Megatron's line, logged every 100 iterations, then every 200
    line = " iteration {:>8}/   10000 | consumed samples: 1 | elapsed time per iteration (ms): 512.0 |\n"
    log.write_text("".join(line.format(i) for i in (100, 200, 300, 500)) + " iteration 600/ 10000 | broken\n")
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello\n")

    first, second = (describe(file) for file in parse_logs([log, unknown]).files)

    assert first == (
        f"{log}: megatron: 4 step rows; 3 lines are each the mean of 100 steps, 1 line is the mean of 200 steps: "
        "read as 500 steps; 1 malformed line(s)"
    )
    assert second.startswith(f"{unknown}: not used: not a recognised training log")


def test_many_files_tables_are_joined_a_group_at_a_time(tmp_path: Path) -> None:
    """A chunk per file would cost its columns' overhead per file (4,096 traces: 0.1 GB): the tables hold
    one chunk per ``GROUP_FILES`` files, with every file's rows in the order of the files."""
    files = inputs.GROUP_FILES * 2 + 3
    paths = []
    for k in range(files):
        path = tmp_path / f"rank{k:04d}.jsonl"
        path.write_text(
            "".join(
                f'{{"step": {s}, "rank": {k}, "start": {1e9 + s}, "end": {1e9 + s + 0.5}}}\n'
                for s in range(2)
            )
        )
        paths.append(path)
    logs = inputs.parse_logs(paths)
    steps = logs.result.table("steps")
    assert steps.n_chunks() == 3
    each = pl.concat([parse_file(path, None).table("steps") for path in paths])
    assert steps.equals(each)
    assert steps["rank"].to_list() == [k for k in range(files) for _ in range(2)]


def test_alike_inputs_are_one_line_and_the_kinds_past_the_limit_are_counted(tmp_path: Path) -> None:
    line = " iteration {:>8}/   10000 | consumed samples: 1 | elapsed time per iteration (ms): 512.0 |\n"
    ranks = []
    for rank in range(5):  # five ranks' logs alike, one rank's with a line more
        ranks.append(tmp_path / f"rank{rank}.log")
        ranks[-1].write_text("".join(line.format(i) for i in range(1, 4 if rank != 2 else 5)))
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello\n")

    files = parse_logs([*ranks, unknown]).files

    assert inputs.describe_all(files) == [
        f"4 files ({ranks[0]} ... {ranks[4]}), each: megatron: 3 step rows",
        f"{ranks[2]}: megatron: 4 step rows",
        f"{unknown}: not used: {files[-1]['error']}",
    ]
    assert inputs.describe_all(files, shown=1) == [
        f"4 files ({ranks[0]} ... {ranks[4]}), each: megatron: 3 step rows",
        "... and 2 more files of 2 other kinds (summary.json: inputs.files)",
    ]
    assert [f["rows"] for f in files[:5]] == [{"steps": 3}] * 2 + [{"steps": 4}] + [{"steps": 3}] * 2


def test_the_analysis_keeps_only_the_rows_a_stage_reads_and_counts_every_row(
    training_data: Path, tmp_path: Path
) -> None:
    tracelens = training_data / "tracelens" / "nccl_summary_implicit_sync.csv"
    with tracelens.open(newline="") as stream:
        summaries = sum(1 for _ in csv.DictReader(stream))

    logs = Analysis(AnalysisInputs(logs=(P5, tracelens)))._parse_logs()

    assert [f["rows"].get("collectives") for f in logs.files] == [64, summaries]  # every row counted
    kept = logs.result.table("collectives")
    assert kept["format"].unique().to_list() == ["nccl_tests"]  # TraceLens' rows: no stage reads them
    assert kept.height == 64
