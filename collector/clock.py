"""Injected time: the scheduler, store and archive read a ``Clock`` so tests advance time, not sleep."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Wall time for timestamps, monotonic time for intervals, and a way to wait."""

    def time_ns(self) -> int: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def time_ns(self) -> int:
        return time.time_ns()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock tests move by hand; ``sleep`` returns once ``advance`` has moved past its deadline."""

    def __init__(self, start_ns: int = 1_764_000_000 * 10**9) -> None:
        self._wall0 = start_ns
        self._now = 0.0
        self._waiters: list[tuple[float, asyncio.Future[None]]] = []

    def time_ns(self) -> int:
        return self._wall0 + int(self._now * 1e9)

    def monotonic(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((self._now + max(seconds, 0.0), fut))
        await fut

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleeper whose deadline passed, and let them run."""
        for _ in range(5):  # let tasks that are about to sleep register first
            await asyncio.sleep(0)
        self._now += seconds
        due = [w for w in self._waiters if w[0] <= self._now]
        self._waiters = [w for w in self._waiters if w[0] > self._now]
        for _, fut in due:
            if not fut.done():
                fut.set_result(None)
        for _ in range(5):
            await asyncio.sleep(0)
