"""Which episodes the network showed (``spanwatch.sim.witness``), on short runs of the model itself.

Each episode here is one a random scenario draws: a light congestion that every queue absorbs, a heavy one,
another class's light surge, an incast the far buffer takes, a degradation of a wave that is down all along,
the wave down itself. The truth says ``shown`` for each; the scorer counts misses of unshown ones apart.
"""

from __future__ import annotations

from typing import Any

from spanwatch.sim.fabric import Fabric
from spanwatch.sim.scenario import parse
from spanwatch.sim.truth_build import build_truth


def _run(episodes: list[dict[str, Any]], params: str = "2e9", **link: Any) -> list[bool | None]:
    s = parse(
        {
            "name": "witness",
            "seed": 3,
            "duration": "16s",
            "sites": ["a", "b"],
            "links": [{"name": "ab", "between": ["a", "b"], "distance_km": 100, "waves": 2, **link}],
            "job": {"ranks_per_site": 2, "params": params, "compute": "100ms", "traffic_class": 3},
            "episodes": episodes,
        }
    )
    f = Fabric(s)
    f.advance(s.duration)
    truth = build_truth(s, f, f.job.completed, 0.0)
    return [e.shown for e in truth.episodes]


def test_a_congestion_past_the_link_shows_and_one_the_queues_absorb_does_not() -> None:
    heavy = {"kind": "congestion", "link": "ab", "start": "4s", "duration": "3s", "load": 1.5}
    light = {"kind": "congestion", "link": "ab", "start": "10s", "duration": "3s", "load": 0.1}
    assert _run([heavy, light], buffer="deep") == [True, False]


def test_another_class_shows_only_when_its_own_queue_stands() -> None:
    light = {
        "kind": "congestion",
        "link": "ab",
        "start": "4s",
        "duration": "3s",
        "load": 0.1,
        "traffic_class": 0,
    }
    heavy = {
        "kind": "congestion",
        "link": "ab",
        "start": "10s",
        "duration": "3s",
        "load": 2.0,
        "traffic_class": 0,
    }
    assert _run([light, heavy], params="1e8", buffer="deep", lossless=False, waves=4) == [False, True]
    # Where the job's bursts (served first) already hold that class past the threshold, every episode of
    # the class counts as shown (judged): the side that cannot excuse a miss.
    assert _run([light], params="2e9", buffer="deep", lossless=False) == [True]


def test_a_dark_wave_has_nothing_to_degrade_and_its_outage_always_shows() -> None:
    down = {"kind": "wave_down", "link": "ab", "wave": 2, "start": "4s", "duration": "8s"}
    dark = {
        "kind": "optical_degradation",
        "link": "ab",
        "wave": 2,
        "start": "6s",
        "duration": "3s",
        "osnr_drop_db": 6,
    }
    lit = {
        "kind": "optical_degradation",
        "link": "ab",
        "wave": 1,
        "start": "6s",
        "duration": "3s",
        "osnr_drop_db": 1,
    }
    stall = {"kind": "compute_stall", "start": "13s", "duration": "1s", "ranks": [0]}
    assert _run([down, dark, lit, stall]) == [True, False, True, None]


def test_an_incast_shows_where_it_fills_the_far_buffer() -> None:
    incast = {"kind": "incast", "link": "ab", "start": "4s", "duration": "3s", "fan_in": 16}
    assert _run([incast], buffer="shallow") == [True]
