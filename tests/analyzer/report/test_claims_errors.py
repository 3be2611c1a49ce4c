"""Bad claims files: one clear message each, exit 1 through ``spanwatch``, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from spanwatch.cli import main

GOOD_CLAIM = '{id: a, text: "t", measure: dropped_packets_per_terabyte, op: "<=", value: 0}'
CASES = {
    "unknown measure": (
        'vendors: [{name: V, match: {vendor: acme}, claims: [{id: a, text: t, measure: packets_lost, op: "<=", value: 0}]}]',
        "vendors[0].claims[0].measure: unknown measure 'packets_lost'",
    ),
    "vendor matching nothing": (
        f"vendors: [{{name: Ghost, match: {{vendor: nobody}}, claims: [{GOOD_CLAIM}]}}]",
        "vendors[0] 'Ghost': match {vendor=nobody} matches no device",
    ),
    "bad YAML": ("vendors: [unclosed", "not valid YAML"),
    "value not a number": (
        'vendors: [{name: V, match: {vendor: acme}, claims: [{id: a, text: t, measure: osnr_min_db, op: ">=", value: high}]}]',
        "vendors[0].claims[0].value: a finite number is required, got 'high'",
    ),
    "bad operator": (
        'vendors: [{name: V, match: {vendor: acme}, claims: [{id: a, text: t, measure: osnr_min_db, op: "=>", value: 1}]}]',
        "vendors[0].claims[0].op: '=>' is not one of",
    ),
    "claims not a list": (
        "vendors: [{name: V, match: {vendor: acme}, claims: 3}]",
        "vendors[0].claims: a non-empty list",
    ),
    "no vendors": ("vendor: []", "vendors: a non-empty list of vendors is required"),
    "unknown key": (
        f"vendors: [{{name: V, match: {{vendor: acme}}, claim: [], claims: [{GOOD_CLAIM}]}}]",
        "vendors[0].claim: unknown key",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_claims_file(
    case: str, small_analysis: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, config, _ = small_analysis
    text, expected = CASES[case]
    claims = tmp_path / "bad.yaml"
    claims.write_text(text)
    assert main(["report", str(folder), "--config", str(config), "--claims", str(claims)]) == 1
    err = capsys.readouterr().err
    assert expected in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_analyze_checks_claims_before_analysing(
    small_analysis: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, config, _ = small_analysis
    claims = tmp_path / "bad.yaml"
    claims.write_text(CASES["vendor matching nothing"][0])
    log = tmp_path / "steps.jsonl"
    log.write_text('{"step": 1, "start": 0, "end": 1, "rank": 0}\n')
    out = tmp_path / "out"
    args = [
        "analyze",
        "--logs",
        str(log),
        "--config",
        str(config),
        "--claims",
        str(claims),
        "--out",
        str(out),
    ]
    assert main(args) == 1
    assert "matches no device" in capsys.readouterr().err
    assert not out.exists()


def test_claims_need_a_config(
    small_analysis: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _, claims = small_analysis
    (folder / "summary.json").write_text('{"inputs": {}}')
    assert main(["report", str(folder), "--claims", str(claims)]) == 1
    assert "give --config too" in capsys.readouterr().err
