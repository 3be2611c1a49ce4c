"""The event loop's busy share (``collector.loop_busy``), on a real asyncio loop."""

from __future__ import annotations

import asyncio
import time

from collector.loop_busy import LoopBusy


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


async def test_half_the_time_working_reads_about_half() -> None:
    busy = LoopBusy(asyncio.get_running_loop())
    for _ in range(10):
        _spin(0.02)
        await asyncio.sleep(0.02)
    share = busy.share()
    busy.close()
    assert share is not None and 0.3 < share < 0.75  # timers are late by a turn on a shared machine


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


def test_a_loop_without_a_selector_is_not_measured() -> None:
    class Bare(asyncio.AbstractEventLoop):
        pass

    busy = LoopBusy(Bare())
    assert busy.share() is None
