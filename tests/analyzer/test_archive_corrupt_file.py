"""Issue 16, item 10: one corrupt (or foreign) Parquet file in the archive is skipped with a warning and
counted in summary.json; it does not abort ``spanwatch analyze``."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from synthetic_fabric import config_yaml, step_rows, steps_jsonl, write_archive

from spanwatch.cli import main


@pytest.mark.parametrize("kind", ["truncated", "garbage", "wrong_schema"])
def test_corrupt_parquet_file_is_skipped_and_counted(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    archive = tmp_path / "archive"
    write_archive(archive, 120, [])
    good = sorted(archive.glob("date=*/hour=*/*.parquet"))
    bad = good[0].parent / "zz-corrupt.parquet"
    if kind == "truncated":
        bad.write_bytes(good[0].read_bytes()[:200])
    elif kind == "garbage":
        bad.write_bytes(b"PAR1" + b"\x00" * 1000)
    else:
        pl.DataFrame({"x": [1, 2]}).write_parquet(bad)
    steps_jsonl(tmp_path / "steps.jsonl", step_rows(120, []))
    config_yaml(tmp_path / "config.yml")
    out = tmp_path / "out"
    code = main(
        [
            "analyze",
            "--archive",
            str(archive),
            "--logs",
            str(tmp_path / "steps.jsonl"),
            "--config",
            str(tmp_path / "config.yml"),
            "--out",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    skipped = summary["telemetry"]["skipped_files"]
    assert skipped["count"] == 1 and "zz-corrupt.parquet" in skipped["first"][0]
    assert summary["telemetry"]["rows"] > 0
    logged = capsys.readouterr().err + "".join(r.getMessage() for r in caplog.records)
    assert "skipping" in logged and "zz-corrupt.parquet" in logged
