"""The event loop's busy share (``collector.loop_busy``), on a real asyncio loop."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from collector.loop_busy import CpuWaits, LoopBusy

# The measures' windows open and close a few statements away from the thread's CPU clock reads, and the
# thread spends a little CPU inside select(0): 0.05 of the ~0.2 s span is 10 ms, far more than both.
TICK_SHARE = 0.05


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def test_a_loop_waiting_for_io_is_idle_and_one_that_computes_is_busy() -> None:
    busy = LoopBusy(asyncio.get_running_loop())
    await asyncio.sleep(0.3)  # the loop waits in select all along
    waiting = busy.share()
    for _ in range(30):  # 10 ms of work per turn, nothing to wait for
        _spin(0.01)
        await asyncio.sleep(0)
    working = busy.share()
    busy.close()
    assert waiting is not None and working is not None
    assert waiting < 0.2
    assert working > 0.8


async def test_two_watchers_share_one_wrapper_and_a_closed_one_stops_counting() -> None:
    loop = asyncio.get_running_loop()
    first, second = LoopBusy(loop), LoopBusy(loop)
    wrapper = loop._selector.select  # type: ignore[attr-defined]
    await asyncio.sleep(0.1)
    assert first.waited > 0.05 and second.waited > 0.05
    first.close()
    before = first.waited
    await asyncio.sleep(0.05)
    assert first.waited == before and first.share() is None
    third = LoopBusy(loop)
    assert loop._selector.select is wrapper  # type: ignore[attr-defined]
    second.close()
    third.close()


async def test_each_measure_alone_sees_a_working_loop(tmp_path: Path) -> None:
    """The selector's measure without schedstat, and schedstat's without a selector.

    Busy is at least what the loop's thread computed: time on a CPU is never inside ``select``'s wait, and
    schedstat counts it too. Their shares of the wall time are bounded by the CPU the machine gives the
    thread, not by a fixed figure: on a loaded host the thread is also descheduled, and the selector measure
    counts a preemption at ``select``'s return (the kernel's preemption point) as waiting, its stated blind
    spot (0.58 in a CI run beside a busy test suite); schedstat counts the wait for a CPU as busy, but a wait
    for the GIL as sleep (0.62 in a CI run beside other tests' threads), so neither has a fixed floor.
    """
    no_schedstat = LoopBusy(asyncio.get_running_loop(), schedstat=str(tmp_path / "absent"))

    class Bare(asyncio.AbstractEventLoop):
        pass

    schedstat_only = LoopBusy(Bare())
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(20):
        _spin(0.01)
        await asyncio.sleep(0)
    computed = (time.thread_time() - cpu) / (time.perf_counter() - wall)
    shares = no_schedstat.share(), schedstat_only.share()
    no_schedstat.close()
    assert shares[0] is not None and shares[0] >= computed - TICK_SHARE
    assert shares[1] is not None and shares[1] >= computed - TICK_SHARE


def test_nothing_to_read_is_not_measured(tmp_path: Path) -> None:
    class Bare(asyncio.AbstractEventLoop):
        pass

    busy = LoopBusy(Bare(), schedstat=str(tmp_path / "absent"))
    assert busy.share() is None


def _schedstat(folder: Path, tid: int, waited_ns: int) -> None:
    (folder / str(tid)).mkdir(exist_ok=True)
    (folder / str(tid) / "schedstat").write_text(f"123456 {waited_ns} 7\n")


def test_other_threads_waits_for_a_cpu_are_summed_per_second_of_wall_time(tmp_path: Path) -> None:
    """Each thread's wait since the last call, the loop's own left out (``LoopBusy`` counts it), a thread
    started since counted whole, one that ended forgotten."""
    now = [0.0]
    for tid, waited in ((1, 5_000_000_000), (2, 1_000_000_000), (3, 0)):
        _schedstat(tmp_path, tid, waited)
    waits = CpuWaits(clock=lambda: now[0], tasks=str(tmp_path), skip=1)
    now[0] = 2.0
    _schedstat(tmp_path, 1, 9_000_000_000)  # the loop's: left out
    _schedstat(tmp_path, 2, 1_300_000_000)  # 0.3 s more
    _schedstat(tmp_path, 3, 100_000_000)  # 0.1 s more
    _schedstat(tmp_path, 4, 200_000_000)  # started since: 0.2 s, all of it in the span
    assert waits.share() == pytest.approx(0.6 / 2.0)
    now[0] = 3.0
    for tid in (3, 4):
        (tmp_path / str(tid) / "schedstat").unlink()
        (tmp_path / str(tid)).rmdir()
    assert waits.share() == 0.0  # thread 2 waited no more; the ended ones count nothing


def test_other_threads_waits_are_not_measured_without_the_kernel_saying(tmp_path: Path) -> None:
    waits = CpuWaits(tasks=str(tmp_path / "absent"))
    assert waits.share() is None


def _hash(stop: threading.Event) -> None:
    """Work on a CPU outside the GIL (hashlib lets it go for large buffers), so threads compete for CPUs,
    not for the GIL (a wait for which is sleep, not a wait for a CPU)."""
    block = bytes(1 << 20)
    while not stop.is_set():
        hashlib.sha256(block).digest()


def test_threads_kept_off_the_cpus_are_seen_waiting() -> None:
    """On this process's real task folder: two more threads than the process has CPUs, hashing outside the
    GIL for 0.3 s, wait for a CPU (at least 2 thread-seconds a second in all); a tenth of a thread a second
    is far under that and far over the figure's read error. Read while they run: a thread's wait is
    gone with its task entry."""
    waits = CpuWaits()
    cpus = len(os.sched_getaffinity(0))
    stop = threading.Event()
    workers = [threading.Thread(target=_hash, args=(stop,)) for _ in range(cpus + 2)]
    for worker in workers:
        worker.start()
    time.sleep(0.3)
    share = waits.share()
    stop.set()
    for worker in workers:
        worker.join()
    assert share is not None and share > 0.1
