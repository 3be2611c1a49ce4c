"""Blame from evidence (``analyzer.blame``, ``analyzer.physics``) on small synthetic frames."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import polars as pl
import pytest
from synthetic_fabric import T0

from analyzer import blame, physics, schemas
from spanwatch import score


def _lines(per_step: list[float], physics_s: list[float], n: int = 1) -> pl.LazyFrame:
    return pl.LazyFrame(
        {
            "rank": [0] * len(per_step),
            "step": [(i + 1) * n for i in range(len(per_step))],
            "n": [n] * len(per_step),
            "per_step": per_step,
            "physics": physics_s,
            "source_file": ["x"] * len(per_step),
        }
    )


def _judge(lines: pl.LazyFrame, around: int = 1) -> pl.DataFrame:
    """The reconciliation of one-link lines: each line's physics scaled by the link's gain."""
    judged = blame.measured(blame.baselines(lines, 1)).collect()
    cells = judged.filter(pl.col("physics") > 0).select("rank", "physics", line="step", link=pl.lit("l"))
    gains = blame.link_gains(judged, cells)
    scaled = cells.join(gains, on=["rank", "line", "link"]).select(
        "rank", step="line", scaled=pl.col("physics") * pl.col("gain")
    )
    with_scaled = judged.join(scaled, on=["rank", "step"], how="left").with_columns(
        pl.col("scaled").fill_null(0.0)
    )
    return blame.reconcile(blame.timing_spread(with_scaled.lazy(), around)).collect().sort("step")


def test_shapley_splits_the_slowest_links_lateness() -> None:
    # Lateness 10 ms and 30 ms: the first 10 ms shared, the next 20 ms the slower link's alone.
    frame = pl.LazyFrame({"window": [0, 0], "link": ["a", "b"], "physics": [0.010, 0.030]})
    shares = dict(blame.shapley(frame, ["window"]).collect().select("link", "share").iter_rows())
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
    judged = _judge(_lines(per_step, phys))
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
    network = _judge(_lines(per_step, phys))["network"].to_list()
    assert network[20] == pytest.approx(0.1, abs=0.01)
    assert sum(network) == pytest.approx(2.0, rel=0.05)


def test_no_physical_cause_no_blame() -> None:
    # A straggler: step times grow, the job's queue saw nothing.
    per_step = [1.0] * 20 + [3.0] * 3 + [1.0] * 20
    judged = _judge(_lines(per_step, [0.0] * 43))
    assert judged["network"].sum() == 0.0
    assert judged["unexplained"].sum() == pytest.approx(6.0)  # the excess stays unexplained, no link's


def test_interval_lines_are_weighted_by_their_steps() -> None:
    # Three Megatron-style lines of 10 iterations each: 1.0 s per step, then 1.05 s, then 1.0 s.
    frame = pl.DataFrame(
        {
            "rank": [None] * 3,
            "step": [10, 20, 30],
            "start_time": [None] * 3,
            "end_time": [T0 + timedelta(seconds=s) for s in (10.0, 20.5, 30.5)],
            "duration_seconds": [1.0, 1.05, 1.0],
            "interval_average": [True] * 3,
            "interval_steps": [10] * 3,
            "source_file": ["m.log"] * 3,
        },
        schema_overrides={"rank": pl.Int64, "start_time": pl.Datetime("us", "UTC")},
    )
    lines = blame.intervals(frame).collect()
    assert lines["n"].to_list() == [10, 10, 10]
    steps = blame.expand(lines.lazy()).collect()
    assert steps.height == 30
    assert steps["step"].to_list() == list(range(1, 31))
    middle = steps.filter(pl.col("line") == 20)
    assert middle["lo"][0] == T0 + timedelta(seconds=10)
    assert middle["hi"][-1] == T0 + timedelta(seconds=20.5)


def test_cycle_finds_a_sync_every_four_steps() -> None:
    steps = list(range(1, 201))
    seconds = [1.03 if s % 4 == 0 else 1.0 for s in steps]
    noisy = [x + 0.001 * ((s * 7919) % 5 - 2) / 2 for s, x in zip(steps, seconds, strict=True)]
    assert blame.cycle(pl.DataFrame({"step": steps, "seconds": noisy})) == 4
    assert blame.cycle(pl.DataFrame({"step": steps, "seconds": [1.0] * 200})) == 1


def test_skew_is_found_by_cross_correlation() -> None:
    # Physics on the switch clock; the same pattern 2 s later on the host clock.
    grid = [T0 + timedelta(seconds=0.1 * i) for i in range(600)]
    level = [1.0 if 20 <= 0.1 * i < 30 else 0.0 for i in range(600)]
    signal = pl.DataFrame({"time": grid, "physics": level})
    lo = [T0 + timedelta(seconds=0.5 * i) for i in range(120)]
    excess = [0.1 if 22 <= 0.5 * i < 32 else 0.0 for i in range(120)]
    steps = pl.DataFrame({"lo": lo, "hi": [t + timedelta(seconds=0.5) for t in lo], "excess": excess})
    skew, r = blame.estimate_skew(steps, signal)
    assert skew == pytest.approx(2.0, abs=0.11)
    assert r is not None and r > 0.9


def test_steady_figures_from_probes_capacity_and_bytes() -> None:
    members = pl.DataFrame({"link": ["l1", "l1"], "device": ["a", "b"], "rtt_seconds": [0.00098, 0.00098]})
    ends = pl.DataFrame(
        {"link": ["l1", "l1"], "device": ["a", "b"], "interfaces": [4, 4], "capacity": [4e11, 4e11]},
        schema_overrides={"interfaces": pl.UInt32},
    )
    probes = pl.DataFrame({"link": ["l1"], "rtt_seconds": [0.001]})
    table = blame.steady(members, ends, probes, pl.DataFrame({"link": ["l1"], "bytes": [1.4e10]}))
    row = table.row(0, named=True)
    assert row["round_trip_seconds"] == 0.001  # measured, over the fibre's
    assert row["serialization_seconds"] == pytest.approx(0.035)


def test_the_poll_interval_is_the_usual_gap_between_readings_not_between_series() -> None:
    # One counter read every second for a minute, and five statuses that never changed (their running
    # totals keep only their two ends): the poll is 1 s, not the statuses' 58 s.
    every = [T0 + timedelta(seconds=i) for i in range(60)]
    ends = [T0, T0 + timedelta(seconds=58)]
    rows = [("l1", "a", "sent", t) for t in every]
    rows += [
        ("l1", "a", quantity, t) for quantity in ("down", "slow", "fcs", "paused", "ingress") for t in ends
    ]
    readings = pl.DataFrame(rows, schema=["link", "device", "quantity", "time"], orient="row")
    assert blame.poll_seconds(readings) == pytest.approx(1.0)


def test_window_amounts_interpolate_running_totals() -> None:
    readings = pl.LazyFrame(
        {
            "link": ["l1"] * 3,
            "device": ["a"] * 3,
            "quantity": ["paused"] * 3,
            "time": [T0 + timedelta(seconds=s) for s in (0, 1, 2)],
            "amount": [0.0, 0.5, 0.5],
        },
        schema=physics.READINGS,
    )
    totals = physics.running_totals(readings)
    windows = pl.LazyFrame(
        {"window": [0], "lo": [T0 + timedelta(seconds=0.5)], "hi": [T0 + timedelta(seconds=1.5)]}
    )
    out = physics.window_amounts(totals, windows).collect()
    assert out["paused"].item() == pytest.approx(0.5)
    assert out["seconds"].item() == pytest.approx(1.0)


def test_scorer_reads_places_and_queues_as_the_simulator_names_them() -> None:
    assert score.queue_name("dci-ab-a/Ethernet1/1/3") == "3"
    assert score.queue_name("tc3") == "3"


def test_each_link_is_scaled_by_its_own_gain() -> None:
    # Link a alone for 10 lines (physics 0.01, excess 0.02: gain 2), then a and b together (b's physics
    # 0.05, and b alone later with excess 0.05: gain 1): in the overlap a keeps its gain of 2.
    lines = pl.DataFrame(
        {
            "rank": [0] * 30,
            "step": list(range(1, 31)),
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
    gains = blame.link_gains(lines, cells)
    by_link = gains.group_by("link").agg(pl.col("gain").unique())
    assert dict(by_link.iter_rows()) == {"a": [pytest.approx(2.0)], "b": [pytest.approx(1.0)]}


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
    judged = blame.measured(lines.lazy()).collect()
    cells = judged.filter(pl.col("physics") > 0).select("rank", "physics", line="step", link=pl.lit("a"))
    gains = blame.link_gains(judged, cells).sort("line")
    assert gains["gain"].to_list() == pytest.approx([1.0] * 10 + [0.1 / 0.003] * 10 + [2.0] * 3)


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
    lines = _lines(per_step, phys)
    clean = lines.collect().filter(pl.col("physics") <= 0).select("step", seconds="per_step")
    size = blame.cycle(clean)
    assert size == 4
    judged = blame.measured(blame.baselines(lines, size)).collect()
    quiet = judged.filter(pl.col("step") % 4 != 0)
    assert not quiet["communicates"].any()
    assert judged.filter(pl.col("step") % 4 == 0)["communicates"].all()


def test_skew_is_found_from_interval_lines() -> None:
    # Lines of 10 steps (3 s each) and two episodes of 4 s: the skew of 2 s is found finer than a line.
    episodes = ((33, 37), (70, 74))
    grid = [T0 + timedelta(seconds=0.1 * i) for i in range(1200)]
    level = [1.0 if any(a <= 0.1 * i < b for a, b in episodes) else 0.0 for i in range(1200)]
    signal = pl.DataFrame({"time": grid, "physics": level})
    skew, length = 2.0, 3
    lo = [T0 + timedelta(seconds=length * i + skew) for i in range(36)]
    # Each line's excess: the episodes' share of its window on the switch clock.
    excess = [
        sum(max(0.0, min(length * (i + 1), b) - max(length * i, a)) for a, b in episodes) / length
        for i in range(36)
    ]
    lines = pl.DataFrame({"lo": lo, "hi": [t + timedelta(seconds=length) for t in lo], "excess": excess})
    found, r = blame.estimate_skew(lines, signal)
    assert found == pytest.approx(skew, abs=0.11)
    assert r is not None and r > 0.95


def test_a_port_below_its_usual_speed_reads_as_lost_capacity() -> None:
    # A port at 150 Mb/s stepping down to 60 for two readings: 0.6 of each of those seconds is lost.
    speeds = [150.0, 150.0, 60.0, 60.0, 150.0, 150.0]
    times = [T0 + timedelta(seconds=s) for s in range(len(speeds))]
    signals = pl.LazyFrame(
        {
            "series": [1] * len(speeds),
            "metric": [physics.SPEED] * len(speeds),
            "prev_time": [None, *times[:-1]],
            "time": times,
            "next_time": [*times[1:], None],
            "value": [s * 125_000 for s in speeds],
            "increase": [None] * len(speeds),
            "seconds": [None] + [1.0] * (len(speeds) - 1),
        },
        schema=schemas.SIGNALS,
    )
    labels = pl.LazyFrame(
        {"series": [1], "link": ["l1"], "device": ["a"], "interface": ["e1"]},
        schema_overrides={"series": pl.UInt64},
    ).with_columns(
        queue=pl.lit(None, pl.String), priority=pl.lit(None, pl.String), direction=pl.lit(None, pl.String)
    )
    rows = physics.readings(signals, labels, "3").collect()
    assert set(rows["quantity"]) == {"slow"}
    assert rows["amount"].sum() == pytest.approx(1.2)


def test_the_jobs_own_rate_noise_is_not_other_traffic() -> None:
    # A job at 7 MB/s whose windows vary by up to 1.5 MB/s (deviation 0.74 MB/s) on an 18.75 MB/s link: 1.8
    # MB/s above its median is its own noise (past 1 % of the capacity, within 3 deviations and 10 % of the
    # capacity); 9 MB/s above it is other traffic.
    rates = [7e6 + d * 1e6 for d in (-1.5, -0.5, 0.0, 0.5, 1.5) * 40] + [8.8e6, 16e6]
    n = len(rates)
    zeros = dict.fromkeys(
        ("dropped", "dropped_frames", "paused", "pausing", "fcs", "down", "slow", "ingress", "queued"), 0.0
    )
    amounts = pl.DataFrame(
        {
            "window": range(n),
            "link": "l1",
            "device": "a",
            "covered": 1.0,
            "seconds": 1.0,
            "sent": rates,
            **zeros,
        }
    )
    typical = blame.job_rates(amounts)
    assert typical["rate_noise"].item() == pytest.approx(0.5e6 * blame.MAD_TO_SIGMA)
    ends = pl.DataFrame(
        {"link": ["l1"], "device": ["a"], "interfaces": [1], "capacity": [18.75e6]},
        schema_overrides={"interfaces": pl.UInt32},
    )
    links = pl.DataFrame({"link": ["l1"], "bytes": [1.7e6], "round_trip_seconds": [1e-4]})
    windows = pl.DataFrame({"window": range(n), "seconds_step": 0.22})
    cells = blame.step_physics(windows, amounts.join(typical, on=["link", "device"]), ends, links)
    assert cells["window"].to_list() == [n - 1]
    assert cells["cause"].item() == "queueing"


def test_the_jobs_bytes_moved_off_a_downed_link_are_its_reroute_not_other_traffic() -> None:
    # Two parallel links each carry 8 MB/s of the job (one direction each, 12.5 MB/s of capacity). Window 1:
    # l2 is down and its 8 MB/s go over l1's other direction, queueing there: l2's cost (a reroute).
    # Window 2: the same on l1 with no link down is other traffic, l1's. Window 3: l2 down, but l1 gains
    # more than l2 lost: other traffic too.
    zeros = dict.fromkeys(
        ("dropped", "dropped_frames", "paused", "pausing", "fcs", "slow", "ingress", "queued"), 0.0
    )
    rows = []
    for window, l1_back, l2_down in ((0, 0.1e6, 0.0), (1, 8.0e6, 1.0), (2, 8.0e6, 0.0), (3, 11.0e6, 1.0)):
        l2_sent = 0.0 if l2_down else 8e6
        for link, device, sent, base, down in (
            ("l1", "a", 8e6, 8e6, 0.0),
            ("l1", "b", l1_back, 0.1e6, 0.0),
            ("l2", "a", 0.1e6 * (1 - l2_down), 0.1e6, l2_down),
            ("l2", "b", l2_sent, 8e6, l2_down),
        ):
            rows.append({"window": window, "link": link, "device": device, "covered": 1.0, "seconds": 1.0,
                         "sent": sent, "base_rate": base, "rate_noise": 0.0, "down": down, **zeros})  # fmt: skip
    amounts = pl.DataFrame(rows)
    ends = pl.DataFrame(
        {"link": ["l1", "l1", "l2", "l2"], "device": ["a", "b", "a", "b"], "interfaces": [1] * 4,
         "capacity": [12.5e6] * 4},
        schema_overrides={"interfaces": pl.UInt32},
    )  # fmt: skip
    links = pl.DataFrame({"link": ["l1", "l2"], "bytes": [1.7e6, 1.7e6], "round_trip_seconds": [1e-4] * 2})
    windows = pl.DataFrame({"window": range(4), "seconds_step": 0.22})
    cells = blame.step_physics(windows, amounts, ends, links).sort("window", "link")
    causes = {(w, link): cause for w, link, cause in cells.select("window", "link", "cause").iter_rows()}
    assert causes == {
        (1, "l2"): "lost_capacity",  # the downed link's own reading, and the queueing it moved onto l1
        (2, "l1"): "queueing",
        (3, "l1"): "queueing",
        (3, "l2"): "lost_capacity",
    }
    moved = blame.rerouted(
        pl.DataFrame(
            {"window": [1], "link": ["l1"], "device": ["b"], "physics": [0.1], "cause": ["queueing"]}
        ),
        amounts.join(ends, on=["link", "device"]),
    )
    assert moved.select("link", "cause").row(0) == ("l2", "reroute")


def test_the_job_class_held_in_an_ingress_queue_is_physics() -> None:
    # Watermarks of queue 3 on one interface: the ingress one holds 4 MB for two readings; the egress one
    # (a queue at the sender) is read apart, and another class's ingress queue not at all.
    times = [T0 + timedelta(seconds=s) for s in range(5)]
    held = [0.0, 0.0, 4e6, 4e6, 0.0]
    rows = [
        (series, t, prev, value)
        for series, values in ((1, held), (2, [9e6] * 5), (3, [9e6] * 5))
        for prev, t, value in zip([None, *times[:-1]], times, values, strict=True)
    ]
    signals = pl.LazyFrame(
        {
            "series": [r[0] for r in rows],
            "metric": [physics.HELD] * len(rows),
            "prev_time": [r[2] for r in rows],
            "time": [r[1] for r in rows],
            "next_time": [None] * len(rows),
            "value": [r[3] for r in rows],
            "increase": [None] * len(rows),
            "seconds": [None if r[2] is None else 1.0 for r in rows],
        },
        schema=schemas.SIGNALS,
    )
    labels = pl.LazyFrame(
        {
            "series": [1, 2, 3],
            "link": ["l1"] * 3,
            "device": ["b"] * 3,
            "interface": ["e1"] * 3,
            "queue": ["3", "3", "0"],
            "direction": ["rx", None, "rx"],
        },
        schema_overrides={"series": pl.UInt64},
    ).with_columns(priority=pl.lit(None, pl.String))
    rows_out = physics.readings(signals, labels, "3").collect()
    amounts_of = dict(rows_out.group_by("quantity").agg(pl.col("amount").sum()).iter_rows())
    # The egress queue holds its usual length throughout: nothing stands in it.
    assert amounts_of == pytest.approx({"ingress": 8e6, "queued": 0.0})  # byte-seconds
    # Over a one-second window the end held 4 MB: 4 MB over its 400 MB/s line rate is 10 ms per step.
    columns = ("sent", "dropped", "dropped_frames", "paused", "pausing", "fcs", "down", "slow")
    amounts = pl.DataFrame(
        {
            "window": [0, 1],
            "link": "l1",
            "device": "b",
            "covered": 1.0,
            "seconds": 1.0,
            **dict.fromkeys(columns, 0.0),
            "ingress": [0.0, 4e6],
            "queued": 0.0,
            "base_rate": 0.0,
            "rate_noise": 0.0,
        }
    )
    ends = pl.DataFrame(
        {"link": ["l1"], "device": ["b"], "interfaces": [1], "capacity": [4e8]},
        schema_overrides={"interfaces": pl.UInt32},
    )
    links = pl.DataFrame({"link": ["l1"], "bytes": [1e8], "round_trip_seconds": [1e-3]})
    windows = pl.DataFrame({"window": [0, 1], "seconds_step": 0.3})
    cells = blame.step_physics(windows, amounts, ends, links)
    assert cells.select("window", "device", "cause").rows() == [(1, "b", "queueing")]
    assert cells["physics"].item() == pytest.approx(0.01)


def test_an_egress_queue_stands_past_twice_its_usual_length_in_two_readings_running() -> None:
    # The job class's egress watermark usually reads 0.1 MB (the job's own bursts). Two readings running at
    # 2.1 MB: 2 MB beyond the usual stands for 2 s. One reading of 5 MB (the job's burst as its ranks
    # resume together) and one of 0.15 MB (within twice the usual) stand for nothing.
    held = [1e5, 1e5, 2.1e6, 2.1e6, 1e5, 5e6, 1e5, 1.5e5, 1e5]
    times = [T0 + timedelta(seconds=s) for s in range(len(held))]
    signals = pl.LazyFrame(
        {
            "series": [1] * len(held),
            "metric": [physics.HELD] * len(held),
            "prev_time": [None, *times[:-1]],
            "time": times,
            "next_time": [None] * len(held),
            "value": held,
            "increase": [None] * len(held),
            "seconds": [None] + [1.0] * (len(held) - 1),
        },
        schema=schemas.SIGNALS,
    )
    labels = pl.LazyFrame(
        {
            "series": [1],
            "link": ["l1"],
            "device": ["a"],
            "interface": ["e1"],
            "queue": ["3"],
            "direction": ["tx"],
        },
        schema_overrides={"series": pl.UInt64},
    ).with_columns(priority=pl.lit(None, pl.String))
    rows_out = physics.readings(signals, labels, "3").collect()
    assert set(rows_out["quantity"]) == {"queued"}
    standing = rows_out.filter(pl.col("amount") > 0).sort("time")
    assert standing["time"].to_list() == times[2:4]
    assert standing["amount"].to_list() == pytest.approx([2e6, 2e6])  # byte-seconds


def test_a_standing_egress_queue_delays_the_job_by_its_length_over_its_drain() -> None:
    # Window 1: 2 MB stand in the job class's egress queue beyond its usual length while the class drains
    # 100 MB/s: each of the job's packets waits 2 MB / 100 MB/s = 20 ms more. Windows 0 and 2: none.
    columns = ("dropped", "dropped_frames", "paused", "pausing", "fcs", "down", "slow", "ingress")
    amounts = pl.DataFrame(
        {
            "window": [0, 1, 2],
            "link": "l1",
            "device": "a",
            "covered": 1.0,
            "seconds": 1.0,
            **dict.fromkeys(columns, 0.0),
            "sent": 1e8,
            "queued": [0.0, 2e6, 0.0],
            "base_rate": 1e8,
            "rate_noise": 0.0,
        }
    )
    ends = pl.DataFrame(
        {"link": ["l1"], "device": ["a"], "interfaces": [1], "capacity": [4e8]},
        schema_overrides={"interfaces": pl.UInt32},
    )
    links = pl.DataFrame({"link": ["l1"], "bytes": [1e7], "round_trip_seconds": [1e-3]})
    windows = pl.DataFrame({"window": [0, 1, 2], "seconds_step": 0.3})
    cells = blame.step_physics(windows, amounts, ends, links)
    assert cells.select("window", "cause").rows() == [(1, "queueing")]
    assert cells["physics"].item() == pytest.approx(0.02)


def _timed(per_step: list[float], physics_s: list[float]) -> pl.LazyFrame:
    """Single-step lines one after the other from T0."""
    starts = np.concatenate([[0.0], np.cumsum(per_step)[:-1]])
    return _lines(per_step, physics_s).with_columns(
        lo=pl.Series([T0 + timedelta(seconds=float(s)) for s in starts])
    )


def test_a_drifting_step_time_is_not_excess() -> None:
    # Clean steps slow from 0.20 to 0.30 s over the run (a shared host); an episode late in the run adds
    # 0.10 s: measured against the clean steps around it, not the run's median (0.25 s, which reads 0.13).
    n = 600
    per_step = list(np.linspace(0.20, 0.30, n))
    physics_s = [0.0] * n
    for i in range(500, 540):
        per_step[i] += 0.10
        physics_s[i] = 0.05
    judged = _judge(_timed(per_step, physics_s))
    episode = judged.filter(pl.col("physics") > 0)
    assert episode["network"].mean() == pytest.approx(0.10, rel=0.1)
    assert judged.filter(pl.col("physics") <= 0)["network"].sum() == 0


def test_a_block_within_its_noise_is_not_blamed() -> None:
    # A physical cause over 30 steps whose durations are no longer than the clean ones: clipping their noise
    # at zero would blame about 0.4 deviations a step; the block measured nothing, so nothing is blamed.
    rng = np.random.default_rng(2)
    per_step = list(0.2 + 0.02 * rng.standard_normal(200))
    physics_s = [0.05 if 100 <= i < 130 else 0.0 for i in range(200)]
    judged = _judge(_timed(per_step, physics_s))
    assert judged["network"].sum() == 0


def _interval(lo: float, hi: float, n: int, network: float, skew: float = 0.0) -> pl.DataFrame:
    """One interval line of ``n`` iterations on the host clock (``lo``, ``hi`` seconds after T0)."""
    return pl.DataFrame(
        {
            "rank": [0],
            "step": [n],
            "n": [n],
            "lo": [T0 + timedelta(seconds=lo + skew)],
            "hi": [T0 + timedelta(seconds=hi + skew)],
            "network": [network],
            "joint_gain": [1.0],
        }
    )


def _cells(spans: dict[str, tuple[float, float, float]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A grid of 0.1 s cells from T0 (cell k covers [0.1 k, 0.1 (k + 1)) s) and each link's physics over
    its (start, end, seconds per step)."""
    grid = pl.DataFrame({"time": [T0 + timedelta(seconds=0.05 + 0.1 * k) for k in range(300)]})
    grid = grid.with_row_index("window").with_columns(pl.col("window").cast(pl.Int64))
    rows = [
        {"window": k, "link": link, "device": f"{link}-a", "cause": "queueing", "physics": level}
        for link, (a, b, level) in spans.items()
        for k in range(300)
        if a <= 0.1 * k + 1e-9 and 0.1 * (k + 1) <= b + 1e-9
    ]
    return pl.DataFrame(rows), grid


def _no_gains() -> pl.DataFrame:
    return pl.DataFrame(schema={"rank": pl.Int64, "line": pl.Int64, "link": pl.String, "gain": pl.Float64})


def _seconds(times: pl.Series) -> list[float]:
    return [round((t - T0).total_seconds(), 3) for t in times]


def test_a_stall_inside_an_interval_is_one_iterations_and_pushes_the_rest_later() -> None:
    # Ten iterations of 1 s work took 12 s: the physics says the network stalled everything from 4.5 s to
    # 6.5 s. The fifth iteration (4 s to 7 s) holds the whole stall; the later ones start 2 s later.
    cells, grid = _cells({"l": (4.5, 6.5, 0.05)})
    iterations, links = blame.place(_interval(0.0, 12.0, 10, 2.0), cells, grid, _no_gains(), 0.0)
    iterations = iterations.sort("step")
    assert iterations["step"].to_list() == list(range(1, 11))
    assert _seconds(iterations["lo"]) == [0, 1, 2, 3, 4, 7, 8, 9, 10, 11]
    assert _seconds(iterations["hi"]) == [1, 2, 3, 4, 7, 8, 9, 10, 11, 12]
    assert iterations["weight"].to_list() == pytest.approx([0.0] * 4 + [1.0] + [0.0] * 5, abs=1e-9)
    assert links["step"].to_list() == [5]
    assert links["share"].item() > 0


def test_a_stall_opening_just_after_an_iteration_ended_is_that_iterations() -> None:
    # The same 2 s stall read from 4.1 s: it opens a tenth into the fifth iteration, where a stall centred on
    # its readings opens only when its reading came late (it opens, on average, three quarters into the
    # iteration it held). The fourth iteration, whose work ended at 4 s and whose collective it held, takes
    # it; the fifth's work (0.1 s before the stall, 0.9 s after) runs from 6.1 s to 7 s.
    cells, grid = _cells({"l": (4.1, 6.1, 0.05)})
    iterations, _ = blame.place(_interval(0.0, 12.0, 10, 2.0), cells, grid, _no_gains(), 0.0)
    iterations = iterations.sort("step")
    assert _seconds(iterations["lo"]) == [0, 1, 2, 3, 6.1, 7, 8, 9, 10, 11]
    assert iterations["weight"].to_list() == pytest.approx([0.0] * 3 + [1.0] + [0.0] * 6, abs=1e-9)


def test_placement_is_on_the_switch_clock_through_the_skew() -> None:
    # The same stall with the hosts 2 s ahead of the switches: the same iteration holds it.
    cells, grid = _cells({"l": (4.5, 6.5, 0.05)})
    iterations, _ = blame.place(_interval(0.0, 12.0, 10, 2.0, skew=2.0), cells, grid, _no_gains(), 2.0)
    weights = iterations.sort("step")["weight"].to_list()
    assert weights == pytest.approx([0.0] * 4 + [1.0] + [0.0] * 5, abs=1e-9)


def test_congestion_over_part_of_an_interval_slows_the_iterations_it_covers() -> None:
    # Congestion from 5 s to the end of a 10-iteration line of 12 s (2 s of network time): the iterations
    # before it keep their 1 s of work; those under it share the 2 s in proportion to their time under it.
    cells, grid = _cells({"l": (5.0, 12.0, 0.02)})
    iterations, _ = blame.place(_interval(0.0, 12.0, 10, 2.0), cells, grid, _no_gains(), 0.0)
    iterations = iterations.sort("step")
    assert _seconds(iterations["lo"])[:6] == [0, 1, 2, 3, 4, 5]
    weights = iterations["weight"].to_list()
    assert weights[:5] == pytest.approx([0.0] * 5, abs=1e-9)
    assert weights[5:] == pytest.approx([0.2] * 5)  # 2/7 of each 1.4 s iteration: 0.4 s of 2 s
    assert _seconds(iterations["hi"])[5:] == pytest.approx([6.4, 7.8, 9.2, 10.6, 12.0], abs=2e-3)


def test_links_share_each_moment_as_the_airport_game() -> None:
    # Two links slow the same second: the slower one decides, the first 10 ms shared by both.
    cells, grid = _cells({"a": (4.0, 5.0, 0.03), "b": (4.0, 5.0, 0.01)})
    _, links = blame.place(_interval(0.0, 12.0, 10, 2.0), cells, grid, _no_gains(), 0.0)
    per_link = links.group_by("link").agg(pl.col("share").sum())
    shares = dict(per_link.iter_rows())
    assert shares["b"] / (shares["a"] + shares["b"]) == pytest.approx(0.005 / 0.03)


def test_an_interval_without_physics_is_spread_evenly() -> None:
    cells, grid = _cells({"l": (20.0, 22.0, 0.05)})  # outside the line
    iterations, links = blame.place(_interval(0.0, 12.0, 10, 1.0), cells, grid, _no_gains(), 0.0)
    iterations = iterations.sort("step")
    assert iterations["weight"].to_list() == pytest.approx([0.1] * 10)
    assert _seconds(iterations["lo"]) == pytest.approx([1.2 * i for i in range(10)], abs=2e-3)
    assert links.is_empty()


def test_a_long_step_is_read_over_every_typical_window_in_it_ending_with_its_last() -> None:
    def at(s: float) -> object:
        return T0 + timedelta(seconds=s)

    windows = pl.DataFrame({"window": [0, 1], "lo": [at(0), at(0.3)], "hi": [at(0.3), at(1.3)]})
    found = blame.collective_windows(windows, typical_seconds=0.3, skew_seconds=1.0)
    rows = [
        (w, round((lo - T0).total_seconds(), 3), round((hi - T0).total_seconds(), 3), round(s, 3))
        for w, lo, hi, s in found.sort("window", "hi").iter_rows()
    ]
    # A typical step is its own window; a 1 s step gives its last 0.3 s and the 0.3 s windows inside it
    # before that, half a typical step apart; all on the switch clock (1 s behind).
    assert rows == [
        (0, -1.0, -0.7, 0.3),
        (1, -0.6, -0.3, 0.3),
        (1, -0.45, -0.15, 0.3),
        (1, -0.3, 0.0, 0.3),
        (1, -0.15, 0.15, 0.3),
        (1, 0.0, 0.3, 0.3),
    ]


def test_a_smeared_stall_is_sharpened_into_one_block_and_congestion_keeps_its_density() -> None:
    # 0.1 s pieces. A 1 s stall smeared by 1 s counters reads 0.5 over 2 s (1 s of network time in 2 s:
    # a stall) and becomes 1 s of g = 1 centred on it; 0.2 over 2 s is congestion and stays.
    a = [i / 10 for i in range(40)]
    smeared = [0.0] * 10 + [0.5] * 20 + [0.0] * 10
    slow = [0.0] * 10 + [0.2] * 20 + [0.0] * 10
    frame = pl.DataFrame({"rank": [0] * 80, "line": [1] * 40 + [2] * 40, "k": list(range(40)) * 2})
    frame = frame.with_columns(a=pl.Series(a * 2), b=pl.Series([x + 0.1 for x in a] * 2))
    frame = frame.with_columns(g=pl.Series(smeared + slow))
    out = blame.stalls(frame, ["rank", "line"])
    stall = out.filter(pl.col("line") == 1)["g"].to_list()
    assert stall == [0.0] * 15 + [1.0] * 10 + [0.0] * 15
    assert out.filter(pl.col("line") == 2)["g"].to_list() == slow


def test_an_episodes_smeared_first_reading_is_its_level_over_the_readings_last_part() -> None:
    # A poll that caught the last 0.2 s of a 1 s interval reads a fifth of the plateau over all of it;
    # sharpened, the plateau's level holds over that interval's last 0.2 s and nothing before.
    a = [i / 10 for i in range(30)]
    g = [0.0] * 5 + [0.05] * 10 + [0.25] * 10 + [0.0] * 5
    frame = pl.DataFrame({"rank": [0] * 30, "line": [1] * 30, "k": list(range(30)), "a": a})
    frame = frame.with_columns(b=pl.col("a") + 0.1, g=pl.Series(g))
    out = blame.edges(frame, ["rank", "line"])["g"].to_list()
    assert out == pytest.approx([0.0] * 13 + [0.25] * 12 + [0.0] * 5)
