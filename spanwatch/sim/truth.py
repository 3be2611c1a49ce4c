"""The shape of ``truth.json`` (spec: scenarios.md, "Truth"): what the simulator knows, for any scorer.

Shared by the simulator (which writes it) and the scorer (which reads JSON only and may validate it with
``Truth.model_validate_json`` or against ``json_schema()``). Times are RFC 3339 UTC strings with
microseconds; ``episodes`` times are the switches' clock (the fabric's), ``steps`` times the training
hosts' clock (``clock_skew`` included). Seconds are floats. Steps count from 1, as training logs number
iterations (the job's log uses the same numbers). Names: ``interfaces`` are ``device/interface``,
``components`` ``device/component``, ``queues`` ``device/interface/queue`` (the queue is the traffic
class), waves count from 1.

A step row adds up: ``end_time - start_time = compute_seconds + wait_seconds + communication_seconds +
network_seconds.total`` (to the model's 1 ms step), where ``wait_seconds`` is the time a rank waited for
slower ranks (a straggler's compute) before the collective began. ``communication_seconds`` is what the
step's collectives take on a clean network (``steady_seconds``, propagation plus serialization, is the
part the links' steady figures account for). ``network_seconds`` is what episodes added beyond that:

- ``by_link``: per collective phase the links' lateness over the clean phase end is split as the airport
  game splits a shared runway (each increment of lateness equally among the links at least that late), so
  it sums to the phase's extra time, a link alone late carries it all, and two overlapping episodes share
  only what both delayed;
- ``by_cause``: each link's share split by what took the job's service on that link during the phase
  (``queueing`` behind other traffic in its class or a congestion-control rate cut, ``loss_recovery`` of
  dropped or corrupted frames, ``pause`` from PFC, ``reroute`` of a downed wave's bytes, ``lost_capacity``
  of waves down). ``total`` equals the sum of ``by_link`` and of ``by_cause``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CAUSES = ("queueing", "loss_recovery", "pause", "reroute", "lost_capacity")
VERSION = 1


def rfc3339(epoch_s: float) -> str:
    """Epoch seconds as RFC 3339 UTC with microseconds (``2026-12-01T10:00:00.123456Z``)."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Causes(_Model):
    queueing: float = 0.0
    loss_recovery: float = 0.0
    pause: float = 0.0
    reroute: float = 0.0
    lost_capacity: float = 0.0


class NetworkSeconds(_Model):
    total: float
    by_link: dict[str, float] = Field(description="link -> seconds; every link the job uses, 0 included")
    by_cause: Causes


class Step(_Model):
    step: int
    rank: int
    site: str
    start_time: str
    end_time: str
    compute_seconds: float = Field(description="the rank's own compute, stalls and checkpoints included")
    wait_seconds: float = Field(description="waiting for slower ranks before the collective")
    communication_seconds: float = Field(description="the step's collectives on a clean network")
    steady_seconds: float = Field(description="of which propagation and serialization")
    network_seconds: NetworkSeconds
    checkpoint: bool = False


class Episode(_Model):
    """One episode as the scenario gave it (times made absolute), plus where it shows and whether it
    slowed the job. ``wave`` counts from 1 as in the scenario."""

    kind: str
    start: float = Field(description="seconds from the run's start, as given")
    duration: float
    start_time: str
    end_time: str
    link: str | None = None
    wave: int | None = None
    traffic_class: int | None = None
    params: dict[str, Any] = Field(default_factory=dict, description="load, fan_in, osnr_drop_db, ranks")
    devices: list[str]
    interfaces: list[str] = Field(description="device/interface, e.g. dci-ab-a/Ethernet1/2")
    components: list[str] = Field(description="device/component (optical channels)")
    queues: list[str] = Field(description="device/interface/queue")
    ranks: list[int] = Field(default_factory=list)
    affects_job: bool = Field(description="a step overlapping it lost > 1 ms to it (network: on its link)")
    shown: bool | None = Field(
        default=None,
        description="the network showed it: a queue of its class above the marking threshold, a drop or a "
        "pause on its ports, its wave lit, a wave down (spanwatch.sim.witness); null for a compute stall",
    )


class Link(_Model):
    name: str
    between: list[str]
    devices: list[str]
    interfaces: list[str]
    distance_km: float
    waves: int
    wave_gbps: float
    buffer: str
    buffer_bytes: float
    lossless: bool
    optics: str
    vendor: dict[str, str]
    one_way_delay_seconds: float
    round_trip_seconds: float
    capacity_bytes_per_second: float
    job_bytes_per_step: float = Field(description="bytes the job sends each way per communicating step")
    serialization_seconds: float = Field(description="job_bytes_per_step / capacity")
    steady_seconds: float = Field(description="per communicating step: serialization + phases x round trip")


class Job(_Model):
    parallelism: Literal["data", "pipeline", "diloco"]
    ranks: int
    ranks_per_site: int
    traffic_class: int
    background_class: int
    links: list[str]
    phases_per_sync: int
    sync_every: int
    clock_skew_seconds: float
    log_format: str
    log_every: int
    log_file: str


class Truth(_Model):
    version: int = VERSION
    scenario: str
    seed: int
    start_time: str = Field(description="the run's start, switches' clock")
    duration_seconds: float
    job: Job
    links: dict[str, Link]
    episodes: list[Episode]
    steps: list[Step]


def json_schema() -> dict[str, Any]:
    """The JSON Schema of ``truth.json``."""
    return Truth.model_json_schema()


if __name__ == "__main__":  # python -m spanwatch.sim.truth > truth.schema.json
    print(json.dumps(json_schema(), indent=1))
