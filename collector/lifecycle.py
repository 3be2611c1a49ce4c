"""Signals, as the daemon and the worker supervisor both handle them (uvicorn's shape).

The first SIGTERM or SIGINT asks for a graceful stop; a second forces the exit at once, without the final
flush; SIGHUP runs a reload in the background (a reload that is still running when the process stops is
awaited or cancelled by its owner, which reads ``reloads``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Signals:
    """Stop, force and reload on signals.

    Args:
        stop: begins a graceful stop.
        reload: reloads the config; True when the new one was taken.
        force: last words before a forced exit (kill children, say what is lost).
    """

    def __init__(
        self,
        stop: Callable[[], None],
        reload: Callable[[], Awaitable[bool]],
        force: Callable[[], None] = lambda: None,
    ) -> None:
        self.stop, self.reload, self.force = stop, reload, force
        self.received = 0
        self.reloads: set[asyncio.Task[bool]] = set()

    def install(self) -> None:
        """Handle the signals on the running loop (quietly nothing outside the main thread)."""
        loop = asyncio.get_running_loop()
        handlers = {
            signal.SIGTERM: self._on_stop,
            signal.SIGINT: self._on_stop,
            signal.SIGHUP: self.reload_soon,
        }
        for sig, handler in handlers.items():
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
                loop.add_signal_handler(sig, handler)

    def reload_soon(self) -> None:
        """Reload in a background task."""
        task = asyncio.ensure_future(self.reload())
        self.reloads.add(task)
        task.add_done_callback(self.reloads.discard)

    def _on_stop(self) -> None:
        self.received += 1
        if self.received == 1:
            log.info("stop requested; send the signal again to force")
            self.stop()
            return
        log.warning("second stop signal: exiting without the final flush")
        self.force()
        os._exit(1)


CANCEL_GRACE_SECONDS = 1.0
CANCEL_TRIES = 10


async def cancel_all(tasks: list[asyncio.Task[None]], what: str) -> None:
    """Cancel ``tasks`` and wait until they end, cancelling again those that ignored it.

    On Python 3.11 ``asyncio.wait_for`` (in this code's libraries) returns a result that lands in the same
    loop step as the cancellation, and the cancellation is lost: a task awaited after one ``cancel`` may
    run on for ever (it stalled the demo's shutdown under load). Each try gives the tasks
    ``CANCEL_GRACE_SECONDS``; after ``CANCEL_TRIES`` the ones still running are left, and named.
    """
    pending = {t for t in tasks if not t.done()}
    for _ in range(CANCEL_TRIES):
        if not pending:
            break
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=CANCEL_GRACE_SECONDS)
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: an ended task's error was already logged by its owner
    if pending:
        log.error(
            "%s: %d task(s) ignored %d cancellations: %s",
            what,
            len(pending),
            CANCEL_TRIES,
            ", ".join(sorted(t.get_name() for t in pending)),
        )
