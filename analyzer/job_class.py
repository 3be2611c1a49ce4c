"""The job's traffic class when ``--job-traffic-class`` is not given: read from the queues of the links.

A training job across sites runs in a class of its own (RoCE's lossless class, or a dedicated queue of the
DCI's QoS policy), while other tenants' traffic stays in best effort (queue 0). So on the config's link
member interfaces (every interface without a config), the queue other than 0 that transmitted most of the
bytes that did not go to queue 0 is the job's, provided it carried at least ``DOMINANT_SHARE`` of them;
when only queue 0 carried bytes, the job is there. Anything else (no queue counters, two busy classes) is
not guessed: the analysis goes on blaming no queue, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analyzer import telemetry

QUEUE_BYTES = "dci_queue_transmit_bytes_total"
BEST_EFFORT = "0"
DOMINANT_SHARE = 0.8


@dataclass(frozen=True)
class JobClass:
    """The class the analysis blames, and where it came from.

    Attributes:
        value: the class (queue and PFC priority), or None when none is blamed.
        source: ``given`` (the option), ``inferred`` or ``unknown``.
        basis: one sentence saying how it was chosen, or why not.
    """

    value: str | None
    source: str
    basis: str

    def as_json(self) -> dict[str, str | None]:
        """As ``summary.json``'s ``job_traffic_class``."""
        return {"value": self.value, "source": self.source, "basis": self.basis}


def given(value: str) -> JobClass:
    """The class the user gave."""
    return JobClass(value, "given", "--job-traffic-class")


def archive_readings(archive: Path) -> pl.LazyFrame:
    """The archive's queue byte counters (``schemas.TELEMETRY`` rows)."""
    return telemetry.scan_archive(archive, metrics=frozenset({QUEUE_BYTES}))


def bytes_per_queue(readings: pl.LazyFrame, members: pl.DataFrame) -> pl.DataFrame:
    """Bytes each queue transmitted over the run on the link member interfaces (``queue``, ``bytes``).

    Args:
        readings: telemetry rows (the archive's, ``archive_readings``, or Prometheus'); other metrics are
            left out.
        members: ``topology.link_members`` rows; empty means every interface.
    """
    scan = readings.filter(pl.col("metric").cast(pl.String) == QUEUE_BYTES, pl.col("queue").is_not_null())
    if members.height:
        scan = scan.join(members.select("device", "interface").lazy(), on=["device", "interface"])
    per_series = scan.group_by("device", "interface", "direction", "queue").agg(
        sent=pl.col("value").max() - pl.col("value").min()
    )
    return per_series.group_by("queue").agg(bytes=pl.col("sent").sum()).sort("queue").collect()


def infer(queues: pl.DataFrame) -> JobClass:
    """The job's class from the bytes per queue (see the module docstring).

    Args:
        queues: ``queue``, ``bytes`` (``bytes_per_queue``).
    """
    busy = queues.filter(pl.col("bytes") > 0).sort("bytes", descending=True)
    if busy.height == 0:
        return JobClass(None, "unknown", f"no {QUEUE_BYTES} readings with traffic on the links' interfaces")
    others = busy.filter(pl.col("queue") != BEST_EFFORT)
    if others.height == 0:
        return JobClass(BEST_EFFORT, "inferred", "queue 0 (best effort) is the only queue that carried bytes")
    top, total = others.row(0, named=True), float(others["bytes"].sum())
    share = float(top["bytes"]) / total
    listed = ", ".join(f"queue {q}: {b / 1e12:.3g} TB" for q, b in others.iter_rows())
    if share < DOMINANT_SHARE:
        return JobClass(
            None,
            "unknown",
            f"no one class carries the traffic beside best effort ({listed}); pass --job-traffic-class",
        )
    return JobClass(
        str(top["queue"]),
        "inferred",
        f"queue {top['queue']} carried {share:.0%} of the bytes outside best effort on the links' "
        f"interfaces ({listed})",
    )
