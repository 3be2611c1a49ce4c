"""The lab's ``truth.json`` (spec: scenarios.md, "Truth"): measured, not modelled.

A step's network cost is its extra synchronisation time (barrier wait + all-reduce) over the rank's clean
reference, never below 0. The reference is the median of the rank's clean steps of the same run (those no
episode window touches) within ``LOCAL_S`` of it, the control run's median where there are none: on a
shared 2-core host the ranks' speed drifts by tens of milliseconds a step over minutes (the control runs
first), and that drift is not the network's. The cost is assigned to the link of the network episode the
step overlaps (its window widened by ``TAIL_S`` for the queue to drain and TCP to recover) when that
episode measurably slowed the job (``affects_job``: its steps' mean extra time exceeds both 1 ms and the
control's own spread); otherwise the step's cost is 0 on every link. A step overlapping
a compute stall is 0 too: the others' wait is a straggler, not the network. Background-class traffic is
on no link's account either: the link's scheduler keeps it in its own queue, so what it costs the job here
is the host's CPU (its packets are forwarded by the same 2 cores that train), a cost no switch puts on a
training host; whether it slowed the job is still measured and said (``affects_job``), not hidden.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from spanwatch.lab.config import SITES, LabConfig
from spanwatch.lab.episodes import Action
from spanwatch.lab.topology import Plan, device

VERSION = 1
TAIL_S = 0.5
LOCAL_S = 30.0  # a step's clean reference: its rank's clean steps within this many seconds of it
AFFECTS_S = 1e-3
CAUSE = {"congestion": "queueing", "rate_cut": "lost_capacity", "link_down": "reroute"}


def rfc3339(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sync_seconds(row: dict[str, Any]) -> float:
    """A step's time in collectives: the barrier's wait plus the all-reduce."""
    return float(row["wait_seconds"]) + float(row["comm_seconds"])


def clean_figures(control: Sequence[dict[str, Any]]) -> dict[int, dict[str, float]]:
    """Per rank, the control run's medians and the spread (p90 - p50) of its synchronisation time."""
    out: dict[int, dict[str, float]] = {}
    for rank in sorted({int(r["rank"]) for r in control}):
        rows = [r for r in control if r["rank"] == rank]
        sync = sorted(sync_seconds(r) for r in rows)
        out[rank] = {
            "sync_seconds": statistics.median(sync),
            "comm_seconds": statistics.median(float(r["comm_seconds"]) for r in rows),
            "compute_seconds": statistics.median(float(r["compute_seconds"]) for r in rows),
            "step_seconds": statistics.median(float(r["end"]) - float(r["start"]) for r in rows),
            "spread_seconds": sync[int(0.9 * (len(sync) - 1))] - statistics.median(sync),
            "steps": float(len(rows)),
        }
    return out


def _overlaps(row: dict[str, Any], lo: float, hi: float) -> bool:
    return float(row["start"]) < hi and float(row["end"]) > lo


def references(
    steps: Sequence[dict[str, Any]],
    windows: Sequence[tuple[float, float]],
    control: dict[int, dict[str, float]],
) -> dict[tuple[int, int], float]:
    """Per (rank, step): the median synchronisation time of the rank's clean steps (no window overlaps
    them) within ``LOCAL_S`` of the step's start, else the control's median."""
    clean: dict[int, list[tuple[float, float]]] = {}
    for r in steps:
        if not any(_overlaps(r, lo, hi) for lo, hi in windows):
            clean.setdefault(int(r["rank"]), []).append((float(r["start"]), sync_seconds(r)))
    for rows in clean.values():
        rows.sort()
    starts = {rank: [start for start, _ in rows] for rank, rows in clean.items()}
    syncs = {rank: [sync for _, sync in rows] for rank, rows in clean.items()}
    out = {}
    for r in steps:
        rank, t = int(r["rank"]), float(r["start"])
        times = starts.get(rank, [])
        near = syncs.get(rank, [])[bisect_left(times, t - LOCAL_S) : bisect_right(times, t + LOCAL_S)]
        out[(rank, int(r["step"]))] = statistics.median(near) if near else control[rank]["sync_seconds"]
    return out


def build(
    config: LabConfig,
    plan: Plan,
    start: float,
    control: Sequence[dict[str, Any]],
    steps: Sequence[dict[str, Any]],
    actions: Sequence[Action],
    rtt_s: dict[str, float],
    bytes_per_step: dict[str, float],
    netem: bool,
    log_file: str,
) -> dict[str, Any]:
    """``truth.json`` as a dict.

    Args:
        config: the lab file.
        plan: its namespaces and links.
        start: the run's start (epoch s, the hosts' clock: one machine, one clock).
        control: the control run's step rows; steps: the run's (as the job wrote them).
        actions: the episodes as they ran (``started``/``ended`` set).
        rtt_s: per link, the measured round trip of a pinned flow.
        bytes_per_step: per link, the job's bytes per step in its data direction (control run's counters).
        netem: whether the links carry their distance's delay.
        log_file: the step log's name in the output folder.
    """
    clean = clean_figures(control)
    # How far a clean window's mean extra time strays: the control's own mean over its median, plus three
    # standard errors of a window's mean (per-step noise on a shared 2-core machine is tens of ms).
    noise = {
        r: [sync_seconds(x) - clean[r]["sync_seconds"] for x in control if x["rank"] == r] for r in clean
    }
    sd = max((statistics.pstdev(v) for v in noise.values() if len(v) > 1), default=0.0)
    bias = max((statistics.fmean(v) for v in noise.values() if v), default=0.0)
    job_links = [link.spec.name for _, _, link in plan.ring_flows()]
    windows = [
        (a, (a.started or 0.0), (a.ended or a.started or 0.0) + TAIL_S)
        for a in actions
        if a.started is not None
    ]

    reference = references(steps, [(lo, hi) for _, lo, hi in windows], clean)

    def extra(row: dict[str, Any]) -> float:
        return sync_seconds(row) - reference[(int(row["rank"]), int(row["step"]))]

    measured: dict[int, float] = {}
    threshold: dict[int, float] = {}
    for a, lo, hi in windows:
        during = [extra(r) for r in steps if _overlaps(r, lo, hi)]
        measured[a.index] = statistics.fmean(during) if during else 0.0
        threshold[a.index] = max(AFFECTS_S, bias + 3 * sd / math.sqrt(max(1, len(during))))
    affects = {a.index: a.network and measured[a.index] > threshold[a.index] for a, _, _ in windows}
    rows = [_step(r, clean, extra(r), windows, affects, job_links, plan) for r in steps]
    return {
        "version": VERSION,
        "scenario": config.name,
        "source": "lab",
        "seed": config.seed,
        "start_time": rfc3339(start),
        "duration_seconds": config.duration,
        "lab": {
            "netem": netem,
            "distance": "per link distance_km (netem)" if netem else "zero: this kernel has no netem",
            "control_steps": len(control),
            "clean": {str(k): v for k, v in clean.items()},
            "tail_seconds": TAIL_S,
            "reference": f"the rank's clean steps within {LOCAL_S:g} s (the control's median where none)",
            "control_noise": {"mean_over_median_seconds": bias, "stdev_seconds": sd},
        },
        "job": _job(config, plan, job_links, log_file),
        "links": _links(config, plan, rtt_s, bytes_per_step, netem),
        "episodes": [
            {
                **_episode(a, start, measured.get(a.index, 0.0), affects.get(a.index, False)),
                "affects_threshold_seconds": round(threshold.get(a.index, 0.0), 6),
            }
            for a in actions
        ],
        "steps": rows,
    }


def _step(
    row: dict[str, Any],
    clean: dict[int, dict[str, float]],
    extra_s: float,
    windows: list[tuple[Action, float, float]],
    affects: dict[int, bool],
    job_links: list[str],
    plan: Plan,
) -> dict[str, Any]:
    rank = int(row["rank"])
    by_link = dict.fromkeys(job_links, 0.0)
    causes = dict.fromkeys(("queueing", "loss_recovery", "pause", "reroute", "lost_capacity"), 0.0)
    open_ = [a for a, lo, hi in windows if _overlaps(row, lo, hi)]
    stalled = any(a.spec.kind == "compute_stall" for a in open_)
    job_class = plan.config.job.traffic_class
    blamed = [
        a
        for a in open_
        if a.network and affects[a.index] and a.spec.link is not None and a.traffic_class == job_class
    ]
    if blamed and not stalled and extra_s > 0:
        share = extra_s / len(blamed)  # overlapping episodes split it evenly (the schedules avoid overlap)
        for a in blamed:
            assert a.spec.link is not None
            by_link[a.spec.link] = by_link.get(a.spec.link, 0.0) + share
            causes[CAUSE[a.spec.kind]] += share
    total = sum(by_link.values())
    host = plan.ranks[rank]
    return {
        "step": int(row["step"]),
        "rank": rank,
        "site": host.site,
        "start_time": rfc3339(float(row["start"])),
        "end_time": rfc3339(float(row["end"])),
        "compute_seconds": round(float(row["compute_seconds"]), 6),
        "wait_seconds": round(float(row["wait_seconds"]), 6),
        "communication_seconds": round(clean[rank]["sync_seconds"], 6),
        "measured_sync_seconds": round(sync_seconds(row), 6),
        "steady_seconds": round(clean[rank]["sync_seconds"], 6),
        # At the top too: the scorer reads a row's by_link there (spanwatch/score.py), the spec nests it.
        "by_link": {k: round(v, 6) for k, v in by_link.items()},
        "network_seconds": {
            "total": round(total, 6),
            "by_link": {k: round(v, 6) for k, v in by_link.items()},
            "by_cause": {k: round(v, 6) for k, v in causes.items()},
        },
        "compute_stall": stalled,
    }


def _episode(a: Action, run_start: float, measured_s: float, affects: bool) -> dict[str, Any]:
    s = a.spec
    out: dict[str, Any] = {
        "kind": s.kind,
        "start": s.start,
        "duration": s.duration,
        "start_time": rfc3339(a.started or run_start + s.start),
        "end_time": rfc3339(a.ended or run_start + s.start + s.duration),
        "link": s.link,
        "wave": None,
        "params": {"load": s.load}
        if s.kind == "congestion"
        else {"factor": s.factor}
        if s.kind == "rate_cut"
        else {},
        "ranks": list(s.ranks),
        "affects_job": affects,
        "measured_extra_seconds": round(measured_s, 6),
    }
    if a.network:
        places = a.places()
        out.update({k: places[k] for k in ("devices", "interfaces", "queues")}, components=[])
        out["direction"] = a.direction
        if s.kind != "link_down":
            out["traffic_class"] = a.traffic_class
    else:
        out.update(devices=[], interfaces=[], components=[], queues=[])
    return out


def _job(config: LabConfig, plan: Plan, job_links: list[str], log_file: str) -> dict[str, Any]:
    return {
        "parallelism": "data",
        "ranks": len(plan.ranks),
        "ranks_per_site": 2,
        "params": config.job.params,
        "traffic_class": config.job.traffic_class,
        "background_class": config.job.background_class,
        "links": job_links,
        "ring": [
            {
                "ranks": sorted([src.rank or 0, dst.rank or 0]),
                "link": link.spec.name,
                "direction": plan.job_direction(link),
            }
            for src, dst, link in plan.ring_flows()
        ],
        "clock_skew_seconds": 0.0,
        "log_format": "jsonl",
        "log_every": 1,
        "log_file": log_file,
    }


def _links(
    config: LabConfig, plan: Plan, rtt_s: dict[str, float], bytes_per_step: dict[str, float], netem: bool
) -> dict[str, Any]:
    out = {}
    for link in plan.links:
        spec = link.spec
        capacity = spec.job_mbit * 1e6 / 8
        per_step = bytes_per_step.get(spec.name, 0.0)
        rtt = rtt_s.get(spec.name, 0.0)
        out[spec.name] = {
            "name": spec.name,
            "between": list(SITES),
            "devices": [device(s) for s in SITES],
            "interfaces": [f"{device(s)}/{link.ifname}" for s in SITES],
            "distance_km": spec.distance_km if netem else 0.0,
            "job_direction": plan.job_direction(link),
            "buffer": spec.profile,
            "buffer_bytes": spec.buffer_bytes,
            "job_class_mbit": spec.job_mbit,
            "background_class_mbit": spec.background_mbit,
            "one_way_delay_seconds": rtt / 2,
            "round_trip_seconds": rtt,
            "capacity_bytes_per_second": capacity,
            "job_bytes_per_step": per_step,
            "serialization_seconds": per_step / capacity,
            "steady_seconds": per_step / capacity + 2 * (len(plan.ranks) - 1) * rtt,
        }
    return out
