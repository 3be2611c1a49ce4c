"""Time-related state of one gNMI stream: redial backoff and the device clock offset estimate.

``Backoff``: capped exponential backoff with full-range jitter in [delay/2, delay] (so a fleet that lost
its collector at once does not redial in lockstep), reset once a stream has proved healthy.

``ClockOffset``: the device clock minus the collector clock. Each notification gives
``timestamp - received = offset - delay``, where delay (device stamping to collector receipt, including
the time a device holds a sample before sending it) is never negative. The largest value over a sliding
window is therefore the least-delayed observation and the best estimate of the offset, in the spirit of
NTP's minimum-delay filter; one slow notification never moves it, and a clock step shows within one window.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field


@dataclass(slots=True)
class Backoff:
    """Capped, jittered exponential backoff.

    Attributes:
        initial: the first delay (seconds).
        cap: the largest delay (seconds).
        factor: growth per failed attempt.
        rng: the source of jitter (inject a seeded ``random.Random`` in tests).
    """

    initial: float = 1.0
    cap: float = 60.0
    factor: float = 2.0
    rng: random.Random = field(default_factory=random.Random)
    attempt: int = 0

    def next(self) -> float:
        """The delay before the next redial; each call counts one more failure.

        Returns:
            seconds, within ``[d/2, d]`` where ``d = min(cap, initial * factor**attempt)``.
        """
        try:
            ceiling = min(self.cap, self.initial * self.factor**self.attempt)
        except OverflowError:  # long past the cap
            ceiling = self.cap
        self.attempt = min(self.attempt + 1, 100_000)
        return ceiling * (0.5 + 0.5 * self.rng.random())

    def reset(self) -> None:
        """Forget past failures (the stream delivered data for long enough)."""
        self.attempt = 0


class ClockOffset:
    """Sliding-window maximum of ``notification timestamp - receive time`` (see the module docstring)."""

    def __init__(self, window_s: float = 60.0, buckets: int = 60) -> None:
        self.window_ns = int(window_s * 1e9)
        self.bucket_ns = max(self.window_ns // buckets, 1)
        self._q: deque[tuple[int, int]] = deque()  # (received_ns, ts - received), values decreasing

    def observe(self, timestamp_ns: int, received_ns: int) -> float:
        """Fold one notification in.

        Args:
            timestamp_ns: the notification's timestamp (device clock).
            received_ns: when the collector received it (collector clock).

        Returns:
            the current offset estimate, seconds (positive: the device clock is ahead).
        """
        d = timestamp_ns - received_ns
        q = self._q
        while q and q[-1][1] <= d:  # monotonic deque: the front is the window maximum
            q.pop()
        if not q or received_ns - q[-1][0] >= self.bucket_ns:
            # At most one smaller entry per bucket: bounded memory at any notification rate, at the cost
            # of a smaller observation expiring up to one bucket early.
            q.append((received_ns, d))
        horizon = received_ns - self.window_ns
        while q[0][0] < horizon:
            q.popleft()
        return q[0][1] / 1e9

    @property
    def estimate(self) -> float | None:
        """The current estimate in seconds, or None before the first observation."""
        return self._q[0][1] / 1e9 if self._q else None
