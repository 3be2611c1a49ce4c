"""Build ``truth.json`` (``spanwatch.sim.truth.Truth``) from a run: the scenario, the model and its steps."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from spanwatch.sim.layout import Layout, component_name, interface_name
from spanwatch.sim.scenario import (
    Burst,
    ComputeStall,
    Congestion,
    Incast,
    OpticalDegradation,
    Scenario,
    WaveDown,
)
from spanwatch.sim.scenario import Episode as ScenarioEpisode
from spanwatch.sim.training import StepRecord, TrainingJob
from spanwatch.sim.truth import CAUSES, Causes, Episode, Job, Link, NetworkSeconds, Step, Truth, rfc3339
from spanwatch.sim.witness import Witness

AFFECTS_S = 1e-3  # an episode slowed the job if a step it overlaps lost more than this to it
SETTLE_S = 1.0  # queues drain and rates recover after an episode ends: its steps run this much longer
LOG_FILES = {"jsonl": "steps.jsonl", "megatron": "megatron.log", "torchtitan": "torchtitan.log"}
# The fabric's cause rows (fabric.CAUSE_NAMES order) -> the truth's names.
_ROWS = ("lost_capacity", "pause", "loss_recovery", "queueing", "reroute")


class Model(Protocol):
    lay: Layout
    job: TrainingJob
    witness: Witness


def _r(x: float) -> float:
    return round(float(x), 9)


def build_truth(s: Scenario, model: Model, records: list[StepRecord], t0: float) -> Truth:
    """The truth of a run that started at epoch ``t0`` (switches' clock) and completed ``records``."""
    lay, job = model.lay, model.job
    links = _links(s, lay, job)
    used = [lay.names[i] for i in np.flatnonzero(lay.job_link)]
    steps = [row for r in records for row in _rows(s, r, used, t0)]
    episodes = [
        _episode(s, lay, e, records, t0, shown)
        for e, shown in zip(s.episodes, model.witness.shown(), strict=True)
    ]
    return Truth(
        scenario=s.name,
        seed=s.seed,
        start_time=rfc3339(t0),
        duration_seconds=s.duration,
        job=Job(
            parallelism=s.job.parallelism,
            ranks=s.ranks,
            ranks_per_site=s.job.ranks_per_site,
            traffic_class=s.job.traffic_class,
            background_class=s.background_class,
            links=used,
            phases_per_sync=job.phases,
            sync_every=job.sync_every,
            clock_skew_seconds=s.job.clock_skew,
            log_format=s.job.log.format,
            log_every=s.job.log.every,
            log_file=LOG_FILES[s.job.log.format],
        ),
        links=links,
        episodes=episodes,
        steps=steps,
    )


def _links(s: Scenario, lay: Layout, job: TrainingJob) -> dict[str, Link]:
    out = {}
    for li, link in enumerate(s.links):
        devices = [d.name for d in lay.devices if d.link == link.name]
        cap = link.waves * link.wave_gbps * 1e9 / 8
        one_way = float(lay.one_way[lay.offsets[li]])
        per_step = float(job.link_bytes[li]) * job.phases
        out[link.name] = Link(
            name=link.name,
            between=list(link.between),
            devices=devices,
            interfaces=[f"{d}/{interface_name(w)}" for d in devices for w in range(link.waves)],
            distance_km=link.distance_km,
            waves=link.waves,
            wave_gbps=link.wave_gbps,
            buffer=link.buffer_name,
            buffer_bytes=link.buffer_bytes,
            lossless=link.lossless,
            optics=link.optics,
            vendor={"switch": link.vendor.switch, "optics": link.vendor.optics},
            one_way_delay_seconds=_r(one_way),
            round_trip_seconds=_r(2 * one_way),
            capacity_bytes_per_second=cap,
            job_bytes_per_step=per_step,
            serialization_seconds=_r(per_step / cap),
            steady_seconds=_r(float(job.clean_link[li]) * job.phases),
        )
    return out


def _rows(s: Scenario, r: StepRecord, used: list[str], t0: float) -> list[Step]:
    skew = s.job.clock_skew
    comm = r.end_s - r.comm_start_s
    names = [link.name for link in s.links]
    by_link = {name: _r(r.by_link[names.index(name)]) for name in used}
    causes = Causes(**{name: _r(r.by_cause[i]) for i, name in enumerate(_ROWS)})
    network = NetworkSeconds(total=_r(r.network_s), by_link=by_link, by_cause=causes)
    clean = _r(r.clean_s if comm > 0 else 0.0)
    rows = []
    for rank in range(s.ranks):
        compute = float(r.compute_s[rank])
        rows.append(
            Step(
                step=r.step + 1,
                rank=rank,
                site=s.sites[rank // s.job.ranks_per_site],
                start_time=rfc3339(t0 + r.start_s + skew),
                end_time=rfc3339(t0 + r.end_s + skew),
                compute_seconds=_r(compute),
                wait_seconds=_r(max(0.0, r.comm_start_s - r.start_s - compute)),
                communication_seconds=clean,
                steady_seconds=clean,
                network_seconds=network,
                checkpoint=r.checkpoint,
            )
        )
    return rows


def _where(s: Scenario, lay: Layout, e: ScenarioEpisode) -> tuple[list[str], list[str], list[str], list[str]]:
    """(devices, interfaces, components, queues) an episode touches."""
    if isinstance(e, ComputeStall):
        return [], [], [], []
    li = lay.link_index(e.link)
    near, far = lay.devices[2 * li], lay.devices[2 * li + 1]
    every = range(near.waves)
    if isinstance(e, Congestion | Burst):
        tc = s.traffic_class(e)
        ifaces = [f"{near.name}/{interface_name(w)}" for w in every]
        return [near.name], ifaces, [], [f"{i}/{tc}" for i in ifaces]
    if isinstance(e, Incast):
        tc = s.traffic_class(e)
        ifaces = [f"{d.name}/{interface_name(w)}" for d in (near, far) for w in every]
        return [near.name, far.name], ifaces, [], [f"{near.name}/{interface_name(w)}/{tc}" for w in every]
    w = e.wave - 1
    ends = (far,) if isinstance(e, OpticalDegradation) else (near, far)
    return (
        [d.name for d in ends],
        [f"{d.name}/{interface_name(w)}" for d in ends],
        [f"{d.name}/{component_name(w)}" for d in ends],
        [],
    )


def _episode(
    s: Scenario, lay: Layout, e: ScenarioEpisode, records: list[StepRecord], t0: float, shown: bool | None
) -> Episode:
    devices, interfaces, components, queues = _where(s, lay, e)
    params = {
        k: v
        for k, v in e.model_dump().items()
        if k not in ("kind", "start", "duration", "link", "wave", "traffic_class", "ranks")
    }
    overlapping = [r for r in records if r.start_s < e.end + SETTLE_S and r.end_s > e.start]
    if isinstance(e, ComputeStall):
        affects = any(r.start_s < e.end and r.comm_start_s > e.start for r in overlapping)
    elif isinstance(e, Congestion | Burst | Incast) and s.traffic_class(e) != s.job.traffic_class:
        affects = False  # another class: served after the job's, never ahead of it
    else:
        li = lay.link_index(e.link)
        affects = any(r.by_link[li] > AFFECTS_S for r in overlapping)
    return Episode(
        kind=e.kind,
        start=e.start,
        duration=e.duration,
        start_time=rfc3339(t0 + e.start),
        end_time=rfc3339(t0 + e.end),
        link=None if isinstance(e, ComputeStall) else e.link,
        wave=e.wave if isinstance(e, OpticalDegradation | WaveDown) else None,
        traffic_class=s.traffic_class(e) if isinstance(e, Congestion | Burst | Incast) else None,
        params=params,
        devices=devices,
        interfaces=interfaces,
        components=components,
        queues=queues,
        ranks=list(e.ranks) if isinstance(e, ComputeStall) else [],
        affects_job=affects,
        shown=shown,
    )


__all__ = ["CAUSES", "LOG_FILES", "build_truth"]
