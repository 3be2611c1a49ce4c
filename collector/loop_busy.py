"""How much of the wall time an asyncio event loop spent working rather than waiting for I/O.

A loop that waited in ``select`` for part of a period read every stream as soon as it had data: whatever
lateness its values show was made upstream (the device, the network, a starting connection), not by a
process that could not keep up. A loop that never waited had more work than time. Measured in wall time,
this also counts the CPU a busy machine does not give the process, which is what staleness is made of.

``LoopBusy`` wraps the loop's selector (``loop._selector``, as ``collector.grpc_wakeups`` reads it): two
clock reads per turn of the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

WATCHERS = "loop_busy_watchers"  # the attribute of our wrapper that lists the LoopBusy fed by it


class LoopBusy:
    """The share of wall time ``loop`` spent outside ``select``, per call of ``share``; ``close`` stops.

    Args:
        loop: the running loop (a selector event loop; on another kind ``share`` returns None).
        clock: seconds, monotonic (tests may count something else).
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.clock = clock
        self.waited = 0.0  # seconds spent in select since the last ``share``
        self._since = clock()
        self._watchers = self._wrap(getattr(loop, "_selector", None))

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
        now = self.clock()
        span, waited = now - self._since, self.waited
        self._since, self.waited = now, 0.0
        if self._watchers is None or span <= 0:
            return None
        return min(max(1.0 - waited / span, 0.0), 1.0)

    def close(self) -> None:
        """Stop counting (the wrapper stays, cheap, for the next ``LoopBusy`` of the loop)."""
        if self._watchers is not None and self in self._watchers:
            self._watchers.remove(self)
        self._watchers = None
