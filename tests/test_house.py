"""The house: every test folder is named in the tests README, and the analysis's tables are declared once
(``AnalysisFiles``, what the report reads back, is an ``AnalysisResult``)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import polars as pl

from analyzer.analysis import FILES, AnalysisResult
from analyzer.report.data import AnalysisFiles, load_analysis

ROOT = Path(__file__).resolve().parents[1]


def test_the_tests_readme_names_every_test_folder() -> None:
    readme = (ROOT / "tests" / "README.md").read_text()
    folders = sorted(
        p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
    )
    assert [f for f in folders if f"`tests/{f}/`" not in readme] == []


def test_the_analysis_tables_are_declared_once(tmp_path: Path) -> None:
    assert issubclass(AnalysisFiles, AnalysisResult)
    tables = [f.name for f in fields(AnalysisResult) if f.name != "summary"]
    assert tables == list(FILES)
    result = AnalysisResult(*(pl.DataFrame({"x": [i]}) for i in range(5)), summary={"inputs": {}})
    result.write(tmp_path)
    read = load_analysis(tmp_path)
    assert read.folder == tmp_path
    assert all(getattr(read, name).equals(getattr(result, name)) for name in FILES)
