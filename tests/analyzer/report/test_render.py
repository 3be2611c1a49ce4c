"""Markdown (golden) and HTML (self-contained) rendering of the report, and ``spanwatch report``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from analyzer.claims import load_claims
from analyzer.report import data, html, markdown
from analyzer.topology import load_config
from spanwatch.cli import main

GOLDEN = Path(__file__).parents[2] / "golden" / "report.md"


def test_markdown_golden(small_analysis: tuple[Path, Path, Path], update_golden: bool) -> None:
    folder, config, claims = small_analysis
    report = data.build_report(data.load_analysis(folder), load_config(config), load_claims(claims))
    text = markdown.render(report)
    if update_golden:
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_html_is_self_contained(demo_dir: Path) -> None:
    page = (demo_dir / "report.html").read_text()
    assert "<script" not in page.lower()
    assert not re.search(r"(https?:|//[a-z0-9]|@import|\bsrc=)", page, re.IGNORECASE)
    assert page.count("<svg") == 4
    assert len(page.encode()) < 1_000_000


def test_report_command_rerenders(demo_dir: Path, tmp_path: Path, capsys: object) -> None:
    assert main(["report", str(demo_dir), "--out", str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} == {"report.html", "report.md", "report.json"}
    # Re-rendered from the same analysis: the same verdicts and figures (up to float summation order).
    again, first = (json.loads((d / "report.json").read_text()) for d in (tmp_path, demo_dir))
    verdicts = [[(c["id"], c["verdict"]) for c in v["claims"]] for v in first["vendors"]]
    assert [[(c["id"], c["verdict"]) for c in v["claims"]] for v in again["vendors"]] == verdicts
    assert again["glance"]["steps"] == first["glance"]["steps"]
    assert again["glance"]["exposed_total_seconds"] == pytest.approx(first["glance"]["exposed_total_seconds"])


def test_html_without_claims(small_analysis: tuple[Path, Path, Path]) -> None:
    folder, config, _ = small_analysis
    page = html.render(data.build_report(data.load_analysis(folder), load_config(config), None))
    assert "No claims file was given." in page
