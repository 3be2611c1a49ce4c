"""The heap is frozen out of the cyclic collector's way once the store has filled (issue 18, p99 polls)."""

from __future__ import annotations

import gc

from collector.process import HeapFreezer


def test_freezes_once_the_store_settles_and_again_only_after_it_doubled() -> None:
    heap = HeapFreezer()
    try:
        assert [heap.tick(n) for n in (0, 0, 500, 900, 1000)] == [False] * 5  # empty, then still growing
        assert heap.tick(1000)  # held still for a tick: frozen
        assert gc.get_freeze_count() > 0
        assert [heap.tick(n) for n in (1000, 1500, 1500, 1900)] == [False] * 4  # not doubled yet
        assert [heap.tick(n) for n in (2000, 2000)] == [False, True]
    finally:
        gc.unfreeze()
