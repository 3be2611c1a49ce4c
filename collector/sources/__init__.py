"""The two kinds of source (Telegraf's Input vs ServiceInput) and the narrow seam each one meets.

- ``PolledSource`` (SNMP): the scheduler calls ``poll()`` every interval under a deadline; a failure is a
  ``SourceError`` whose ``status`` becomes ``spanwatch_polls_total{status=...}``.
- ``StreamingSource`` (gNMI): ``run()`` owns a subscription for the daemon's lifetime, redials on its own,
  feeds the store and reports its own health.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from collector.model import Labels, Sample
from collector.store import Store


class PolledSource(Protocol):
    """A device read by polling."""

    device: str
    source: str

    async def poll(self) -> list[Sample]:
        """Read every configured table once.

        Raises:
            SourceError: the poll failed; its ``status`` says how.
        """
        ...

    async def close(self) -> None: ...


@runtime_checkable
class PartialSource(Protocol):
    """A polled source that can hand over what a poll completed before its deadline cut it off."""

    def salvage(self) -> tuple[list[Sample], str | None]:
        """The samples of the parts (modules) the current poll completed, and the part that was running."""
        ...


@runtime_checkable
class CountingSource(Protocol):
    """A polled source with self-metric counters of its own (SNMP: dropped datagrams)."""

    def take_counts(self) -> list[tuple[str, Labels, int]]:
        """Increments since the last call: ``(catalogue name, labels, amount)``."""
        ...


class StreamingSource(Protocol):
    """A device that pushes updates over a long-lived stream."""

    device: str
    source: str

    async def run(self, store: Store) -> None:
        """Subscribe, feed ``store`` and redial until cancelled."""
        ...
