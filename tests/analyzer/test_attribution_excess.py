"""The excess over the clean baseline, its noise and the job's cycle (``analyzer.attribution.excess``)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest
from attribution_support import judge_one_link, lines_frame, timed_lines

from analyzer.attribution import excess, steady
from analyzer.attribution.rules import BASELINE_SECONDS, BASELINE_WINDOWS_PER_SPAN


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


def _windows_sent(every_window: int, windows: int = 120) -> pl.DataFrame:
    """One link end's counter windows of 1 s: the job class's bytes in every ``every_window``-th one."""
    sent = [1e9 if w % every_window == 0 else 0.0 for w in range(windows)]
    return pl.DataFrame({"link": "l", "device": "a", "sent": sent, "seconds": 1.0})


def test_a_checkpoint_cycle_is_no_communication_cycle_where_the_job_sends_every_step() -> None:
    # A data-parallel job checkpointing every 12 steps of 0.6 s: the step times show a slow position
    # every 12 steps exactly as DiLoCo's sync every 12 would; the class's counters (1 s polls) carry the
    # job's bytes in every window, so the slow step is compute and every step communicates.
    steps = list(range(1, 241))
    per_step = [0.6 + (2.0 if s % 12 == 0 else 0.0) + 0.002 * ((s * 7919) % 5 - 2) for s in steps]
    clean = pl.DataFrame({"step": steps, "seconds": per_step})
    found = excess.cycle(clean)
    assert found == 12
    every_step = steady.sends_sparsely(steady.job_rates(_windows_sent(1)))
    on_syncs_only = steady.sends_sparsely(steady.job_rates(_windows_sent(7)))
    assert (every_step, on_syncs_only) == (False, True)
    assert excess.communication_cycle(found, 0.6, 1.0, every_step) == 1
    judged = excess.measured(excess.baselines(lines_frame(per_step, [0.0] * len(steps)), 1)).collect()
    assert judged["communicates"].all()
    # DiLoCo syncing every 12 steps sends in one window of seven: its quiet steps send nothing.
    assert excess.communication_cycle(found, 0.6, 1.0, on_syncs_only) == 12
    # A cycle within four polls leaves bytes in most windows either way: the step times decide alone.
    assert excess.communication_cycle(4, 0.6, 1.0, every_step) == 4
    assert excess.communication_cycle(12, 0.3, 1.0, every_step) == 12


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


def _local_by_hand(
    rows: list[tuple[int, int, int | None, float, float]],
) -> dict[tuple[int, int], float | None]:
    """The local baseline as ``with_local_baselines`` defines it, one line at a time: the window of
    BASELINE_SECONDS centred on a multiple of its 1 / BASELINE_WINDOWS_PER_SPAN nearest the line's start (a
    tie: the later), and the median of the clean lines of the line's key that start inside it."""
    every = round(BASELINE_SECONDS * 1e6) // BASELINE_WINDOWS_PER_SPAN
    half = BASELINE_WINDOWS_PER_SPAN // 2 * every
    out: dict[tuple[int, int], float | None] = {}
    for rank, step, lo, _, _ in rows:
        if lo is None:
            out[rank, step] = None
            continue
        centre = (lo + every // 2) // every * every
        clean = [
            s
            for r, _, t, s, physics in rows
            if r == rank and t is not None and centre - half <= t < centre + half and physics <= 0
        ]
        out[rank, step] = float(np.median(clean)) if clean else None
    return out


@pytest.mark.parametrize("seed", range(12))
def test_a_lines_local_baseline_is_the_clean_median_of_the_window_centred_nearest_it(seed: int) -> None:
    # Starts on a grid (1 us, 0.25 s or 7.5 s) so that lines fall on windows' edges and half-way between two
    # windows' centres, where a tie must go the same way every time; some lines without a wall clock.
    rng = np.random.default_rng(seed)
    grid = [1, 250_000, 7_500_000][seed % 3]
    origin = round(datetime(2026, 12, 5, tzinfo=UTC).timestamp()) * 1_000_000
    rows = [
        (
            int(rng.integers(0, 3)),
            step,
            None if rng.random() < 0.05 else origin + int(rng.integers(0, 300_000_000)) // grid * grid,
            float(rng.uniform(0.1, 2.0)),
            float(rng.choice([0.0, 0.0, 0.5])),
        )
        for step in range(int(rng.integers(1, 400)))
    ]
    keyed = pl.DataFrame(
        rows, schema=["rank", "step", "lo", "per_step", "physics"], orient="row"
    ).with_columns(pl.col("rank", "step").cast(pl.Int64), pl.col("lo").cast(pl.Datetime("us", "UTC")))
    got = excess.with_local_baselines(keyed.lazy(), ["rank"]).collect()
    assert got.select("rank", "step").rows() == keyed.select("rank", "step").rows()  # every line, in order
    expected = _local_by_hand(rows)
    assert got["local"].to_list() == pytest.approx([expected[r[0], r[1]] for r in rows])


def test_a_block_within_its_noise_is_not_blamed() -> None:
    # A physical cause over 30 steps whose durations are no longer than the clean ones: clipping their noise
    # at zero would blame about 0.4 deviations a step; the block measured nothing, so nothing is blamed.
    rng = np.random.default_rng(2)
    per_step = list(0.2 + 0.02 * rng.standard_normal(200))
    physics_s = [0.05 if 100 <= i < 130 else 0.0 for i in range(200)]
    judged = judge_one_link(timed_lines(per_step, physics_s))
    assert judged["network"].sum() == 0
