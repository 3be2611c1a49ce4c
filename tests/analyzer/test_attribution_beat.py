"""The job's own beat at the resolution of its log (``analyzer.attribution.beat``): a DiLoCo sync or a
checkpoint every M steps seen through interval lines, found from the lines alone and then read as the
job's, not as network excess."""

from __future__ import annotations

import numpy as np
import polars as pl

from analyzer.attribution import beat, excess

STEP_S = 0.25
JITTER_S = 0.004


def _lines(n: int, count: int, slow: dict[int, float], seed: int = 1, stalls: int = 0) -> pl.DataFrame:
    """``count`` lines of ``n`` steps each; a step s takes ``slow[P]`` more seconds for each P dividing s."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n * count + 1)
    seconds = STEP_S + rng.normal(0.0, JITTER_S, steps.size)
    for size, extra in slow.items():
        seconds[steps % size == 0] += extra
    for at in rng.choice(steps.size, stalls, replace=False):  # stalls at no period: compute, not a beat
        seconds[at] += 1.0
    last = steps[n - 1 :: n]
    per_step = seconds.reshape(count, n).mean(axis=1)
    return pl.DataFrame({"rank": 0, "step": last, "n": n, "per_step": per_step, "physics": 0.0})


def _partition(lines: pl.DataFrame, period: beat.Period) -> list[bool]:
    """Which lines the period makes heavy: two periods that split the lines alike are one beat."""
    counts = beat.hits(lines["step"].to_numpy(), lines["n"].to_numpy(), period)
    return (counts > counts.min()).tolist()


def test_a_sync_every_22_steps_is_found_through_lines_of_12() -> None:
    lines = _lines(12, 96, {22: 0.15})
    (period,) = beat.find(lines)
    # Any description of the same lines will do: the lines holding a sync are the ones it counts.
    assert _partition(lines, period) == _partition(lines, (22, 0))


def test_a_sync_past_the_noise_but_under_twice_its_level_is_found() -> None:
    """Seed 191949 (DiLoCo, a sync every 8 steps, a log every 2): each sync line stood 4.3 sigma over the
    others. The beat asked 6 sigma (two levels), so the sync lines read as excess, and a checkpoint line
    beside one took a gain of 96 from it: 0.92 s blamed on a link where 0.007 s was true. One level is the
    test every step uses; the chance test over every period and phase tried guards the rest."""
    lines = _lines(2, 66, {8: 0.025}, seed=5)  # the line noise: 0.004 * sqrt(2) = 0.0057 s, 4.4 sigma
    (period,) = beat.find(lines)
    assert _partition(lines, period) == _partition(lines, (8, 0))


def test_a_sync_and_a_checkpoint_are_both_found() -> None:
    lines = _lines(6, 100, {4: 0.1, 30: 2.0})
    found = beat.find(lines)
    assert len(found) == 2
    expected = {tuple(_partition(lines, (4, 0))), tuple(_partition(lines, (30, 0)))}
    assert {tuple(_partition(lines, period)) for period in found} == expected


def test_noise_and_stalls_at_no_period_are_no_beat() -> None:
    assert beat.find(_lines(10, 80, {})) == []
    assert beat.find(_lines(10, 80, {}, seed=2, stalls=3)) == []
    assert beat.find(_lines(1, 400, {}, seed=3, stalls=5)) == []


def test_half_the_sync_lines_are_not_the_beat() -> None:
    """Twice the sync period leaves half of the sync lines among the others: they do not agree."""
    lines = _lines(12, 96, {22: 0.15})
    counts = beat.hits(lines["step"].to_numpy(), 12, (44, 0))
    line_excess = (lines["per_step"].to_numpy() - float(np.median(lines["per_step"].to_numpy()))) * 12
    assert not beat.stands_out(line_excess, counts)


def test_lines_holding_a_sync_are_judged_against_lines_holding_one() -> None:
    """A DiLoCo job's lines with a sync are slower by its own exchange: no excess once the beat is read,
    even where the physics saw the sync's own burst in the queue; without it, the two kinds of line read as
    a noise several times the jitter's, under which an episode's cost would hide."""
    lines = _lines(12, 96, {22: 0.15}).with_columns(physics=0.05)  # every line looks caused
    judged, _, periods = excess.judge(lines)
    assert len(periods) == 1
    assert (judged["excess"].abs() < excess.SIGNIFICANT_SIGMAS * judged["noise"]).mean() > 0.95
    without = excess.measured(excess.baselines(lines.lazy(), 1)).collect()
    assert without["noise"].median() > 3 * judged["noise"].median()  # type: ignore[operator]


def test_a_few_slow_lines_on_one_period_of_many_are_chance() -> None:
    """A short run's slow steps (an episode, five stalls) can fill the five hits of one of the hundreds of
    periods and phases tried: chance, not a beat (a shipped two-vendor run read one so)."""
    rng = np.random.default_rng(4)
    seconds = STEP_S + rng.normal(0.0, JITTER_S, 120)
    seconds[[17, 41, 65, 89, 113]] += 0.5  # steps 18, 42, 66, 90, 114: every 24 from 18
    seconds[94:110] += 0.3  # an episode
    lines = pl.DataFrame({"rank": 0, "step": np.arange(1, 121), "n": 1, "per_step": seconds, "physics": 0.0})
    counts = beat.hits(lines["step"].to_numpy(), 1, (24, 18))
    line_excess = seconds - float(np.median(seconds))
    assert beat.stands_out(line_excess, counts)  # as the rule reads one period alone
    assert not beat.stands_out(line_excess, counts, tried=30 * 31 // 2)  # among all those tried
    assert beat.find(lines) == []


def _placed(weights: dict[int, float]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One interval line of steps 701-704 (rank 0) with placed weights, and link shares per step."""
    steps = pl.DataFrame({"rank": 0, "line": 704, "step": list(weights), "weight": list(weights.values())})
    shares = pl.DataFrame(
        {
            "rank": 0,
            "step": [701, 701, 703],
            "link": ["ab", "bc", "ab"],
            "device": ["dci-ab", "dci-bc", "dci-ab"],
            "cause": "queueing",
            "share": [0.6, 0.2, 1.0],
        }
    )
    return steps, shares


def test_a_sparse_senders_network_time_moves_onto_its_sync_step() -> None:
    # Seed 509562 (DiLoCo, sync every 13, a log every 4): a 17.8 s sync held by congestion was placed on
    # step 701, the step before the sync (702 = 54 x 13), a poll early; step_error 2.0.
    steps, shares = _placed({701: 0.9, 702: 0.0, 703: 0.1, 704: 0.0})
    moved, given = beat.on_the_beat(steps, shares, [(13, 0)])
    assert dict(moved.select("step", "weight").iter_rows()) == {701: 0.0, 702: 1.0, 703: 0.0, 704: 0.0}
    # The line's link mix, by the old weights: ab 0.9 x 0.75 + 0.1 x 1, bc 0.9 x 0.25.
    mix = dict(given.filter(pl.col("step") == 702).select("link", "share").iter_rows())
    assert abs(mix["ab"] - 0.775) < 1e-12 and abs(mix["bc"] - 0.225) < 1e-12
    assert given.filter(pl.col("step") != 702).is_empty()


def test_lines_without_a_sync_step_and_single_steps_keep_their_weights() -> None:
    steps, shares = _placed({701: 0.9, 702: 0.0, 703: 0.1, 704: 0.0})
    moved, given = beat.on_the_beat(steps, shares, [(13, 5)])  # no step of the line is on this beat
    assert moved.sort("step").equals(steps.sort("step")) and given.equals(shares)
    single = pl.DataFrame({"rank": 0, "line": 702, "step": [702], "weight": [1.0]})
    assert beat.on_the_beat(single, shares, [(13, 0)])[0].equals(single)
