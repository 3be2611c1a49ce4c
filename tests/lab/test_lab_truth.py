"""The lab's truth from step rows: extra time over the run's clean steps, on the episode's link, never a stall's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spanwatch.lab import config as lab_config
from spanwatch.lab import truth
from spanwatch.lab.episodes import Action
from spanwatch.lab.topology import Plan

T0 = 1_800_000_000.0


def _rows(
    start: float, seconds: float, sync: float, step0: int = 0, extra: Any = None
) -> list[dict[str, Any]]:
    """Steps of 0.2 s for 4 ranks; ``extra(t)`` adds synchronisation time at time t."""
    rows, t, step = [], start, step0
    while t < start + seconds:
        for rank in range(4):
            add = extra(t) if extra else 0.0
            rows.append(
                {"step": step, "rank": rank, "start": t, "end": t + 0.2 + add, "compute_seconds": 0.05,
                 "wait_seconds": 0.01 + (0.001 * ((step + rank) % 3)), "comm_seconds": sync + add}
            )  # fmt: skip
        t += 0.2 + (extra(t) if extra else 0.0)
        step += 1
    return rows


def _scheduled() -> tuple[lab_config.LabConfig, Plan, list[Action]]:
    """The example lab and its episodes, each run on schedule from T0."""
    config = lab_config.load(lab_config.DEFAULT)
    plan = Plan(config)
    actions = [Action(i, e, plan, Path("/nonexistent")) for i, e in enumerate(config.episodes)]
    for a in actions:
        a.started = T0 + a.spec.start
        a.ended = a.started + a.spec.duration
    return config, plan, actions


def test_cost_lands_on_the_affecting_episodes_link_only() -> None:
    config, plan, actions = _scheduled()
    job = actions[0]  # congestion on ab-1, job class
    background = actions[1]  # congestion on ab-2, class 0: harmless here
    stall = actions[-1]

    def extra(t: float) -> float:
        if (job.started or 0) <= t < (job.ended or 0):
            return 0.1
        if (stall.started or 0) <= t < (stall.ended or 0):
            return 0.5  # the others wait for the straggler
        return 0.0

    control = _rows(T0 - 100, 30, 0.13)
    steps = _rows(T0, config.duration, 0.13, extra=extra)
    out = truth.build(config, plan, T0, control, steps, actions, {"ab-1": 2e-5, "ab-2": 2e-5},
                      {"ab-1": 1.7e6, "ab-2": 1.7e6}, False, "steps.jsonl")  # fmt: skip
    affects = [e["affects_job"] for e in out["episodes"]]
    assert affects[0] and not any(affects[1:])  # only the job-class congestion cost anything here
    ab1 = sum(s["by_link"]["ab-1"] for s in out["steps"])
    ab2 = sum(s["by_link"]["ab-2"] for s in out["steps"])
    assert ab2 == 0.0
    job_steps = [s for s in steps if (job.started or 0) <= s["start"] < (job.ended or 0)]
    assert abs(ab1 - 0.1 * len(job_steps)) < 0.1 * 8  # the window's tail may take a step or two more
    stalled = [s for s in out["steps"] if s["compute_stall"]]
    assert stalled and all(s["network_seconds"]["total"] == 0 for s in stalled)
    assert background.spec.traffic_class == 0
    assert out["links"]["ab-1"]["serialization_seconds"] == 1.7e6 / 12.5e6


def test_the_hosts_drift_since_the_control_is_not_the_networks() -> None:
    # The run's ranks synchronise 20 ms slower than in the control throughout (a shared host's drift):
    # measured against the run's own clean steps, only the job-class congestion costs anything, and
    # exactly what it added.
    config, plan, actions = _scheduled()
    job = actions[0]

    def extra(t: float) -> float:
        return 0.1 if (job.started or 0) <= t < (job.ended or 0) else 0.0

    control = _rows(T0 - 100, 30, 0.13)
    steps = _rows(T0, config.duration, 0.15, extra=extra)
    out = truth.build(config, plan, T0, control, steps, actions, {"ab-1": 2e-5, "ab-2": 2e-5},
                      {"ab-1": 1.7e6, "ab-2": 1.7e6}, False, "steps.jsonl")  # fmt: skip
    assert [e["affects_job"] for e in out["episodes"]] == [True] + [False] * (len(actions) - 1)
    assert sum(s["by_link"]["ab-2"] for s in out["steps"]) == 0.0
    assert abs(out["episodes"][0]["measured_extra_seconds"] - 0.1) < 0.01
