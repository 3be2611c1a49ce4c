"""The SNMP walk seam: a ``Walker`` does GET and GETBULK; ``walk`` turns GETBULKs into bounded table walks.

The real walkers (our own v2c and v3 over asyncio UDP, and pysnmp for what our USM lacks) are in
``transport``; ``MapWalker`` here is a map-backed fake for unit tests.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from collector.errors import InvalidResponse
from collector.sources.snmp.ber import (
    EXCEPTIONS,
    Oid,
    VarBind,
)

TOO_BIG = 1


class AgentError(InvalidResponse):
    """The agent answered with a non-zero error-status (genErr, noAccess...) for one request."""


class Walker(Protocol):
    """What the SNMP source needs from a transport."""

    async def get(self, oids: Sequence[Oid]) -> list[VarBind]:
        """GET ``oids``; exception values (noSuchObject...) come back with their tag.

        Raises:
            SourceError: the request failed.
        """
        ...

    async def bulk(self, oids: Sequence[Oid], max_repetitions: int) -> list[VarBind]:
        """One GETBULK (non-repeaters 0); the varbinds in wire order (row-major).

        Raises:
            SourceError: the request failed.
        """
        ...

    async def close(self) -> None: ...


START_VARBINDS = 1024  # varbinds asked per request at first: about 30 KB of counters, under 64 KB UDP


@dataclass(slots=True)
class Budget:
    """How much one agent is asked per GETBULK, adapted and remembered per target (issue 18).

    ``rows`` is GETBULK's max-repetitions per column (the config's ``max_repetitions``, as snmp_exporter
    reads it); ``varbinds`` caps rows x columns per request. It starts high, halves when the agent
    answers tooBig or a request times out, and creeps back after clean polls: a slow or small-buffered
    agent settles where it answers, while a table of 20 columns no longer costs one request per row.
    """

    rows: int = 25
    varbinds: int = START_VARBINDS
    ceiling: int = START_VARBINDS
    shrunk: bool = False  # since the last ``settle``

    def size(self, columns: int) -> int:
        """max-repetitions for a request over ``columns`` columns."""
        return max(1, min(self.rows, self.varbinds // max(columns, 1)))

    def shrink(self) -> None:
        """The agent answered tooBig or a request timed out: ask for half as much from now on."""
        self.varbinds = max(1, self.varbinds // 2)
        self.shrunk = True

    def settle(self) -> None:
        """A poll ended: after a clean one, grow back by 1/8 of the ceiling (never past it)."""
        if not self.shrunk:
            self.varbinds = min(self.ceiling, self.varbinds + max(1, self.ceiling // 8))
        self.shrunk = False


def parse_oid(text: str) -> Oid:
    """``"1.3.6.1"`` (a leading dot is allowed) -> ``(1, 3, 6, 1)``.

    Raises:
        ValueError: not a dotted numeric OID.
    """
    return tuple(int(part) for part in text.strip().lstrip(".").split("."))


async def walk(
    walker: Walker,
    roots: Sequence[Oid],
    max_repetitions: int = 25,
    max_rows: int = 100_000,
    max_requests: int = 10_000,
    max_varbinds: int = 250_000,
    budget: Budget | None = None,
) -> dict[Oid, list[VarBind]]:
    """Walk several subtrees side by side with GETBULK, bounded so no agent can make it endless.

    A column stops when its OID leaves the subtree, does not increase (a looping agent), hits
    endOfMibView, or reaches ``max_rows``; the whole walk stops after ``max_requests`` requests or
    ``max_varbinds`` rows in all (memory: an agent that always has one more row). The poll deadline
    bounds it in time.

    Args:
        walker: the transport.
        roots: subtrees (usually table columns) to walk.
        max_repetitions: without ``budget``: GETBULK repetitions per request, shared by the columns still
            active.
        max_rows: most rows kept per subtree.
        max_requests: most requests for the whole walk.
        max_varbinds: most rows kept for the whole walk.
        budget: the agent's adaptive request size (``Budget``); replaces ``max_repetitions``.

    Returns:
        for each root, the varbinds found under it, in OID order.

    Raises:
        SourceError: a request failed.
    """
    out: dict[Oid, list[VarBind]] = {r: [] for r in roots}
    cursor = {r: r for r in roots}
    active = list(dict.fromkeys(roots))
    kept = 0
    for _ in range(max_requests):
        if not active or kept >= max_varbinds:
            break
        reps = budget.size(len(active)) if budget is not None else max(1, max_repetitions // len(active))
        got = await walker.bulk([cursor[r] for r in active], reps)
        if not got:
            break
        active = _fold(got, active, cursor, out, max_rows)
        kept = sum(map(len, out.values()))
    return out


def _fold(
    got: list[VarBind],
    active: list[Oid],
    cursor: dict[Oid, Oid],
    out: dict[Oid, list[VarBind]],
    max_rows: int,
) -> list[Oid]:
    """Distribute one GETBULK answer over the columns; return the columns that continue."""
    n = len(active)
    done: set[Oid] = set()
    for i, vb in enumerate(got):
        root = active[i % n]
        if root in done:
            continue
        oid, tag = vb[0], vb[1]
        depth = len(root)
        if tag in EXCEPTIONS or oid[:depth] != root or oid <= cursor[root]:
            done.add(root)  # left the subtree, end of MIB, or a non-increasing (looping) agent
            continue
        rows = out[root]
        rows.append(vb)
        cursor[root] = oid
        if len(rows) >= max_rows:
            done.add(root)
    return [r for r in active if r not in done]


# -- v2c: own codec over asyncio UDP --------------------------------------------------------------


class MapWalker:
    """A ``Walker`` over a dict ``oid -> (tag, value)``, for unit tests and the simulator.

    Args:
        data: the agent's variables.
    """

    def __init__(self, data: Mapping[Oid, tuple[int, object]]) -> None:
        self.data = dict(data)
        self.keys = sorted(self.data)
        self.requests = 0

    def set(self, oid: Oid, tag: int, value: object) -> None:
        """Add or change one variable."""
        if oid not in self.data:
            bisect.insort(self.keys, oid)
        self.data[oid] = (tag, value)

    async def get(self, oids: Sequence[Oid]) -> list[VarBind]:
        self.requests += 1
        return [(o, *self.data.get(o, (0x80, None))) for o in oids]

    async def bulk(self, oids: Sequence[Oid], max_repetitions: int) -> list[VarBind]:
        self.requests += 1
        cursors = list(oids)
        out: list[VarBind] = []
        for _ in range(max_repetitions):
            for i, cur in enumerate(cursors):
                pos = bisect.bisect_right(self.keys, cur)
                if pos >= len(self.keys):
                    out.append((cur, 0x82, None))
                    continue
                nxt = self.keys[pos]
                cursors[i] = nxt
                out.append((nxt, *self.data[nxt]))
        return out

    async def close(self) -> None:
        return None
