"""Hand-made truth and analysis folders for the scorer's tests.

A run of ``STEPS`` one-second steps from ``T0`` on ``RANKS`` ranks over two links (``L1``, ``L2``). The
default truth has three episodes, and the default analysis is what a perfect analyzer would write; tests
change one thing at a time.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
STEPS = 60
RANKS = 2
STEP_SECONDS = 1.0
Costs = Mapping[int, Mapping[str, float]]

EPISODES: list[dict[str, Any]] = [
    {
        "kind": "congestion",
        "link": "L1",
        "start": "10s",
        "duration": "10s",
        "queues": ["tc3"],
        "affects_job": True,
    },
    {
        "kind": "wave_down",
        "link": "L2",
        "wave": 1,
        "start": "30s",
        "duration": "5s",
        "interfaces": ["Ethernet1/1"],
        "affects_job": True,
    },
    {
        "kind": "optical_degradation",
        "link": "L1",
        "wave": 2,
        "start": "40s",
        "duration": "10s",
        "interfaces": ["Ethernet1/2"],
        "components": ["OpticalChannel1/2"],
        "affects_job": False,
    },
    {"kind": "compute_stall", "start": "52s", "duration": "2s", "ranks": [0], "affects_job": False},
]
COSTS: dict[int, dict[str, float]] = {
    **{s: {"L1": 0.1} for s in range(10, 20)},
    **{s: {"L2": 0.2} for s in range(30, 35)},
}
EVENTS: list[dict[str, Any]] = [
    {"kind": "ecn", "link": "L1", "interface": "Ethernet1/1", "queue": "3", "start": 10.5, "end": 20.5},
    {"kind": "queue", "link": "L1", "interface": "Ethernet1/3", "queue": "3", "start": 11.0, "end": 19.0},
    {
        "kind": "wave_down",
        "link": "L2",
        "interface": "Ethernet1/1",
        "queue": None,
        "start": 30.2,
        "end": 35.0,
    },
    {
        "kind": "osnr",
        "link": "L1",
        "interface": "OpticalChannel1/2",
        "queue": None,
        "start": 40.5,
        "end": 50.0,
    },
    {"kind": "ber", "link": "L1", "interface": "Ethernet1/2", "queue": None, "start": 41.0, "end": 49.0},
]
LINKS = {
    "L1": {
        "one_way_delay_seconds": 0.0005,
        "round_trip_seconds": 0.001,
        "capacity_bytes_per_second": 4e11,
        "job_bytes_per_step": 4e9,
    },
    "L2": {
        "one_way_delay_seconds": 0.0007,
        "round_trip_seconds": 0.0014,
        "capacity_bytes_per_second": 2e11,
        "job_bytes_per_step": 4e9,
    },
}
STEADY = {"L1": (0.001, 0.01), "L2": (0.0014, 0.02)}  # measured round trip and serialization, exact


def stamp(seconds: float) -> str:
    """RFC 3339 for ``T0 + seconds``."""
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def truth_doc(
    costs: Costs = COSTS, episodes: list[dict[str, Any]] | None = None, ranks: int = RANKS
) -> dict[str, Any]:
    """A ``truth.json`` document as the spec writes it (episode times relative to ``start_time``)."""
    steps = [
        {
            "step": s,
            "rank": r,
            "start_time": stamp(s * STEP_SECONDS),
            "end_time": stamp((s + 1) * STEP_SECONDS),
            "compute_seconds": 0.8,
            "communication_seconds": 0.1,
            "network_seconds": sum(costs.get(s, {}).values()),
            "by_link": dict(costs.get(s, {})),
            "by_cause": {"queueing": sum(costs.get(s, {}).values())},
            "steady_seconds": 0.01,
        }
        for s in range(STEPS)
        for r in range(ranks)
    ]
    return {
        "start_time": stamp(0),
        "episodes": copy.deepcopy(EPISODES if episodes is None else episodes),
        "steps": steps,
        "links": LINKS,
    }


def write_truth(path: Path, doc: dict[str, Any] | None = None) -> Path:
    """Write ``truth.json`` (the default document unless given)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(truth_doc() if doc is None else doc))
    return path


def write_analysis(
    folder: Path,
    costs: Costs = COSTS,
    events: list[dict[str, Any]] | None = None,
    shift: float = 0.0,
    ranks: list[int | None] | None = None,
    steady: Mapping[str, tuple[float, float]] | None = STEADY,
    attribution_ranks: list[int | None] | None = None,
) -> Path:
    """Write the four tables the scorer reads, as ``spanwatch analyze`` names them.

    Args:
        folder: the analysis folder (created).
        costs: E per step and link, given to every rank.
        events: detected events (times in seconds from ``T0``); the perfect ones unless given.
        shift: seconds added to every step time (a shifted log).
        ranks: the ranks with rows (None: a job-wide row).
        attribution_ranks: the ranks attribution rows are written for, when not ``ranks``.
        steady: measured round trip and serialization per link, or None for none measured.
    """
    folder.mkdir(parents=True, exist_ok=True)
    ranks = list(range(RANKS)) if ranks is None else ranks
    steps = pl.DataFrame(
        [
            {
                "step": s,
                "rank": r,
                "start_time": T0 + timedelta(seconds=s * STEP_SECONDS + shift),
                "end_time": T0 + timedelta(seconds=(s + 1) * STEP_SECONDS + shift),
                "duration_seconds": STEP_SECONDS,
                "steady_seconds": None,
                "unexplained_seconds": 0.0,
            }
            for s in range(STEPS)
            for r in ranks
        ],
        schema_overrides={"rank": pl.Int64(), "steady_seconds": pl.Float64()},
    )
    steps.write_parquet(folder / "steps.parquet")
    rows = [
        {"step": s, "rank": r, "link": link, "attributed_seconds": seconds}
        for s, per_link in costs.items()
        for link, seconds in per_link.items()
        for r in (ranks if attribution_ranks is None else attribution_ranks)
    ]
    schema = {"step": pl.Int64(), "rank": pl.Int64(), "link": pl.String(), "attributed_seconds": pl.Float64()}
    pl.DataFrame(rows, schema=schema).write_parquet(folder / "attribution.parquet")
    event_rows = [
        {
            "kind": e["kind"],
            "link": e["link"],
            "device": "d1",
            "interface": e["interface"],
            "queue": e["queue"],
            "start_time": T0 + timedelta(seconds=e["start"]),
            "end_time": T0 + timedelta(seconds=e["end"]),
        }
        for e in (EVENTS if events is None else events)
    ]
    time = pl.Datetime("ns", "UTC")
    event_schema = {c: pl.String() for c in ("kind", "link", "device", "interface", "queue")}
    pl.DataFrame(event_rows, schema={**event_schema, "start_time": time, "end_time": time}).write_parquet(
        folder / "events.parquet"
    )
    link_rows = [
        {"link": link, "round_trip_seconds": rtt, "serialization_seconds": ser}
        for link, (rtt, ser) in (steady or {"L1": (None, None)}).items()  # type: ignore[dict-item]
    ]
    link_schema = {
        "link": pl.String(),
        "round_trip_seconds": pl.Float64(),
        "serialization_seconds": pl.Float64(),
    }
    pl.DataFrame(link_rows, schema=link_schema).write_parquet(folder / "links.parquet")
    return folder


def write_control(folder: Path, shift: float = 100.0, costs: Costs | None = None) -> Path:
    """``folder/control``: the same events, the steps shifted by ``shift`` s and, by default, nothing
    attributed (a shifted log meets no event in a 60 s run)."""
    return write_analysis(folder / "control", costs={} if costs is None else costs, shift=shift)


def scaled(costs: Costs, factor: float) -> dict[int, dict[str, float]]:
    """Every cost times ``factor``."""
    return {s: {link: v * factor for link, v in per.items()} for s, per in costs.items()}
