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
"""

from __future__ import annotations

import asyncio
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
