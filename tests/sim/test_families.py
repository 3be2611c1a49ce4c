"""Random scenario families: valid files, the same for the same seed, and every axis of the space drawn."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spanwatch.cli import main
from spanwatch.sim import families
from spanwatch.sim import scenario as sc

SAMPLE = 200


@pytest.fixture(scope="module")
def drawn() -> list[sc.Scenario]:
    return [sc.parse(families.sample(seed), f"seed {seed}") for seed in range(1, SAMPLE + 1)]


def _overlap(a: Any, b: Any) -> bool:
    return bool(a.start < b.end and b.start < a.end)


def _on_link(e: Any) -> bool:
    return hasattr(e, "link")


def _per_pair(s: sc.Scenario) -> list[int]:
    counts: dict[frozenset[str], int] = {}
    for link in s.links:
        key = frozenset(link.between)
        counts[key] = counts.get(key, 0) + 1
    return list(counts.values())


def _bucket(value: float, edges: tuple[float, ...]) -> int:
    return sum(value > edge for edge in edges)


# axis -> (the values a scenario shows on it, the values a 200-file sample must show)
AXES: dict[str, tuple[Callable[[sc.Scenario], set[Any]], set[Any]]] = {
    "sites": (lambda s: {len(s.sites)}, {2, 3, 4}),
    "links per pair": (lambda s: set(_per_pair(s)), {1, 2, 3, 4}),
    "distance 20-100/-300/-600 km": (
        lambda s: {_bucket(link.distance_km, (100, 300)) for link in s.links},
        {0, 1, 2},
    ),
    "waves": (lambda s: {link.waves for link in s.links}, set(range(1, 9))),
    "wave rate": (lambda s: {link.wave_gbps for link in s.links}, {400.0, 800.0}),
    "buffer": (
        lambda s: {link.buffer if isinstance(link.buffer, str) else "bytes" for link in s.links},
        {"deep", "shallow", "bytes"},
    ),
    "lossless": (lambda s: {link.lossless for link in s.links}, {True, False}),
    "parallelism": (lambda s: {s.job.parallelism}, {"data", "pipeline", "diloco"}),
    "diloco sync 1/2-10/11-100/101-500": (
        lambda s: {_bucket(s.job.sync_every, (1, 10, 100))} if s.job.parallelism == "diloco" else set(),
        {0, 1, 2, 3},
    ),
    "ranks per site": (lambda s: {s.job.ranks_per_site}, set(range(2, 9))),
    "log format": (lambda s: {s.job.log.format}, {"jsonl", "megatron", "torchtitan"}),
    "log every 1/2-5/6-20": (lambda s: {_bucket(s.job.log.every, (1, 5))}, {0, 1, 2}),
    "log every per format (interval logs)": (
        lambda s: {s.job.log.format} if s.job.log.every > 1 else set(),
        {"jsonl", "megatron", "torchtitan"},
    ),
    "clock skew <-2/<0/<2/>=2 s": (lambda s: {_bucket(s.job.clock_skew, (-2, 0, 2))}, {0, 1, 2, 3}),
    "compute jitter 1-2/2-3/3-4/4-5 %": (
        lambda s: {_bucket(s.job.compute_jitter, (0.02, 0.03, 0.04))},
        {0, 1, 2, 3},
    ),
    "checkpoints": (lambda s: {s.job.checkpoint.every > 0}, {True, False}),
    "job on a subset of links": (lambda s: {s.job.links is not None}, {True, False}),
    "run 60-120/-200/-300 s": (lambda s: {_bucket(s.duration, (120, 200))}, {0, 1, 2}),
    "telemetry": (
        lambda s: {(s.telemetry.snmp, s.telemetry.gnmi)},
        {(True, True), (False, True)},  # SNMP alone: a corner the sampler avoids
    ),
    "episodes": (lambda s: {len(s.episodes)}, set(range(1, 9))),
    "kind": (lambda s: {e.kind for e in s.episodes}, set(sc.KINDS)),
    "other-class traffic episode": (
        lambda s: {
            e.kind
            for e in s.episodes
            if isinstance(e, sc.TrafficEpisode) and s.traffic_class(e) != s.job.traffic_class
        },
        {"congestion", "burst"},  # an incast in another class: a corner the sampler avoids
    ),
    "overlap on one link": (
        lambda s: {
            any(
                _on_link(a) and _on_link(b) and a.link == b.link and _overlap(a, b)
                for i, a in enumerate(s.episodes)
                for b in s.episodes[i + 1 :]
            )
        },
        {True, False},
    ),
    "overlap across links": (
        lambda s: {
            any(
                _on_link(a) and _on_link(b) and a.link != b.link and _overlap(a, b)
                for i, a in enumerate(s.episodes)
                for b in s.episodes[i + 1 :]
            )
        },
        {True, False},
    ),
    "stall": (
        lambda s: {len(e.ranks) == s.ranks for e in s.episodes if isinstance(e, sc.ComputeStall)},
        {True, False},  # job-wide and a straggler
    ),
    "optics during congestion": (
        lambda s: {
            a.kind
            for a in s.episodes
            for b in s.episodes
            if a.kind in ("optical_degradation", "wave_down") and b.kind == "congestion" and _overlap(a, b)
        },
        {"optical_degradation", "wave_down"},
    ),
}


@pytest.mark.parametrize("axis", sorted(AXES))
def test_a_sample_of_200_files_draws_every_value_of_every_axis(drawn: list[sc.Scenario], axis: str) -> None:
    values, wanted = AXES[axis]
    seen = set().union(*(values(s) for s in drawn))
    assert wanted <= seen, f"{axis}: never drawn {wanted - seen}"


def test_the_space_holds_what_the_sampler_promises(drawn: list[sc.Scenario]) -> None:
    for s in drawn:
        assert 60 <= s.duration <= 300
        assert all(20 <= link.distance_km <= 600 for link in s.links)
        assert 1 <= len(s.episodes) <= 8
        for e in s.episodes:
            assert e.start >= families.WARM_UP_S
            if isinstance(e, sc.Burst):
                assert e.duration < s.telemetry.interval  # shorter than a poll
        steps_at_most = s.duration / s.job.compute
        assert steps_at_most / s.job.log.every >= families.MIN_LOG_LINES
        spans = [(e.start, e.duration) for e in s.episodes]
        assert families._union(spans) <= families.MAX_EPISODE_SHARE * s.duration + 1e-3


def test_a_wave_down_never_takes_a_links_last_wave(drawn: list[sc.Scenario]) -> None:
    for s in drawn:
        downs = [e for e in s.episodes if isinstance(e, sc.WaveDown)]
        for e in downs:
            together = {d.wave for d in downs if d.link == e.link and _overlap(d, e)}
            assert len(together) < s.link(e.link).waves, (s.name, e)


def test_an_incast_is_in_the_jobs_class_on_a_link_the_job_uses(drawn: list[sc.Scenario]) -> None:
    incasts = [(s, e) for s in drawn for e in s.episodes if isinstance(e, sc.Incast)]
    assert incasts
    for s, e in incasts:
        assert s.traffic_class(e) == s.job.traffic_class, (s.name, e)
        assert s.job.links is None or e.link in s.job.links, (s.name, e)


def test_the_same_seed_draws_the_same_file_and_another_seed_another() -> None:
    assert families.sample(41) == families.sample(41)
    assert families.sample(41) != families.sample(42)


def test_the_command_writes_valid_files_named_by_their_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scenarios", "sample", "--seed", "7", "--count", "3", "--out", str(tmp_path)]) == 0
    paths = sorted(tmp_path.glob("*.yaml"))
    assert [p.name for p in paths] == ["random-7.yaml", "random-8.yaml", "random-9.yaml"]
    assert capsys.readouterr().out.split() == [str(p) for p in paths]
    loaded = sc.load(paths[1])
    assert loaded.seed == 8 and loaded == sc.parse(families.sample(8))
    assert "--seed 8 --count 1" in paths[1].read_text().splitlines()[0]  # how to draw it again


def test_a_count_below_one_is_refused(tmp_path: Path) -> None:
    assert main(["scenarios", "sample", "--seed", "1", "--count", "0", "--out", str(tmp_path)]) == 2
