"""The job's traffic class read from the bytes per queue when it is not given (``analyzer.job_class``)."""

from __future__ import annotations

import polars as pl

from analyzer.job_class import infer


def _queues(**sent: float) -> pl.DataFrame:
    return pl.DataFrame({"queue": [q.removeprefix("q") for q in sent], "bytes": list(sent.values())})


def test_the_class_beside_best_effort_that_carries_the_bytes_is_the_jobs() -> None:
    job = infer(_queues(q0=9e12, q3=2e12, q5=1e10))
    assert (job.value, job.source) == ("3", "inferred")
    assert "queue 3 carried 100% of the bytes outside best effort" in job.basis


def test_best_effort_alone_is_the_jobs() -> None:
    job = infer(_queues(q0=5e12, q3=0.0))
    assert (job.value, job.source) == ("0", "inferred")


def test_two_busy_classes_are_not_guessed() -> None:
    job = infer(_queues(q0=1e12, q3=2e12, q5=1.5e12))
    assert job.value is None and job.source == "unknown"
    assert "queue 3: 2 TB, queue 5: 1.5 TB" in job.basis and "--job-traffic-class" in job.basis


def test_no_queue_counters_are_not_guessed() -> None:
    job = infer(pl.DataFrame(schema={"queue": pl.String(), "bytes": pl.Float64()}))
    assert job.value is None and "no dci_queue_transmit_bytes_total" in job.basis


def test_bytes_are_counted_on_the_links_member_interfaces_only() -> None:
    from analyzer.job_class import QUEUE_BYTES, bytes_per_queue

    rows = [
        # (interface, queue, counter readings): e1 is the link's, e9 (a host port, busy in queue 5) is not
        ("e1", "0", (0.0, 9e12)),
        ("e1", "3", (1e12, 3e12)),
        ("e9", "5", (0.0, 8e12)),
    ]
    readings = pl.DataFrame(
        [
            {"device": "d", "interface": i, "queue": q, "direction": None, "metric": QUEUE_BYTES, "value": v}
            for i, q, values in rows
            for v in values
        ]
    ).lazy()
    members = pl.DataFrame({"link": ["ab"], "device": ["d"], "interface": ["e1"]})
    sent = bytes_per_queue(readings, members)
    assert dict(zip(sent["queue"].to_list(), sent["bytes"].to_list(), strict=True)) == {"0": 9e12, "3": 2e12}
    assert infer(sent).value == "3"
