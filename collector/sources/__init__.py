"""The two kinds of source (Telegraf's Input vs ServiceInput) and the narrow seam each one meets.

- ``PolledSource`` (SNMP): the scheduler calls ``poll()`` every interval under a deadline; a failure is a
  ``SourceError`` whose ``status`` becomes ``spanwatch_polls_total{status=...}``.
- ``StreamingSource`` (gNMI): ``run()`` owns a subscription for the daemon's lifetime, redials on its own,
  feeds the store and reports its own health.
"""

from __future__ import annotations

from typing import Protocol

from collector.model import Sample
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


class StreamingSource(Protocol):
    """A device that pushes updates over a long-lived stream."""

    device: str
    source: str

    async def run(self, store: Store) -> None:
        """Subscribe, feed ``store`` and redial until cancelled."""
        ...
