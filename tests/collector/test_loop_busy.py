"""The event loop's busy share (``collector.loop_busy``), on a real asyncio loop."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from collector.loop_busy import LoopBusy

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
