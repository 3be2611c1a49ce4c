"""Reconciliation of the physics with the measured excess (``analyzer.attribution.reconcile``)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from attribution_support import judge_one_link, lines_frame

from analyzer.attribution import excess as line_excess
from analyzer.attribution import reconcile


def test_shapley_splits_the_slowest_links_lateness() -> None:
    # Lateness 10 ms and 30 ms: the first 10 ms shared, the next 20 ms the slower link's alone.
    frame = pl.LazyFrame({"window": [0, 0], "link": ["a", "b"], "physics": [0.010, 0.030]})
    shares = dict(reconcile.shapley(frame, ["window"]).collect().select("link", "share").iter_rows())
    assert shares == pytest.approx({"a": 0.005, "b": 0.025})


def test_a_checkpoint_inside_an_episode_keeps_its_compute() -> None:
    # Clean steps of 1.0 s (a little noise), an episode adding 0.1 s for 10 steps, one of which also
    # checkpoints for 2 s: the checkpoint is capped at the episode's measured rate, not blamed.
    rng = np.random.default_rng(1)
    clean = list(1.0 + 0.002 * rng.standard_normal(40))
    episode = [1.1 + 0.002 * x for x in rng.standard_normal(10)]
    episode[5] += 2.0
    per_step = clean[:20] + episode + clean[20:]
    phys = [0.0] * 20 + [0.05] * 10 + [0.0] * 20
    judged = judge_one_link(lines_frame(per_step, phys))
    network = judged["network"].to_list()
    assert sum(network[:20]) + sum(network[30:]) == 0.0
    assert network[25] == pytest.approx(0.1, abs=0.01)
    assert judged["unexplained"][25] == pytest.approx(2.0, abs=0.01)
    assert sum(network[20:30]) == pytest.approx(1.0, rel=0.03)


def test_an_episodes_first_step_is_its_excess_where_its_physics_is_only_partly_there() -> None:
    # An episode adds 0.1 s a step; its first step's window caught only a third of the onset (a 1 s
    # reading covers its whole interval): within a poll of a step whose physics says 0.1 s, the
    # measured 0.1 s stands, where the physics alone would have cut it to a third.
    rng = np.random.default_rng(2)
    per_step = list(1.0 + 0.002 * rng.standard_normal(60))
    for i in range(20, 40):
        per_step[i] += 0.1
    phys = [0.0] * 20 + [0.05 / 3] + [0.05] * 19 + [0.0] * 20
    network = judge_one_link(lines_frame(per_step, phys))["network"].to_list()
    assert network[20] == pytest.approx(0.1, abs=0.01)
    assert sum(network) == pytest.approx(2.0, rel=0.05)


def test_no_physical_cause_no_blame() -> None:
    # A straggler: step times grow, the job's queue saw nothing.
    per_step = [1.0] * 20 + [3.0] * 3 + [1.0] * 20
    judged = judge_one_link(lines_frame(per_step, [0.0] * 43))
    assert judged["network"].sum() == 0.0
    assert judged["unexplained"].sum() == pytest.approx(6.0)  # the excess stays unexplained, no link's


def test_each_link_is_scaled_by_its_own_gain() -> None:
    # Link a alone for 10 lines (physics 0.01, excess 0.02: gain 2), then a and b together (b's physics
    # 0.05, and b alone later with excess 0.05: gain 1): in the overlap a keeps its gain of 2.
    lines = pl.DataFrame(
        {
            "rank": [0] * 30,
            "step": list(range(1, 31)),
            "n": [1] * 30,
            "excess": [0.02] * 10 + [0.05] * 10 + [0.05] * 10,
            "noise": [0.001] * 30,
            "joint_gain": [1.5] * 30,
        }
    )
    cells = pl.DataFrame(
        {
            "rank": [0] * 40,
            "line": list(range(1, 21)) + list(range(11, 31)),
            "link": ["a"] * 20 + ["b"] * 20,
            "physics": [0.01] * 20 + [0.05] * 20,
        }
    )
    gains = reconcile.link_gains(lines, cells)
    by_link = gains.group_by("link").agg(pl.col("gain").unique())
    assert dict(by_link.iter_rows()) == {"a": [pytest.approx(2.0)], "b": [pytest.approx(1.0)]}


def test_a_gain_is_read_only_from_lines_whose_every_step_the_cause_touched() -> None:
    # Lines of 4 steps on link a: in line 4 the cause is in every step (physics 10 ms a step, the line
    # 20 ms slow: gain 0.5); line 8 holds its last step and a 2 s checkpoint. Read from both, the median
    # of 0.5 and 200 would scale the block a hundredfold; the line the cause only leaves reads nothing.
    lines = pl.DataFrame(
        {"rank": 0, "step": [4, 8], "n": 4, "excess": [0.02, 2.005], "noise": 0.001, "joint_gain": None}
    )
    cells = pl.DataFrame({"rank": 0, "line": [4] * 4 + [8], "link": "a", "physics": 0.01})
    gains = reconcile.link_gains(lines, cells)
    assert gains["gain"].to_list() == pytest.approx([0.5, 0.5])


def test_a_gain_is_not_read_where_the_physics_is_within_the_noise_of_a_quiet_block() -> None:
    # A block of 10 lines on link a (noise 0.01 s a line): line 1 a straggler's 3 s wait over 3 ms of
    # physics (the job's burst as the ranks resume), lines 2-10 within the noise. Neither the physics nor
    # the block's typical line shows: the block keeps gain 1, its lines are not scaled 1000-fold. Loss
    # physics of 3 ms under a block whose every line is 0.1 s slow shows through the block: gain 33. Where
    # the physics (0.05 s) is past the noise on its own, its line reads gain 2.
    excess = [3.0] + [0.005] * 9 + [0.0] * 5 + [0.1] * 10 + [0.0] * 5 + [0.1] * 3
    physics_s = [0.003] * 10 + [0.0] * 5 + [0.003] * 10 + [0.0] * 5 + [0.05] * 3
    lines = pl.DataFrame(
        {
            "rank": 0,
            "step": range(1, len(excess) + 1),
            "per_step": excess,
            "baseline": 0.0,
            "physics": physics_s,
            "sigma": 0.01,
            "n": 1,
        }
    )
    judged = line_excess.measured(lines.lazy()).collect()
    cells = judged.filter(pl.col("physics") > 0).select("rank", "physics", line="step", link=pl.lit("a"))
    gains = reconcile.link_gains(judged, cells).sort("line")
    assert gains["gain"].to_list() == pytest.approx([1.0] * 10 + [0.1 / 0.003] * 10 + [2.0] * 3)


def test_a_lone_line_cannot_vouch_for_its_own_gain() -> None:
    # Seed 983358: a 0.55 s stall of every rank fell in a line with 2 ms of physics on bc-2 (the job's
    # own sync in a queue, noise 20 ms a line), a block of one line. As the majority of its own block, the
    # line read a gain of 259 from its own excess and blamed the stall on bc-2 (step_error 6.7). The
    # majority is of the block's other lines: a lone line keeps gain 1. Three lines past the noise over
    # physics under it (loss recovery) still read their gain, each vouched for by the other two.
    excess = [0.565] + [0.0] * 5 + [0.1] * 3
    physics_s = [0.002] + [0.0] * 5 + [0.003] * 3
    lines = pl.DataFrame(
        {"rank": 0, "step": range(1, 10), "per_step": excess, "baseline": 0.0, "physics": physics_s}
    ).with_columns(sigma=pl.lit(0.02), n=pl.lit(1))
    judged = line_excess.measured(lines.lazy()).collect()
    cells = judged.filter(pl.col("physics") > 0).select("rank", "physics", line="step", link=pl.lit("a"))
    gains = reconcile.link_gains(judged, cells).sort("line")
    assert gains["gain"].to_list() == pytest.approx([1.0] + [0.1 / 0.003] * 3)


def test_one_stragglers_line_does_not_make_a_block_of_two_read_a_gain() -> None:
    # A harmless congestion's 13 ms of physics over two lines (noise 45 ms a line): the first quiet, the second
    # a straggler's 2.5 s wait. The median of two lines is their mean (1.25 s, past the noise), but most of
    # the block shows nothing: the straggler's line reads no gain, and the block keeps gain 1.
    lines = pl.DataFrame(
        {"rank": 0, "step": [1, 2], "per_step": [0.0035, 2.479], "baseline": 0.0, "physics": [0.0046, 0.0134]}
    ).with_columns(sigma=pl.lit(0.045), n=pl.lit(1))
    judged = line_excess.measured(lines.lazy()).collect()
    cells = judged.select("rank", "physics", line="step", link=pl.lit("a"))
    assert reconcile.link_gains(judged, cells)["gain"].to_list() == pytest.approx([1.0, 1.0])


def test_the_timing_spread_is_what_a_poll_moves_and_no_more_than_a_line_showed() -> None:
    # A poll's reading covers its whole interval, so a line's physics is known to a poll either way: the
    # spread is what that shift could bring in from the neighbours. A line of 16 steps of 0.25 s (4 s, a
    # poll of 1 s) moves a quarter of its span; single steps shorter than a poll, all of it. A neighbour's
    # physics past what its own log showed (excess + 2 noise) did not happen there and moves nothing.
    def spread(n: int, scaled: list[float], excess: list[float]) -> list[float]:
        lines = pl.LazyFrame(
            {
                "rank": 0,
                "step": [n * (i + 1) for i in range(3)],
                "n": n,
                "duration": 0.25,
                "scaled": scaled,
                "excess": excess,
                "noise": 0.01,
            }
        )
        return reconcile.timing_spread(lines, 1, 1.0).collect()["spread"].to_list()

    assert spread(16, [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]) == pytest.approx([0.25, 0.25, 0.25])
    assert spread(1, [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]) == pytest.approx([1.0, 1.0, 1.0])
    # The middle line's physics scaled 5 s over a log that showed 0.1 s: it can move 0.12 s, no more.
    assert spread(1, [0.0, 5.0, 0.0], [0.0, 0.1, 0.0]) == pytest.approx([0.12, 0.12, 0.12])


def _two_links(per_step: list[float], physics: dict[str, list[float]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``network_time`` of single-step lines with physics on the fast link ``f``, which ends a clean step
    0.07 s before the slow link ``s`` (``steady.slack``), and on ``s``: the lines and the links' shares."""
    lines = lines_frame(per_step, [max(x) for x in zip(*physics.values(), strict=True)])
    judged = line_excess.measured(line_excess.baselines(lines, 1)).collect()
    caused = pl.concat(
        judged.select("rank", "step", line="step", link=pl.lit(link), physics=pl.Series(values))
        for link, values in physics.items()
    ).filter(pl.col("physics") > 0)
    steps = judged.select("rank", "step", line="step")
    slack = pl.DataFrame({"link": ["f", "s"], "slack": [0.07, 0.0]})
    network, _, shares, _ = reconcile.network_time(judged, caused, steps, 1, slack, 1.0)
    return network.sort("step"), shares


def test_a_link_that_ends_before_the_slowest_costs_only_past_its_slack() -> None:
    # Clean steps of 1.0 s. For ten steps the fast link adds 0.17 s, 0.10 s past its 0.07 s of slack (the
    # steps take 1.10 s), one of which also stalls 2 s. For ten more the slow link adds 0.10 s and the fast
    # one 0.05 s, within its slack: the slow link's alone.
    rng = np.random.default_rng(3)
    per_step = list(1.0 + 0.002 * rng.standard_normal(60))
    for k in [*range(20, 30), *range(40, 50)]:
        per_step[k] += 0.10
    per_step[25] += 2.0
    fast = [0.0] * 20 + [0.17] * 10 + [0.0] * 10 + [0.05] * 10 + [0.0] * 10
    slow = [0.0] * 40 + [0.10] * 10 + [0.0] * 10
    network, shares = _two_links(per_step, {"f": fast, "s": slow})
    assert sum(network["network"][20:30]) == pytest.approx(1.0, rel=0.05)
    assert network["network"][25] == pytest.approx(0.1, abs=0.01)  # the stall is compute
    assert sum(network["network"][40:50]) == pytest.approx(1.0, rel=0.05)
    second = shares.filter(pl.col("step").is_between(41, 50)).group_by("link").agg(pl.col("share").sum())
    assert dict(second.iter_rows()) == pytest.approx({"f": 0.0, "s": 1.0}, abs=0.02)


def test_a_lines_gain_counts_only_the_steps_whose_scaled_physics_passes_the_slack() -> None:
    # Three steps of one line on a link with 0.07 s of slack, physics 0.17, 0.17 and 0.02 s, excess 0.2 s:
    # at gain 1 the first two cost 0.10 s each and the third (0.02 s, within the slack) nothing. Without
    # slack the gain is the excess over the physics, as for any link.
    lines = pl.DataFrame({"rank": [0], "step": [3], "excess": [0.2]})
    cells = pl.DataFrame({"rank": 0, "line": 3, "link": "f", "physics": [0.17, 0.02, 0.17]})
    slack = pl.DataFrame({"link": ["f"], "slack": [0.07]})
    assert reconcile.line_ratios(lines, cells, slack)["ratio"].item() == pytest.approx(1.0)
    assert reconcile.line_ratios(lines, cells, None)["ratio"].item() == pytest.approx(0.2 / 0.36)
