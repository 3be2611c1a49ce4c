"""The excess over the clean baseline, its noise and the job's cycle (``analyzer.attribution.excess``)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from attribution_support import judge_one_link, lines_frame, timed_lines

from analyzer.attribution import excess


def test_cycle_finds_a_sync_every_four_steps() -> None:
    steps = list(range(1, 201))
    seconds = [1.03 if s % 4 == 0 else 1.0 for s in steps]
    noisy = [x + 0.001 * ((s * 7919) % 5 - 2) / 2 for s, x in zip(steps, seconds, strict=True)]
    assert excess.cycle(pl.DataFrame({"step": steps, "seconds": noisy})) == 4
    assert excess.cycle(pl.DataFrame({"step": steps, "seconds": [1.0] * 200})) == 1


def test_quiet_steps_of_a_cycle_take_no_blame() -> None:
    # DiLoCo-like: every 4th step syncs (0.1 s slower); an episode spans steps 40-60 with physics on
    # every step, but only the syncing steps are slower.
    steps = list(range(1, 121))
    per_step = [
        1.0
        + (0.1 if s % 4 == 0 else 0.0)
        + (0.05 if s % 4 == 0 and 40 <= s <= 60 else 0.0)
        + 0.001 * ((s * 7919) % 5 - 2) / 2
        for s in steps
    ]
    phys = [0.05 if 40 <= s <= 60 else 0.0 for s in steps]
    lines = lines_frame(per_step, phys)
    clean = lines.collect().filter(pl.col("physics") <= 0).select("step", seconds="per_step")
    size = excess.cycle(clean)
    assert size == 4
    judged = excess.measured(excess.baselines(lines, size)).collect()
    quiet = judged.filter(pl.col("step") % 4 != 0)
    assert not quiet["communicates"].any()
    assert judged.filter(pl.col("step") % 4 == 0)["communicates"].all()


def test_a_drifting_step_time_is_not_excess() -> None:
    # Clean steps slow from 0.20 to 0.30 s over the run (a shared host); an episode late in the run adds
    # 0.10 s: measured against the clean steps around it, not the run's median (0.25 s, which reads 0.13).
    n = 600
    per_step = list(np.linspace(0.20, 0.30, n))
    physics_s = [0.0] * n
    for i in range(500, 540):
        per_step[i] += 0.10
        physics_s[i] = 0.05
    judged = judge_one_link(timed_lines(per_step, physics_s))
    episode = judged.filter(pl.col("physics") > 0)
    assert episode["network"].mean() == pytest.approx(0.10, rel=0.1)
    assert judged.filter(pl.col("physics") <= 0)["network"].sum() == 0


def test_a_block_within_its_noise_is_not_blamed() -> None:
    # A physical cause over 30 steps whose durations are no longer than the clean ones: clipping their noise
    # at zero would blame about 0.4 deviations a step; the block measured nothing, so nothing is blamed.
    rng = np.random.default_rng(2)
    per_step = list(0.2 + 0.02 * rng.standard_normal(200))
    physics_s = [0.05 if 100 <= i < 130 else 0.0 for i in range(200)]
    judged = judge_one_link(timed_lines(per_step, physics_s))
    assert judged["network"].sum() == 0
