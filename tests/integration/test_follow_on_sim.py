"""``spanwatch follow`` beside a live simulated run: the cost of an episode shows on its link, soon.

A short scenario (two links, congestion above line rate in the job's class on ``ab-2`` only) runs as
``spanwatch demo --no-analysis`` (the fabric, the real collector writing its archive, the job writing its
step log, in real time); ``spanwatch follow`` runs beside it as its own process and the test scrapes its
``/metrics`` twice a second. ``ab-2`` must read a cost past 5 ms per step within 15 s of the episode's
start; ``ab-1``, which nothing touches, never must.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from spanwatch.sim.commands import free_port
from tests.integration.processes import stop_process

pytestmark = pytest.mark.integration

SCENARIO = """\
name: follow-two-links
seed: 7
duration: 22s
sites: [a, b]
links:
  - {name: ab-1, between: [a, b], distance_km: 100, waves: 2, buffer: deep, lossless: true}
  - {name: ab-2, between: [a, b], distance_km: 100, waves: 2, buffer: deep, lossless: true}
job: {ranks_per_site: 2, params: 7e9, compute: 250ms, traffic_class: 3}
episodes:
  - {kind: congestion, link: ab-2, start: 8s, duration: 8s, load: 1.5}
"""
THRESHOLD_S = 0.005
GOAL_S = 15.0


def _spanwatch(*args: str) -> list[str]:
    return [sys.executable, "-m", "spanwatch.cli", "--log-level", "warning", *args]


def _network(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
        text = response.read().decode()
    return {
        line.split('link="')[1].split('"')[0]: float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith("spanwatch_training_network_seconds{")
    }


def test_follow_puts_the_episode_on_its_link_within_15_s(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    with contextlib.ExitStack() as stack:
        demo = subprocess.Popen(
            _spanwatch("demo", "--scenario", str(scenario), "--out", str(out), "--no-analysis"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        stack.callback(stop_process, demo, 10)
        deadline = time.monotonic() + 30
        while not (out / "config.yaml").exists():
            assert demo.poll() is None and time.monotonic() < deadline, "the demo did not start"
            time.sleep(0.1)
        port = free_port()
        errors = stack.enter_context((tmp_path / "follow.stderr").open("w"))
        follow = subprocess.Popen(
            _spanwatch(
                "follow",
                "--logs",
                str(out / "steps.jsonl"),
                "--archive",
                str(out / "archive"),
                "--config",
                str(out / "config.yaml"),
                "--listen",
                f"127.0.0.1:{port}",
                "--job-traffic-class",
                "3",
                "--duration",
                "60s",
            ),
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        stack.callback(stop_process, follow, 10)
        scrapes: list[tuple[float, dict[str, float]]] = []
        while demo.poll() is None:
            with contextlib.suppress(OSError):  # not listening yet
                scrapes.append((time.time(), _network(port)))
            time.sleep(0.5)
        assert demo.returncode == 0
        assert follow.poll() is None, (tmp_path / "follow.stderr").read_text()
    truth = json.loads((out / "truth.json").read_text())
    start = datetime.fromisoformat(truth["episodes"][0]["start_time"].replace("Z", "+00:00")).timestamp()
    seen = [(round(t - start, 1), links) for t, links in scrapes]
    assert scrapes and all(set(links) == {"ab-1", "ab-2"} for _, links in scrapes), seen
    shown = [t for t, links in scrapes if links["ab-2"] > THRESHOLD_S and t >= start]
    assert shown and shown[0] - start <= GOAL_S, seen
    assert max(links["ab-1"] for _, links in scrapes) <= THRESHOLD_S, seen
