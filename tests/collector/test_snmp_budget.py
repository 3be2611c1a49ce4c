"""Adaptive GETBULK size per agent (issue 18): rows per column, capped per request, halved and regrown."""

from __future__ import annotations

from collector.sources.snmp.ber import TAG_COUNTER64
from collector.sources.snmp.walk import Budget, MapWalker, walk

ENTRY = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1)


def _table(columns: int, rows: int) -> MapWalker:
    return MapWalker(
        {(*ENTRY, c, r): (TAG_COUNTER64, c * r) for c in range(1, columns + 1) for r in range(rows)}
    )


async def test_a_wide_table_takes_a_few_requests_not_one_per_row() -> None:
    roots = [(*ENTRY, c) for c in range(1, 21)]
    shared = _table(20, 65)
    old = await walk(shared, roots, max_repetitions=25)  # the budget split over 20 columns: 1 row each
    old_requests = shared.requests
    fresh = _table(20, 65)
    new = await walk(fresh, roots, budget=Budget(rows=25))
    assert new == old  # the same rows
    assert old_requests >= 65 and fresh.requests <= 4


def test_the_budget_halves_and_creeps_back() -> None:
    budget = Budget(rows=100, varbinds=1000, ceiling=1000)
    assert budget.size(20) == 50  # capped by varbinds / columns
    budget.shrink()
    budget.shrink()
    assert budget.size(20) == 12
    budget.settle()  # the poll that shrank it: no growth
    assert budget.varbinds == 250
    budget.settle()  # a clean poll: grows by an eighth of the ceiling
    assert budget.varbinds == 375
    for _ in range(20):
        budget.settle()
    assert budget.varbinds == 1000 and budget.size(1) == 100
