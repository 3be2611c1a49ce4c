"""Another sender in the job's class, read from bytes the whole job cannot have sent (``analyzer.foreign``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from analyzer import foreign, physics, schemas

T0 = datetime(2026, 12, 1, tzinfo=UTC)
STEP_BYTES = 1e9  # the job's bytes per step, each way, over all its links
FASTEST = 0.5  # seconds: at most 2 steps a second, so a 1 s reading holds at most 2 + 2 steps' bytes


def _sent(per_second: list[float], device: str = "a1") -> pl.DataFrame:
    """One link end's ``sent`` readings, one a second, each adding ``per_second[i]`` bytes."""
    return pl.DataFrame(
        {
            "link": "l1",
            "device": device,
            "quantity": "sent",
            "time": [T0 + timedelta(seconds=s) for s in range(len(per_second))],
            "amount": per_second,
        },
        schema=physics.READINGS,
    )


def test_bytes_past_what_the_whole_job_can_send_are_another_senders() -> None:
    # 4e9 bytes in a second is the most the job can send (2 steps a second, and one step on either side);
    # 9e9 for 5 s is someone else's, whatever the job did beside it.
    quiet = [1e9] * 40
    assert foreign.foreign_events(_sent([4e9] * 40), STEP_BYTES, FASTEST, "3").height == 0
    tenant = quiet[:20] + [9e9] * 5 + quiet[25:]
    found = foreign.foreign_events(_sent(tenant), STEP_BYTES, FASTEST, "3")
    assert found.select("kind", "link", "device", "queue", "samples").rows() == [
        ("burst", "l1", "a1", "3", 5)
    ]
    assert found["start_time"].item() == T0 + timedelta(seconds=19)
    assert found["end_time"].item() == T0 + timedelta(seconds=24)
    assert found["worst"].item() == pytest.approx(9e9)


def test_the_ceiling_grows_with_the_interval_a_reading_covers() -> None:
    # A reading 10 s after the previous one (a missed poll) may hold 22 steps' bytes.
    frame = _sent([1e9, 1e9]).with_columns(time=pl.Series([T0, T0 + timedelta(seconds=10)]))
    assert (
        foreign.foreign_events(frame.with_columns(amount=pl.lit(21e9)), STEP_BYTES, FASTEST, "3").height == 0
    )
    assert (
        foreign.foreign_events(frame.with_columns(amount=pl.lit(23e9)), STEP_BYTES, FASTEST, "3").height == 1
    )


def test_foreign_events_join_the_events_in_order_and_need_the_jobs_figures() -> None:
    tenant = [1e9] * 10 + [9e9] * 3 + [1e9] * 10
    existing = schemas.conform_lazy(
        schemas.EVENTS,
        pl.DataFrame(
            {
                "event_id": [0, 1],
                "kind": ["ecn", "drops"],
                "link": ["l1", "l1"],
                "start_time": [T0 + timedelta(seconds=2), T0 + timedelta(seconds=15)],
                "end_time": [T0 + timedelta(seconds=4), T0 + timedelta(seconds=16)],
            }
        ).lazy(),
    ).collect()
    steps = pl.DataFrame({"duration_seconds": [0.7, FASTEST, 0.6, 0.0]})
    both = foreign.with_foreign(existing, _sent(tenant), steps, STEP_BYTES, "3")
    assert both.select("event_id", "kind").rows() == [(0, "ecn"), (1, "burst"), (2, "drops")]
    assert foreign.with_foreign(existing, _sent(tenant), steps, None, "3").equals(existing)
    assert foreign.with_foreign(existing, _sent(tenant), steps, STEP_BYTES, None).equals(existing)
    assert foreign.with_foreign(existing, _sent(tenant), steps.clear(), STEP_BYTES, "3").equals(existing)
    unreadable = pl.DataFrame({"duration_seconds": [float("nan"), float("inf"), -1.0]})
    assert foreign.fastest_step_seconds(unreadable) is None
    assert foreign.with_foreign(existing, _sent(tenant), unreadable, STEP_BYTES, "3").equals(existing)


def test_bytes_past_the_ceiling_while_the_link_loses_are_the_jobs_resending() -> None:
    # A failing wave corrupts frames from 8 to 14 s: what the class carried past the ceiling then may be
    # the job's own bytes sent again (go-back-N resends everything after a loss).
    tenant = [1e9] * 10 + [9e9] * 3 + [1e9] * 10
    steps = pl.DataFrame({"duration_seconds": [FASTEST]})
    lossy = schemas.conform_lazy(
        schemas.EVENTS,
        pl.DataFrame(
            {
                "event_id": [0],
                "kind": ["ber"],
                "link": ["l1"],
                "start_time": [T0 + timedelta(seconds=8)],
                "end_time": [T0 + timedelta(seconds=14)],
            }
        ).lazy(),
    ).collect()
    assert foreign.with_foreign(lossy, _sent(tenant), steps, STEP_BYTES, "3")["kind"].to_list() == ["ber"]
    elsewhere = lossy.with_columns(link=pl.lit("l2"))
    assert foreign.with_foreign(elsewhere, _sent(tenant), steps, STEP_BYTES, "3")["kind"].to_list() == [
        "ber",
        "burst",
    ]
