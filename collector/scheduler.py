"""Polling: one task per polled target, each with its own phase (or random jitter), interval and deadline.

A poll's readings are stamped when they reach the store; ``spanwatch_ingest_lag_seconds`` is that time
minus the poll's start, and ``spanwatch_ingest_backlog_seconds`` how late the poll started.

A slow, dead or misconfigured target only ever delays itself: every target has its own task, every poll
runs under a deadline, and every failure becomes telemetry (``spanwatch_polls_total{status}``,
``spanwatch_target_up``) plus one log line naming the target, the step and the cause.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from collector.clock import Clock
from collector.errors import SourceError
from collector.model import Sample
from collector.sources import CountingSource, PartialSource, PolledSource
from collector.store import Store

log = logging.getLogger(__name__)
T = TypeVar("T")
CANCEL_GRACE = 0.1  # seconds a cancelled poll gets to unwind before it is cancelled again


@dataclass(frozen=True, slots=True)
class Schedule:
    """When one target is polled."""

    interval: float
    timeout: float
    jitter: float = 1.0  # the first poll waits a random share of the interval, spreading targets out
    # Or polls happen at this share of the interval on the monotonic clock (the daemon spreads targets
    # evenly with it; None: the random jitter).
    phase: float | None = None


class Poller:
    """Polls one target forever, feeding the store and its health series."""

    def __init__(
        self,
        source: PolledSource,
        store: Store,
        schedule: Schedule,
        clock: Clock,
        rng: random.Random | None = None,
    ) -> None:
        self.source = source
        self.store = store
        self.schedule = schedule
        self.clock = clock
        self.rng = rng or random.Random()
        self._health = (("device", source.device), ("source", source.source))

    async def run(self) -> None:
        """Poll every interval until cancelled; missed intervals are skipped, never bunched up."""
        s = self.schedule
        if s.phase is None:
            await self.clock.sleep(self.rng.uniform(0, s.interval * s.jitter))
        else:
            await self.clock.sleep((s.phase * s.interval - self.clock.monotonic()) % s.interval)
        next_at = self.clock.monotonic()
        while True:
            # How late this poll starts: 0 on schedule, about the overrun when the last poll ran long.
            self.store.set("spanwatch_ingest_backlog_seconds", self._health, self.clock.monotonic() - next_at)
            await self.poll_once()
            next_at += s.interval
            now = self.clock.monotonic()
            if next_at < now:  # the poll overran: realign instead of firing a burst of late polls
                next_at = now + s.interval - (now - next_at) % s.interval
            await self.clock.sleep(next_at - now)

    async def poll_once(self) -> str:
        """One poll under the deadline.

        Returns:
            the poll's status (``success`` or a failure status of ``spanwatch_polls_total``).
        """
        started = self.clock.monotonic()
        started_ns = self.clock.time_ns()
        status, cause = "success", ""
        samples: list[Sample] = []
        try:
            samples = await self._deadline(self.source.poll())
        except TimeoutError:
            status, cause = "timeout", f"no complete answer within {self.schedule.timeout:g}s"
            samples, cause = self._salvage(cause)
        except SourceError as e:
            status, cause = e.status, str(e)
        except Exception as e:  # a bug or an unforeseen device answer: report it, keep polling
            status, cause = "error", f"{type(e).__name__}: {e}"
            log.exception("poll of %s failed unexpectedly", self.source.device)
        elapsed = self.clock.monotonic() - started
        if samples:  # a whole poll, or the modules a timed-out poll completed
            done_ns = self.clock.time_ns()
            self.store.ingest(self.source.device, self.source.source, samples, done_ns)
            self.store.observe("spanwatch_ingest_lag_seconds", self._health, (done_ns - started_ns) / 1e9)
        if status == "success":
            self.store.set(
                "spanwatch_last_success_timestamp_seconds", self._health, self.clock.time_ns() / 1e9
            )
        else:
            log.warning(
                "target=%s source=%s step=poll status=%s cause=%s",
                self.source.device,
                self.source.source,
                status,
                cause,
            )
        if isinstance(self.source, CountingSource):
            for name, labels, amount in self.source.take_counts():
                self.store.inc(name, labels, amount)
        self.store.inc("spanwatch_polls_total", (*self._health, ("status", status)))
        self.store.set("spanwatch_target_up", self._health, 1.0 if status == "success" else 0.0)
        self.store.observe("spanwatch_poll_duration_seconds", self._health, elapsed)
        # Each poll's exact duration, where the histogram has only its bucket (bench_scale's exact p99).
        log.debug(
            "target=%s source=%s step=poll status=%s seconds=%.6f",
            self.source.device,
            self.source.source,
            status,
            elapsed,
        )
        return status

    def _salvage(self, cause: str) -> tuple[list[Sample], str]:
        """What a timed-out poll completed (whole modules only), and the cause naming what ran out of time."""
        if not isinstance(self.source, PartialSource):
            return [], cause
        samples, running = self.source.salvage()
        if running is not None:
            cause += f"; {running} ran out of time"
        if samples:
            cause += f"; kept {len(samples)} samples of the modules that completed"
        return samples, cause

    async def _deadline(self, work: Coroutine[Any, Any, T]) -> T:
        """Await ``work`` unless the injected clock passes the timeout first.

        Raises:
            TimeoutError: the deadline passed; the poll was cancelled.
        """
        task = asyncio.ensure_future(work)
        timer = asyncio.ensure_future(self.clock.sleep(self.schedule.timeout))
        timed_out = True
        try:
            await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
            timed_out = not task.done()
        finally:  # also when this poller is cancelled: never leave the poll running or its error unread
            timer.cancel()
            if not task.done():
                await _stop(task, self.source.device)
        if timed_out:
            raise TimeoutError
        return task.result()


_runaways: set[asyncio.Task[None]] = set()


async def _stop(task: asyncio.Future[Any], device: str) -> None:
    """Cancel ``task`` and give it ``CANCEL_GRACE`` to end; one that ignores the cancel is not waited for.

    A poll can swallow a cancellation (3.11 ``wait_for`` in a library does when an answer lands at the
    same moment); waiting for it would let the agent hold the poller past its deadline. Such a task is
    cancelled again every grace period, in the background, until it ends.
    """
    task.cancel()
    await asyncio.wait({task}, timeout=CANCEL_GRACE)
    if task.done():
        if not task.cancelled():
            task.exception()  # read, so the loop does not log it as never retrieved
        return
    log.warning("poll of %s ignored its cancellation; cancelling it again in the background", device)
    reaper = asyncio.ensure_future(_reap(task))
    _runaways.add(reaper)
    reaper.add_done_callback(_runaways.discard)


async def _reap(task: asyncio.Future[Any]) -> None:
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_GRACE)
    if not task.cancelled():
        task.exception()
