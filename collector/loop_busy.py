"""How much of the wall time an asyncio event loop spent working rather than waiting for I/O.

A loop that waited for I/O for part of a period read every stream as soon as it had data: whatever
lateness its values show was made upstream (the device, the network, a starting connection), not by a
process that could not keep up. A loop that never waited had more work than time. Measured in wall time,
this also counts the CPU a busy machine does not give the process, which is what staleness is made of.

Two measures, each blind to something, and the larger is taken:

- the loop thread's time running or waiting for a CPU (Linux ``/proc/self/task/<tid>/schedstat``): a
  thread woken by data but not yet given a core is waiting for the CPU, not for I/O (on a loaded machine
  that is much of the time; the selector measure below counts it as idle);
- the time outside the loop's ``select`` (``loop._selector``, as ``collector.grpc_wakeups`` reads it, two
  clock reads per turn): it also counts the GIL waits that schedstat sees as sleep.

Neither sees a loop idle because the process's other threads, which hand it the messages, were waiting
for a CPU: ``CpuWaits`` measures that.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from typing import Any

WATCHERS = "loop_busy_watchers"  # the attribute of our wrapper that lists the LoopBusy fed by it


class LoopBusy:
    """The busy share of ``loop``'s wall time, per call of ``share``; ``close`` stops.

    Create it on the loop's thread (the one whose schedstat is read).

    Args:
        loop: the running loop (not a selector event loop: only schedstat is read).
        clock: seconds, monotonic (tests may count something else).
        schedstat: the loop thread's schedstat file (default: this thread's; unreadable: not used).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        clock: Callable[[], float] = time.perf_counter,
        schedstat: str | None = None,
    ) -> None:
        self.clock = clock
        self.waited = 0.0  # seconds spent in select since the last ``share``
        self._since = clock()
        self._watchers = self._wrap(getattr(loop, "_selector", None))
        self._schedstat = schedstat or f"/proc/self/task/{threading.get_native_id()}/schedstat"
        self._demand = self._running_or_runnable()

    def _running_or_runnable(self) -> float | None:
        """The thread's seconds on a CPU plus waiting for one, or None when the kernel does not say."""
        if not self._schedstat:
            return None
        try:
            with open(self._schedstat) as f:
                ran, waited = f.read().split()[:2]
            return (int(ran) + int(waited)) / 1e9
        except (OSError, ValueError):
            return None

    def _wrap(self, selector: Any) -> list[LoopBusy] | None:
        """Join the watchers of ``selector``'s wrapped ``select`` (wrapping it first if need be)."""
        select = getattr(selector, "select", None)
        if select is None:
            return None
        watchers: list[LoopBusy] | None = getattr(select, WATCHERS, None)
        if watchers is None:
            watchers = []
            clock = self.clock

            def timed_select(timeout: float | None = None) -> Any:
                start = clock()
                try:
                    return select(timeout)
                finally:
                    waited = clock() - start
                    for watcher in watchers:
                        watcher.waited += waited

            setattr(timed_select, WATCHERS, watchers)
            selector.select = timed_select
        watchers.append(self)
        return watchers

    def share(self) -> float | None:
        """The busy share of the wall time since the last call (0..1), or None when not measured."""
        now, demand = self.clock(), self._running_or_runnable()
        span, waited, before = now - self._since, self.waited, self._demand
        self._since, self.waited, self._demand = now, 0.0, demand
        shares = []
        if self._watchers is not None:
            shares.append(1.0 - waited / span if span > 0 else 0.0)
        if demand is not None and before is not None and span > 0:
            shares.append((demand - before) / span)
        return min(max(max(shares), 0.0), 1.0) if shares else None

    def close(self) -> None:
        """Stop counting (the wrapper stays, cheap, for the next ``LoopBusy`` of the loop)."""
        if self._watchers is not None and self in self._watchers:
            self._watchers.remove(self)
        self._watchers = None
        self._demand = None
        self._schedstat = ""


class CpuWaits:
    """Seconds the process's other threads waited for a CPU, per second of wall time (``share``).

    A loop idle in ``select`` may be waiting for its own process: grpc's threads read the sockets and hand
    it the messages, and while they wait for a CPU that a busy machine does not give them the loop looks
    as if it had room, and the values age on this host. Read from Linux ``/proc/self/task/*/schedstat``
    (the second field: nanoseconds runnable but not running); None where the kernel does not say. Threads
    waiting at once each count, so the figure can pass 1; a thread that ended since the last call is not
    counted (its entry is gone): grpc's threads live as long as their channels.

    Args:
        clock: seconds, monotonic (tests may count something else).
        tasks: the process's task folder (tests may give another).
        skip: the thread left out (default: the calling one, the loop's, which ``LoopBusy`` counts).
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        tasks: str = "/proc/self/task",
        skip: int | None = None,
    ) -> None:
        self.clock, self.tasks = clock, tasks
        self.skip = str(threading.get_native_id() if skip is None else skip)
        self._since = clock()
        self._waited = self._read()

    def _read(self) -> dict[str, int] | None:
        """Each thread's nanoseconds waited for a CPU so far, or None when the kernel does not say."""
        try:
            threads = os.listdir(self.tasks)
        except OSError:
            return None
        waited: dict[str, int] = {}
        for tid in threads:
            if tid == self.skip:
                continue
            try:
                with open(f"{self.tasks}/{tid}/schedstat") as f:
                    waited[tid] = int(f.read().split()[1])
            except (OSError, ValueError, IndexError):
                continue  # a thread that ended between the listing and the read
        return waited

    def share(self) -> float | None:
        """The other threads' seconds waited for a CPU per second since the last call (a thread started
        since counts all of its wait), or None when not measured."""
        now, waited = self.clock(), self._read()
        span, before = now - self._since, self._waited
        self._since, self._waited = now, waited
        if waited is None or before is None or span <= 0:
            return None
        total = sum(ns - before.get(tid, 0) for tid, ns in waited.items())
        return max(total, 0) / 1e9 / span
