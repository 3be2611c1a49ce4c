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
