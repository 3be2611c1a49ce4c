"""The truth reader on the simulated fabric's format, and the accuracy scores on hand-made cases."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from synthetic_fabric import T0

from analyzer import accuracy, schemas
from analyzer.errors import InputError
from analyzer.truth import family, read_truth


def _iso(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


SIM_TRUTH = {
    "link": "L",
    "episodes": [
        {"kind": "congestion", "start": _iso(10), "end": _iso(20), "link": "L", "device": "a",
         "interface": "E1/2", "wave": 1, "magnitude": 0.8},
        {"kind": "wave_down", "start": _iso(40), "end": _iso(45), "link": "L", "device": "a",
         "interface": "E1/1", "wave": 0, "peer": "b"},
    ],
    "steps": [
        {"step": 0, "excess_s": 0.001, "culprits": []},
        {"step": 1, "excess_s": 0.05, "culprits": [{"device": "a", "interface": "E1/2", "wave": 1,
                                                   "causes": ["pfc_pause"]}]},
        {"step": 2, "excess_s": 0.3, "culprits": [{"device": "b", "interface": "E1/1", "wave": 0,
                                                  "causes": ["wave_down"]}]},
    ],
}  # fmt: skip


def test_reads_the_simulated_fabric_format(tmp_path: Path) -> None:
    path = tmp_path / "truth.json"
    path.write_text(json.dumps(SIM_TRUTH))
    episodes, steps = read_truth(path)
    assert episodes["family"].to_list() == ["congestion", "down"]
    assert episodes["peer"].to_list() == [None, "b"]
    assert steps["exposed_seconds"].to_list() == [0.001, 0.05, 0.3]
    assert steps["causes"].to_list() == [[], ["a/E1/2"], ["b/E1/1"]]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("incast", "congestion"), ("optical_degradation", "optical"), ("wave_down", "down"), ("meteor", None)],
)
def test_truth_kinds_fall_in_families(kind: str, expected: str | None) -> None:
    assert family(kind) == expected


def test_scores(tmp_path: Path) -> None:
    path = tmp_path / "truth.json"
    path.write_text(json.dumps(SIM_TRUTH))
    episodes, truth_steps = read_truth(path)
    events = pl.DataFrame(
        {
            "event_id": [0, 1, 2],
            "kind": ["pfc", "osnr", "queue"],
            "link": ["L", None, "L"],
            "device": ["a", "b", "a"],
            "interface": ["E1/2", "Och1/1", "E1/3"],
            "start_time": [T0 + timedelta(seconds=s) for s in (11, 41, 100)],
            "end_time": [T0 + timedelta(seconds=s) for s in (19, 44, 110)],
        }
    ).with_columns(pl.col("start_time", "end_time").cast(schemas.TIME))
    scores = accuracy.event_scores(episodes, events, 2.0)
    # the wave_down is met by an unlinked optics event on its peer; the queue event at 100 s meets nothing
    assert scores["event_recall"] == 1.0
    assert scores["event_precision"] == pytest.approx(2 / 3)
    members = pl.DataFrame(
        {
            "link": ["L"] * 3,
            "device": ["a", "a", "b"],
            "interface": ["E1/1", "E1/2", "E1/1"],
            "rtt_seconds": 0.001,
        }
    )
    known = accuracy.places(members, ["L"])
    links = pl.DataFrame({"link": ["L"], "exposed_total_seconds": [0.33]})
    error = accuracy.exposure_error(truth_steps, episodes, links, known)
    assert error["exposed_latency_relative_error"] == pytest.approx(abs(0.33 - 0.35) / 0.35)
    steps = pl.DataFrame(
        {"step": [1, 2], "top_link": ["L", "L"], "top_device": ["a", "a"], "top_interface": ["E1/2", "E1/1"]}
    )
    scores = accuracy.attribution_accuracy(truth_steps, episodes, steps, known, min_exposed_seconds=0.01)
    assert scores == {"attribution_accuracy": 1.0, "attribution_accuracy_wave": 1.0, "inflated_steps": 2}


def test_a_truth_file_without_times_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "truth.json"
    path.write_text(json.dumps({"episodes": [{"kind": "congestion"}]}))
    with pytest.raises(InputError, match="needs start and end"):
        read_truth(path)
