"""Scenario files: the strict schema, every cross-check with its location, the shipped matrix, the CLI."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from collector.errors import ConfigError
from spanwatch.cli import main
from spanwatch.sim import scenario as sc

BASE: dict[str, Any] = {
    "name": "t",
    "duration": "30s",
    "sites": ["a", "b"],
    "links": [
        {"name": "ab-1", "between": ["a", "b"], "distance_km": 100, "waves": 4},
        {
            "name": "ab-2",
            "between": ["a", "b"],
            "distance_km": 140,
            "waves": 2,
            "buffer": "8GB",
            "lossless": False,
        },
    ],
    "job": {"ranks_per_site": 2, "params": "7e9", "compute": "250ms", "compute_jitter": "2%"},
    "episodes": [{"kind": "congestion", "link": "ab-1", "start": "5s", "duration": "5s", "load": 1.3}],
}


def problems(edit: Any) -> list[str]:
    raw = copy.deepcopy(BASE)
    edit(raw)
    with pytest.raises(ConfigError) as e:
        sc.parse(raw, "f.yaml")
    return list(e.value.problems)


def test_base_is_valid() -> None:
    s = sc.parse(copy.deepcopy(BASE))
    assert s.job.params == 7e9 and s.job.compute_jitter == pytest.approx(0.02)
    assert s.links[1].buffer_bytes == 8e9 and s.job_links == ("ab-1", "ab-2") and s.ranks == 4


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda r: r["links"][0].update(colour="red"), "f.yaml: links[0].colour: unknown key"),
        (lambda r: r.update(extra=1), "f.yaml: extra: unknown key"),
        (
            lambda r: r["links"][1].update(between=["a", "c"]),
            "f.yaml: links[1].between[1]: 'c' names no site",
        ),
        (lambda r: r["links"][1].update(between=["a", "a"]), "f.yaml: links[1].between: a link joins two"),
        (lambda r: r["links"][1].update(name="ab-1"), "f.yaml: links[1].name: link 'ab-1' is named twice"),
        (lambda r: r["links"][0].update(buffer="huge"), "f.yaml: links[0].buffer: "),
        (lambda r: r["links"][0].update(optics="999ZR"), "f.yaml: links[0].optics: unknown profile"),
        (lambda r: r.update(sites=["a", "b", "c"]), "f.yaml: sites[2]: no link reaches site 'c'"),
        (lambda r: r.update(sites=["a"]), "f.yaml: sites: "),
        (
            lambda r: r["episodes"][0].update(start="28s"),
            "f.yaml: episodes[0]: congestion from 28s for 5s ends after",
        ),
        (lambda r: r["episodes"][0].update(link="zz"), "f.yaml: episodes[0].link: unknown link 'zz'"),
        (lambda r: r["episodes"][0].update(load="x"), "f.yaml: episodes[0].load: "),
        (lambda r: r["episodes"][0].update(wave=1), "f.yaml: episodes[0].wave: unknown key"),
        (
            lambda r: r["episodes"].append(
                {"kind": "wave_down", "link": "ab-2", "wave": 3, "start": "1s", "duration": "1s"}
            ),
            "f.yaml: episodes[1].wave: wave 3 out of range (link ab-2 has 1..2)",
        ),
        (
            lambda r: r["episodes"].append(
                {"kind": "compute_stall", "start": "1s", "duration": "1s", "ranks": [4]}
            ),
            "f.yaml: episodes[1].ranks[0]: rank 4 out of range (0..3)",
        ),
        (
            lambda r: r["episodes"].append({"kind": "meteor", "start": "1s", "duration": "1s"}),
            "f.yaml: episodes[1]: ",
        ),
        (lambda r: r["job"].update(links=["ab-3"]), "f.yaml: job.links[0]: unknown link 'ab-3'"),
        (lambda r: r["job"].update(parallelism="tensor"), "f.yaml: job.parallelism: "),
        (
            lambda r: (
                r["job"]["log"].update(format="csv")
                if "log" in r["job"]
                else r["job"].update(log={"format": "csv"})
            ),
            "f.yaml: job.log.format: ",
        ),
        (lambda r: r.update(duration=30), "f.yaml: duration: not a duration"),
        (
            lambda r: r.update(telemetry={"gnmi": False, "snmp": False}),
            "f.yaml: telemetry: enable gnmi or snmp",
        ),
        (
            lambda r: r["episodes"].extend(
                [
                    {
                        "kind": "burst",
                        "link": "ab-1",
                        "start": "1s",
                        "duration": "1s",
                        "load": 2,
                        "traffic_class": 0,
                    },
                    {
                        "kind": "burst",
                        "link": "ab-1",
                        "start": "1s",
                        "duration": "1s",
                        "load": 2,
                        "traffic_class": 1,
                    },
                ]
            ),
            "f.yaml: episodes[2].traffic_class: one background class is modelled (0 already)",
        ),
        (
            lambda r: r["episodes"].append(
                {
                    "kind": "incast",
                    "link": "ab-1",
                    "start": "1s",
                    "duration": "1s",
                    "fan_in": 8,
                    "traffic_class": 0,
                }
            ),
            "f.yaml: episodes[1].traffic_class: an incast is modelled in the job's class only",
        ),
    ],
)
def test_each_problem_is_one_located_line(edit: Any, expected: str) -> None:
    found = problems(edit)
    assert any(p.startswith(expected) for p in found), found
    assert all(p.startswith("f.yaml: ") and "\n" not in p for p in found)


def test_every_problem_is_reported_at_once() -> None:
    def edit(r: dict[str, Any]) -> None:
        r["links"][1]["between"] = ["a", "z"]
        r["episodes"][0]["link"] = "nope"
        r["job"]["links"] = ["zz"]

    assert len(problems(edit)) == 3


def test_shipped_scenarios_are_valid_and_described() -> None:
    paths = sc.shipped()
    assert len(paths) >= 12
    kinds: set[str] = set()
    for path in paths:
        s = sc.load(path)
        assert s.name == path.stem, path
        assert sc.description(path), path
        assert s.duration <= 45, path  # CI runs every one of them end to end
        kinds |= {e.kind for e in s.episodes}
    assert kinds == set(sc.KINDS)


def test_matrix_coverage() -> None:
    scenarios = [sc.load(p) for p in sc.shipped()]
    links = {len(s.links) for s in scenarios}
    assert {2, 3, 4} <= links
    every = [lk for s in scenarios for lk in s.links]
    assert {lk.buffer_name for lk in every} >= {"deep", "shallow"}
    assert {lk.lossless for lk in every} == {True, False}
    assert min(lk.distance_km for lk in every) <= 100 and max(lk.distance_km for lk in every) >= 500
    assert {s.job.parallelism for s in scenarios} >= {"data", "pipeline", "diloco"}
    assert {s.job.log.format for s in scenarios} == {"jsonl", "megatron", "torchtitan"}
    assert any(s.job.log.every == 10 for s in scenarios)
    assert any(abs(s.job.clock_skew) == 2 for s in scenarios)
    assert any(s.job.checkpoint.every for s in scenarios)


def test_builtin_is_the_two_site_demo() -> None:
    s = sc.builtin(60.0)
    assert s.sites == ("a", "b") and len(s.links) == 1 and s.links[0].waves == 4
    assert [e.kind for e in s.episodes] == ["congestion", "incast", "optical_degradation", "wave_down"]


def test_cli_reports_problems_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = copy.deepcopy(BASE)
    raw["episodes"][0]["link"] = "nope"
    raw["links"][0]["speed"] = 1
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["demo", "--scenario", str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"{path}: 1 problem(s)" in err  # schema errors first; cross-checks run on a valid schema
    assert f"{path}: links[0].speed: unknown key" in err
    del raw["links"][0]["speed"]
    path.write_text(yaml.safe_dump(raw))
    assert main(["demo", "--scenario", str(path), "--out", str(tmp_path / "out")]) == 1
    assert f"{path}: episodes[0].link: unknown link 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_list_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--list-scenarios"]) == 0
    out = capsys.readouterr().out
    for path in sc.shipped():
        assert path.stem in out and sc.description(path) in out
