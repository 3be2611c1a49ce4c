"""``collector.lifecycle.cancel_all``: a task that swallows a cancellation is cancelled again until it ends."""

from __future__ import annotations

import asyncio

from collector import lifecycle


async def test_a_task_that_swallows_a_cancellation_still_ends(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(lifecycle, "CANCEL_GRACE_SECONDS", 0.05)
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                # As 3.11's wait_for does when an answer lands with the cancel: the loop goes on.
                swallowed += 1
                if swallowed >= 3:
                    raise

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await asyncio.wait_for(lifecycle.cancel_all([task], "test"), 5)
    assert task.cancelled() and swallowed == 3


async def test_one_that_never_ends_is_named_and_left(monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(lifecycle, "CANCEL_GRACE_SECONDS", 0.01)
    monkeypatch.setattr(lifecycle, "CANCEL_TRIES", 3)

    async def immortal() -> None:
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                continue

    task = asyncio.create_task(immortal(), name="immortal")
    await asyncio.sleep(0)
    await lifecycle.cancel_all([task], "test")
    assert not task.done()
    assert "immortal" in caplog.text
    task.get_coro().close()  # type: ignore[union-attr]
