"""The helper a training loop uses to write the plain step log spanwatch reads (JSON lines).

Two lines in any training loop::

    with StepLog("steps-rank0.jsonl", rank=0) as log:
        for n, batch in enumerate(loader):
            with log.step(n):
                train_step(batch)

Each step becomes ``{"step": n, "start": "...Z", "end": "...Z", "rank": 0}`` with RFC 3339 UTC times from
the wall clock (so steps line up with the network telemetry), flushed at once so a crash loses nothing
already written. The clock is injectable for tests.

A loop that also times its collectives gives the analyzer stronger evidence than the step's duration (a
slow step whose communication did not grow was not slowed by the network)::

            with log.step(n):
                loss = forward_backward(batch)
                with log.collective():
                    all_reduce(gradients)

The step's line then carries ``comm_seconds``, the time spent inside ``collective()`` blocks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO


def _now() -> datetime:
    return datetime.now(UTC)


def _rfc3339(stamp: datetime) -> str:
    return stamp.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class StepLog:
    """Append one JSON line per training step to a file.

    Args:
        path: the file to append to (created if missing).
        rank: this process's rank, written on every line.
        clock: returns the current time as an aware datetime; defaults to the UTC wall clock.
    """

    def __init__(self, path: str | Path, rank: int = 0, clock: Callable[[], datetime] = _now) -> None:
        self.path = Path(path)
        self.rank = rank
        self._clock = clock
        self._file: IO[str] | None = None
        self._in_step = False
        self._communication: float | None = None  # the open step's collectives' seconds so far

    def __enter__(self) -> StepLog:
        self._file = self.path.open("a", encoding="utf-8")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def record(
        self, step: int, start: datetime, end: datetime, communication_seconds: float | None = None
    ) -> None:
        """Write one step whose times were measured elsewhere.

        Args:
            step: the step number.
            start: when it began (aware datetime).
            end: when it ended.
            communication_seconds: the step's time in collectives, when timed.

        Raises:
            RuntimeError: the log is not open (use it as a context manager).
        """
        if self._file is None:
            raise RuntimeError("StepLog is not open; use it as a context manager")
        line: dict[str, object] = {
            "step": step,
            "start": _rfc3339(start),
            "end": _rfc3339(end),
            "rank": self.rank,
        }
        if communication_seconds is not None:
            line["comm_seconds"] = round(communication_seconds, 6)
        self._file.write(json.dumps(line) + "\n")
        self._file.flush()

    @contextmanager
    def step(self, step: int) -> Iterator[None]:
        """Time the body of the ``with`` as one step and write it, even if the body raises.

        Args:
            step: the step number.

        Yields:
            Nothing; the step is written on exit.

        Raises:
            RuntimeError: the log is not open.
        """
        start = self._clock()
        self._in_step, self._communication = True, None
        try:
            yield
        finally:
            communication, self._in_step, self._communication = self._communication, False, None
            self.record(step, start, self._clock(), communication)

    @contextmanager
    def collective(self) -> Iterator[None]:
        """Time the body of the ``with`` as the step's communication (added up over the step's blocks).

        Raises:
            RuntimeError: used outside ``step()``.
        """
        if not self._in_step:
            raise RuntimeError("collective() times part of a step: use it inside step()")
        start = self._clock()
        try:
            yield
        finally:
            elapsed = (self._clock() - start).total_seconds()
            self._communication = (self._communication or 0.0) + elapsed
