"""An async service on its own event loop in a thread, as the daemon runs it on its loop.

Subclass ``LoopThread`` and write ``main(halt)``: set ``self.ready`` once the service is up, then run
until ``halt`` is set. The test calls ``start()``, ``wait_ready()`` and, when done, ``stop()``.
"""

from __future__ import annotations

import asyncio
import threading


class LoopThread(threading.Thread):
    """Runs ``main`` on a fresh event loop; an exception it raises is kept in ``error`` for the test."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(daemon=True, name=name)
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._halt: asyncio.Event | None = None

    async def main(self, halt: asyncio.Event) -> None:
        """The service: set ``self.ready`` once it is up, return after ``halt`` is set."""
        raise NotImplementedError

    def run(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as e:  # surfaced to the test through ``error``
            self.error = e
            self.ready.set()

    async def _run(self) -> None:
        self._loop, self._halt = asyncio.get_running_loop(), asyncio.Event()
        await self.main(self._halt)

    def wait_ready(self, seconds: float = 10) -> None:
        """Wait for ``main`` to set ``ready``; raise what it raised, if it failed."""
        assert self.ready.wait(seconds), f"{self.name} did not start"
        if self.error is not None:
            raise self.error

    def stop(self, seconds: float = 10) -> None:
        """Set ``halt`` on the thread's loop and join the thread."""
        if self._loop is not None and self._halt is not None:
            self._loop.call_soon_threadsafe(self._halt.set)
        self.join(seconds)
