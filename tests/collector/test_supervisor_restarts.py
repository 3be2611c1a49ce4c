"""Issue 34 point 5: a worker killed over and over backs off to the cap, starts over after a healthy run, and
a stop during the backoff ends the daemon at once with status 0 (the deaths were handled by restarts).

The supervisor's own restart loop (``Supervisor._keep``) on a fake clock, with the worker process replaced
by a coroutine that "runs" for as long as the test says and returns its exit status.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from collector.clock import FakeClock
from collector.supervisor import HEALTHY_SECONDS, RESTART_CAP, Supervisor

pytestmark = pytest.mark.timeout(30)


def _supervisor(tmp_path: Path, clock: FakeClock) -> Supervisor:
    return Supervisor(tmp_path / "unused.yaml", 1, clock=clock)


async def test_the_backoff_doubles_to_its_cap_and_starts_over_after_a_healthy_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    supervisor = _supervisor(tmp_path, clock)
    starts: list[float] = []

    async def run_worker(index: int) -> int:
        starts.append(clock.monotonic())
        if len(starts) == 8:
            await clock.sleep(HEALTHY_SECONDS)  # this one ran healthy, then was killed
        return -9

    monkeypatch.setattr(supervisor, "_run_worker", run_worker)
    keeper = asyncio.create_task(supervisor._keep(0))
    while len(starts) < 10:
        await clock.advance(0.5)
    supervisor.stop()
    await asyncio.wait_for(keeper, 5)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps[:7] == [1, 2, 4, 8, 16, RESTART_CAP, RESTART_CAP]
    assert gaps[7] == HEALTHY_SECONDS + 1  # the healthy run, then the first delay again
    assert gaps[8] == 2
    restarts = supervisor.store.value("spanwatch_worker_restarts_total", (("worker", "0"),))
    assert restarts == 10  # every death counted


async def test_a_stop_during_the_backoff_ends_at_once_with_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    supervisor = _supervisor(tmp_path, clock)
    runs: list[float] = []

    async def run_worker(index: int) -> int:
        runs.append(clock.monotonic())
        return -9  # killed

    monkeypatch.setattr(supervisor, "_run_worker", run_worker)
    keeper = asyncio.create_task(supervisor._keep(0))
    for _ in range(20):
        await asyncio.sleep(0)
    assert runs == [0.0]  # killed once, now waiting out its delay; the clock does not move
    supervisor.stop()
    await asyncio.wait_for(keeper, 2)  # no need to wait the delay out
    assert runs == [0.0]
    assert not supervisor.failed  # exit status 0: the death was handled by its restart


async def test_the_run_a_stop_ends_still_decides_the_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    supervisor = _supervisor(tmp_path, clock)
    stopping = asyncio.Event()

    async def run_worker(index: int) -> int:
        await stopping.wait()
        return 1  # its final flush lost rows

    monkeypatch.setattr(supervisor, "_run_worker", run_worker)
    keeper = asyncio.create_task(supervisor._keep(0))
    await asyncio.sleep(0)
    supervisor.stop()
    stopping.set()
    await asyncio.wait_for(keeper, 2)
    assert supervisor.failed
