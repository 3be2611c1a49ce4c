"""Every parsed input reaches the output: launcher tags anywhere in a row, nccl-tests bus bandwidth as a table,
and a warning for every input that could not be used (unknown, no rows, no wall clock).

Expected counts come from the raw files read here with plain string tests, never from the parsers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from analyzer.analysis import Analysis, AnalysisInputs
from analyzer.ingest import detect, parse_file
from analyzer.ingest._common import untag
from analyzer.inputs import parse_logs

P5 = Path(__file__).parent / "data" / "p5_all_reduce_perf_tag_output.log"
# A result row behind mpirun's tag: "[1,0]<stdout>:     8     2   float   sum   -1   ..."
_ROW = re.compile(r"<stdout>:\s+(\d+)\s+\d+\s+float\s+sum\s+-1\s+\S+\s+\S+\s+(\S+)")


def _expected_rows(text: str) -> list[tuple[float, float]]:
    return [(float(m[1]), float(m[2])) for line in text.splitlines() if (m := _ROW.search(line))]


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

    assert result.counts["result_rows"] == 32
    assert rows.height == 64  # out-of-place and in-place
    assert result.problems == []
    out_of_place = rows.filter(~pl.col("in_place"))
    assert list(zip(out_of_place["size_bytes"], out_of_place["busbw_gbps"], strict=True)) == expected
    assert out_of_place["collective"].to_list() == ["all_reduce"] * 32
    assert result.table("nccl_ranks").filter(pl.col("format") == "nccl_tests").height == 16


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
    assert table["size_bytes"].to_list() == [size for size, _ in expected]
    assert table["busbw_gbps"].to_list() == [busbw for _, busbw in expected]
    assert set(table["ranks"].to_list()) == {16}
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
