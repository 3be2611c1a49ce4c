"""Rate-limited log lines: one line per key per window, with how many were suppressed meanwhile.

A hostile peer can trigger the same error thousands of times a second (178 MB of accept errors in a
minute, issue 16); the counter metrics carry the volume, the log only needs to say it is happening.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable

_MAX_KEYS = 10_000  # keys are device/source/reason tuples; forget them all rather than grow unbounded


class RateLimitedLog:
    """Emits at most one record per key every ``window`` seconds.

    Args:
        logger: where the lines go.
        window: seconds between two lines of the same key.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self, logger: logging.Logger, window: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger = logger
        self.window = window
        self.clock = clock
        self._last: dict[Hashable, float] = {}
        self._suppressed: dict[Hashable, int] = {}

    def log(self, level: int, key: Hashable, msg: str, *args: object) -> bool:
        """Log ``msg % args`` unless ``key`` was logged within the window.

        Returns:
            whether the line was written.
        """
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.window:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        if len(self._last) >= _MAX_KEYS:
            self._last.clear()
            self._suppressed.clear()
        self._last[key] = now
        skipped = self._suppressed.pop(key, 0)
        if skipped:
            msg += f" ({skipped} similar lines suppressed)"
        self.logger.log(level, msg, *args)
        return True
