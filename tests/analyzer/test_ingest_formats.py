"""Each parser on small hand-written inputs (tests/analyzer/data/): layouts of other versions, malformed
lines with their line numbers, gzip, auto-detection and the unknown-format error."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from analyzer.errors import IngestError, UnknownFormatError, UnreadableFileError
from analyzer.ingest import FORMATS, detect, parse_file, parse_files

DATA = Path(__file__).parent / "data"
# Hand-written samples in each format's layouts (new and old), each with deliberately broken lines.
MEGATRON = (DATA / "megatron.log").read_text(encoding="utf-8")
DEEPSPEED = (DATA / "deepspeed.log").read_text(encoding="utf-8")
TORCHTITAN = (DATA / "torchtitan.log").read_text(encoding="utf-8")  # with ANSI colour codes
NCCL_DEBUG = (DATA / "nccl_debug.log").read_text(encoding="utf-8")
NCCL_TESTS = (DATA / "all_reduce_perf.out").read_text(encoding="utf-8")

INSPECTOR_RECORD = {
    "header": {"id": "0x7f8c496ae9f661", "rank": 2, "n_ranks": 8, "nnodes": 1},
    "metadata": {"inspector_output_format_version": "v4.0", "hostname": "node-a", "pid": 1639453},
    "coll_perf": {
        "coll": "AllReduce",
        "coll_sn": 1407,
        "coll_msg_size_bytes": 17179869184,
        "coll_exec_time_us": 61974,
        "coll_algobw_gbs": 277.2,
        "coll_busbw_gbs": 485.1,
    },
}


def _write(path: Path, text: str, compress: bool = False) -> Path:
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as stream:
            stream.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _lines_of(problems: list[object]) -> list[int]:
    return [p.line for p in problems]  # type: ignore[attr-defined]


def test_launcher_prefixes_are_tolerated(tmp_path: Path) -> None:
    megatron_line = MEGATRON.splitlines()[3]
    nccl_line = NCCL_DEBUG.splitlines()[2]
    path = _write(tmp_path / "prefixed.log", f"[default7]:{megatron_line}\n3: {nccl_line}\n")
    result = parse_file(path)
    assert result.table("steps")["end_time"][0] == datetime(2024, 5, 2, 10, 11, 12, tzinfo=UTC)
    assert result.table("nccl_connections")["transport"].to_list() == ["NET/IB"]


def test_megatron_old_and_new_layouts_and_bad_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "train.log", MEGATRON)
    assert detect(path) == ["megatron"]
    result = parse_file(path)
    steps = result.table("steps")
    assert steps["step"].to_list() == [100, 200, 400]
    assert steps["duration_seconds"].to_list() == pytest.approx([1.5, 1.5, 1.4005])
    assert steps["end_time"][0] == datetime(2024, 5, 2, 10, 11, 12, tzinfo=UTC)
    assert steps["start_time"][1] == steps["end_time"][0]
    assert steps["loss"][0] == pytest.approx(7.5)
    assert _lines_of(result.problems) == [6]
    assert result.problems[0].file == str(path)


def test_deepspeed_step_and_pipeline_lines(tmp_path: Path) -> None:
    path = _write(tmp_path / "ds.log", DEEPSPEED)
    assert detect(path) == ["deepspeed"]
    result = parse_file(path)
    steps = result.table("steps")
    assert steps["step"].to_list() == [10, 20, 30]
    assert steps["duration_seconds"].to_list()[1:] == pytest.approx([0.7448, 0.876])
    assert steps["interval_average"].all()
    assert _lines_of(result.problems) == [4]


def test_torchtitan_colour_codes_stripped(tmp_path: Path) -> None:
    path = _write(tmp_path / "titan.log", TORCHTITAN)
    assert detect(path) == ["torchtitan"]
    result = parse_file(path)
    steps = result.table("steps")
    assert steps["step"].to_list() == [1, 11, 10]
    assert steps["rank"].to_list() == [0, 0, None]
    assert steps["loss"].to_list() == pytest.approx([12.0, 9.5, 7.9])
    assert steps["duration_seconds"][1] == pytest.approx(1.0)  # 10 s over 10 steps
    assert _lines_of(result.problems) == [3]


def test_nccl_debug_timestamps_new_layouts_and_bad_lines(tmp_path: Path) -> None:
    path = _write(tmp_path / "nccl.log", NCCL_DEBUG)
    assert detect(path) == ["nccl_debug"]
    result = parse_file(path)
    connections = result.table("nccl_connections")
    assert connections["transport"].to_list() == ["P2P/CUMEM", "NET/IB", "NET/IB", "SHM/direct"]
    assert connections["crosses_network"].to_list() == [False, True, True, False]
    assert connections["rank"].to_list() == [0, 1, 2, 2]  # the receiver logs [receive] lines
    assert connections["time"][0] == datetime(2025, 3, 1, 12, 0, 1, 500000, tzinfo=UTC)
    ranks = result.table("nccl_ranks")
    assert ranks.select("rank", "host", "cuda_device").rows() == [(0, "node-a", 0), (2, "node-b", 0)]
    assert _lines_of(result.problems) == [6, 9]


def test_nccl_tests_table(tmp_path: Path) -> None:
    path = _write(tmp_path / "all_reduce_perf.out", NCCL_TESTS)
    assert detect(path) == ["nccl_tests"]
    result = parse_file(path)
    rows = result.table("collectives")
    assert rows.height == 6  # three good sizes, out-of-place and in-place
    assert rows["collective"].unique().to_list() == ["all_reduce"]
    assert rows["size_bytes"].to_list() == [8, 8, 16, 16, 64, 64]
    assert rows["in_place"].to_list() == [False, True] * 3
    assert rows["duration_seconds"][0] == pytest.approx(36.29e-6)
    assert rows["wrong"].to_list() == [0, 0, 0, None, 0, 0]
    assert result.table("nccl_ranks")["host"].to_list() == ["node-a", "node-b"]
    assert _lines_of(result.problems) == [12]


def test_nccl_inspector_jsonl_and_pretty_printed(tmp_path: Path) -> None:
    older = {
        "header": {"comm_id": "0x1", "rank": 0, "nranks": 2},
        "coll_perf": {"collective": "AllGather", "msg_size_bytes": 1024, "exec_time_us": 10},
    }
    text = (
        json.dumps(INSPECTOR_RECORD)
        + "\n"
        + "{not json\n"
        + json.dumps(older, indent=2)
        + "\n"
        + json.dumps({"header": {"rank": 1}})
        + "\n"
    )
    path = _write(tmp_path / "inspector.log", text)
    assert detect(path) == ["nccl_inspector"]
    result = parse_file(path)
    rows = result.table("collectives")
    assert rows["collective"].to_list() == ["AllReduce", "AllGather"]
    assert rows["duration_seconds"].to_list() == pytest.approx([0.061974, 1e-5])
    assert rows["host"].to_list() == ["node-a", None]
    assert _lines_of(result.problems) == [2, 3 + len(json.dumps(older, indent=2).splitlines())]


def test_steplog_jsonl_rfc3339_epoch_and_bad_lines(tmp_path: Path) -> None:
    text = "\n".join(
        [
            '{"step": 1, "start": "2026-11-30T10:00:00Z", "end": "2026-11-30T10:00:01.250Z", "rank": 0}',
            '{"step": 2, "start": 1764496801.25, "end": 1764496802.0, "rank": 0}',
            "not json",
            '{"step": 3, "start": "2026-11-30T10:00:03Z"}',
            '{"step": 4, "start": "2026-11-30T10:00:05Z", "end": "2026-11-30T10:00:04Z"}',
            "",
        ]
    )
    path = _write(tmp_path / "steps.jsonl", text)
    assert detect(path) == ["steplog"]
    result = parse_file(path)
    steps = result.table("steps")
    assert steps["duration_seconds"].to_list() == pytest.approx([1.25, 0.75])
    assert not steps["interval_average"].any()
    assert _lines_of(result.problems) == [3, 4, 5]


@pytest.mark.parametrize("name", ["train.log.gz", "train.log"])
def test_gzip_is_read_transparently_whatever_the_name(tmp_path: Path, name: str) -> None:
    plain = parse_file(_write(tmp_path / "plain.log", MEGATRON)).table("steps")
    packed = parse_file(_write(tmp_path / name, MEGATRON, compress=True)).table("steps")
    assert packed.drop("source_file").equals(plain.drop("source_file"))


def test_multiple_formats_in_one_log(tmp_path: Path) -> None:
    # A Megatron run with NCCL_DEBUG=INFO: steps and topology from one file.
    path = _write(tmp_path / "both.log", NCCL_DEBUG + MEGATRON)
    assert detect(path) == ["megatron", "nccl_debug"]
    result = parse_file(path)
    assert result.table("steps").height == 3
    assert result.table("nccl_connections").height == 4


def test_nccl_tests_with_nccl_debug_gives_results_and_topology(tmp_path: Path) -> None:
    path = _write(tmp_path / "all_reduce_perf.log", NCCL_DEBUG + NCCL_TESTS)
    assert detect(path) == ["nccl_tests", "nccl_debug"]
    result = parse_file(path)
    assert result.table("collectives").height == 6
    assert result.table("nccl_connections").height == 4


def test_megatron_deepspeed_steps_are_not_counted_twice(tmp_path: Path) -> None:
    path = _write(tmp_path / "megatron_ds.log", DEEPSPEED + MEGATRON)
    assert detect(path) == ["megatron"]


def test_unknown_format_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "notes.txt", "nothing to see here\n")
    with pytest.raises(UnknownFormatError, match=r"notes\.txt") as caught:
        parse_file(path)
    assert isinstance(caught.value, IngestError)
    for name in FORMATS:
        assert name in str(caught.value)


def test_unknown_format_name_and_missing_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "train.log", MEGATRON)
    with pytest.raises(UnknownFormatError, match=r"no-such-format"):
        parse_file(path, "no-such-format")
    with pytest.raises(UnreadableFileError, match=r"missing\.log"):
        parse_file(tmp_path / "missing.log")


def test_corrupt_gzip_is_an_ingest_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.log.gz"
    path.write_bytes(gzip.compress(MEGATRON.encode())[:40])
    with pytest.raises(UnreadableFileError, match=r"broken\.log\.gz"):
        parse_file(path, "megatron")


def test_broken_kineto_json_is_an_ingest_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "trace.json", '{"schemaVersion": 1, "traceEvents": [{"ph": "X"')
    with pytest.raises(UnreadableFileError, match=r"trace\.json"):
        parse_file(path)


def test_parse_files_concatenates_with_origin(tmp_path: Path) -> None:
    first = _write(tmp_path / "a.log", MEGATRON)
    second = _write(tmp_path / "b.log", DEEPSPEED)
    result = parse_files([first, second])
    steps = result.table("steps")
    assert steps.group_by("source_file").len().sort("source_file")["len"].to_list() == [3, 3]
    assert set(result.tables) >= {"steps", "collectives", "nccl_connections"}
    assert len(result.problems) == 2
    assert isinstance(steps, pl.DataFrame)
