"""The episode cost per link from physics (``analyzer.attribution.episode``, ``analyzer.physics``)."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

import polars as pl
import pytest
from synthetic_fabric import T0

from analyzer import physics, schemas
from analyzer.attribution import episode, rules, steady
from spanwatch import score


def test_the_poll_interval_is_the_usual_gap_between_readings_not_between_series() -> None:
    # One counter read every second for a minute, and five statuses that never changed (their running
    # totals keep only their two ends): the poll is 1 s, not the statuses' 58 s.
    every = [T0 + timedelta(seconds=i) for i in range(60)]
    ends = [T0, T0 + timedelta(seconds=58)]
    rows = [("l1", "a", "sent", t, 1.0) for t in every]
    rows += [
        ("l1", "a", quantity, t, 0.0)
        for quantity in ("down", "slow", "fcs", "paused", "ingress")
        for t in ends
    ]
    readings = pl.DataFrame(rows, schema=["link", "device", "quantity", "time", "amount"], orient="row")
    assert episode.poll_seconds(readings) == pytest.approx(1.0)


def test_the_poll_interval_is_not_the_gap_quiet_readings_left_between_a_sparse_jobs_syncs() -> None:
    # A job syncing once every 40 s, read every second: only the readings that add something and their
    # neighbours are kept (``physics.readings``), so most gaps between kept readings span quiet ones. The
    # poll is the interval of the readings that add something, 1 s, not the 38 s between syncs nor the
    # statuses' 100 s.
    syncs = (30, 70)
    kept = sorted({s + d for s in syncs for d in (-1, 0, 1)})
    # The end's two members are read at one time: the one that sent nothing comes first.
    rows = [("l1", "a", "sent", T0 + timedelta(seconds=s), 0.0) for s in kept]
    rows += [("l1", "a", "sent", T0 + timedelta(seconds=s), 1e9 if s in syncs else 0.0) for s in kept]
    rows += [
        ("l1", "a", quantity, T0 + timedelta(seconds=s), 0.0)
        for quantity in ("down", "slow", "fcs", "paused", "ingress")
        for s in (0, 100)
    ]
    readings = pl.DataFrame(rows, schema=["link", "device", "quantity", "time", "amount"], orient="row")
    assert episode.poll_seconds(readings) == pytest.approx(1.0)


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


def _state_series(series: int, metric: str, seconds: list[float], values: list[float]) -> pl.DataFrame:
    """One gauge series of ``schemas.SIGNALS`` read at ``seconds`` after T0."""
    times = [T0 + timedelta(seconds=s) for s in seconds]
    return pl.DataFrame(
        {
            "series": [series] * len(times),
            "metric": [metric] * len(times),
            "prev_time": [None, *times[:-1]],
            "time": times,
            "next_time": [*times[1:], None],
            "value": values,
            "increase": [None] * len(times),
            "seconds": [None] + [b - a for a, b in pairwise(seconds)],
        },
        schema=schemas.SIGNALS,
    )


def test_a_state_read_after_a_gap_changed_no_earlier_than_a_poll_before() -> None:
    # Polled every second (a speed). gNMI ON_CHANGE oper-status: up at the start, down at 100 s, up again
    # at 116 s: the wave went down within the poll before the "down" reading, no earlier (the 99 s before
    # were up), and stayed down until the poll before the "up" one. Another wave goes down at 120 s and is
    # still down at its end's last reading (130 s). A polled state reads down at 5 s and 6 s: each reading
    # covers the poll before it.
    signals = pl.concat(
        [
            _state_series(1, physics.UP, [0, 100, 116], [1.0, 0.0, 1.0]),
            _state_series(2, physics.UP, [0, 120], [1.0, 0.0]),
            _state_series(3, physics.SPEED, [float(s) for s in range(131)], [5e10] * 131),
            _state_series(4, physics.UP, [float(s) for s in range(11)], [1.0] * 5 + [0.0] * 2 + [1.0] * 4),
        ]
    ).lazy()
    labels = pl.LazyFrame(
        {
            "series": [1, 2, 3, 4],
            "link": ["l1"] * 4,
            "device": ["a"] * 4,
            "interface": ["e1", "e2", "e1", "e3"],
        },
        schema_overrides={"series": pl.UInt64},
    ).with_columns(
        queue=pl.lit(None, pl.String), priority=pl.lit(None, pl.String), direction=pl.lit(None, pl.String)
    )
    rows = physics.readings(signals, labels, "3").collect()
    down = rows.filter(pl.col("quantity") == "down", pl.col("amount") > 0)
    seconds = down.select(at=(pl.col("time") - T0).dt.total_seconds(), amount="amount").sort("at")
    assert seconds.rows() == [(5, 1.0), (6, 1.0), (100, 1.0), (116, 15.0), (120, 1.0), (130, 10.0)]


def _zeros(*but: str) -> dict[str, float]:
    """Every physics quantity at zero, except those named (a test sets them itself)."""
    return dict.fromkeys((q for q in physics.QUANTITIES if q not in but), 0.0)


def _one_end(sent: list[float]) -> pl.DataFrame:
    """One link end's amounts over 1 s windows: the job class's bytes ``sent`` and no other quantity."""
    zeros = _zeros("sent")
    return pl.DataFrame(
        {
            "window": range(len(sent)),
            "link": "l1",
            "device": "a",
            "covered": 1.0,
            "seconds": 1.0,
            "sent": sent,
            **zeros,
        }
    )


def test_the_jobs_own_rate_noise_is_not_other_traffic() -> None:
    # A job at 7 MB/s whose windows vary by up to 1.5 MB/s (deviation 0.74 MB/s) on an 18.75 MB/s link: 1.8
    # MB/s above its median is its own noise (past 1 % of the capacity, within 3 deviations and 10 % of the
    # capacity); 9 MB/s above it is other traffic.
    rates = [7e6 + d * 1e6 for d in (-1.5, -0.5, 0.0, 0.5, 1.5) * 40] + [8.8e6, 16e6]
    n = len(rates)
    amounts = _one_end(rates)
    typical = steady.job_rates(amounts)
    assert typical["rate_noise"].item() == pytest.approx(0.5e6 * rules.MAD_TO_SIGMA)
    ends = pl.DataFrame(
        {"link": ["l1"], "device": ["a"], "interfaces": [1], "capacity": [18.75e6]},
        schema_overrides={"interfaces": pl.UInt32},
    )
    links = pl.DataFrame({"link": ["l1"], "bytes": [1.7e6], "round_trip_seconds": [1e-4]})
    windows = pl.DataFrame({"window": range(n), "seconds_step": 0.22})
    cells = episode.step_physics(windows, episode.with_job_rates(amounts, typical), ends, links)
    assert cells["window"].to_list() == [n - 1]
    assert cells["cause"].item() == "queueing"


def test_the_jobs_bytes_moved_off_a_downed_link_are_its_reroute_not_other_traffic() -> None:
    # Two parallel links each carry 8 MB/s of the job (one direction each, 12.5 MB/s of capacity). Window 1:
    # l2 is down and its 8 MB/s go over l1's other direction, queueing there: l2's cost (a reroute).
    # Window 2: the same on l1 with no link down is other traffic, l1's. Window 3: l2 down, but l1 gains
    # more than l2 lost: other traffic too.
    zeros = _zeros("sent", "down")
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
                         "sent": sent, "base_rate": base, "own_rate": base, "rate_noise": 0.0, "down": down, **zeros})  # fmt: skip
    amounts = pl.DataFrame(rows)
    ends = pl.DataFrame(
        {"link": ["l1", "l1", "l2", "l2"], "device": ["a", "b", "a", "b"], "interfaces": [1] * 4,
         "capacity": [12.5e6] * 4},
        schema_overrides={"interfaces": pl.UInt32},
    )  # fmt: skip
    links = pl.DataFrame({"link": ["l1", "l2"], "bytes": [1.7e6, 1.7e6], "round_trip_seconds": [1e-4] * 2})
    windows = pl.DataFrame({"window": range(4), "seconds_step": 0.22})
    cells = episode.step_physics(windows, amounts, ends, links).sort("window", "link")
    causes = {(w, link): cause for w, link, cause in cells.select("window", "link", "cause").iter_rows()}
    assert causes == {
        (1, "l2"): "lost_capacity",  # the downed link's own reading, and the queueing it moved onto l1
        (2, "l1"): "queueing",
        (3, "l1"): "queueing",
        (3, "l2"): "lost_capacity",
    }
    moved = episode.rerouted(
        pl.DataFrame(
            {"window": [1], "link": ["l1"], "device": ["b"], "physics": [0.1], "cause": ["queueing"]}
        ),
        amounts.join(ends, on=["link", "device"]),
    )
    assert moved.select("link", "cause").row(0) == ("l2", "reroute")


def _cells_of_a_second_window(own: float = 0.0, **added: float) -> pl.DataFrame:
    """``step_physics`` of one link end (400 MB/s, 1 ms round trip, the job's 100 MB a 0.3 s step, its own
    rate in its class ``own`` bytes/s) over two 1 s windows, the second holding the quantities ``added`` and
    the first nothing."""
    amounts = pl.DataFrame(
        {
            "window": [0, 1],
            "link": "l1",
            "device": "b",
            "covered": 1.0,
            "seconds": 1.0,
            **_zeros(*added),
            **{quantity: [0.0, amount] for quantity, amount in added.items()},
            "base_rate": own,
            "own_rate": own,
            "rate_noise": 0.0,
        }
    )
    ends = pl.DataFrame(
        {"link": ["l1"], "device": ["b"], "interfaces": [1], "capacity": [4e8]},
        schema_overrides={"interfaces": pl.UInt32},
    )
    links = pl.DataFrame({"link": ["l1"], "bytes": [1e8], "round_trip_seconds": [1e-3]})
    windows = pl.DataFrame({"window": [0, 1], "seconds_step": 0.3})
    return episode.step_physics(windows, amounts, ends, links)


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
    cells = _cells_of_a_second_window(ingress=4e6)
    assert cells.select("window", "device", "cause").rows() == [(1, "b", "queueing")]
    assert cells["physics"].item() == pytest.approx(0.01)


def test_a_ports_usual_discards_are_its_steady_state_not_loss() -> None:
    # A port discarding 10 frames a second all along (control frames, filtered traffic), and 500 more over
    # one second: only those 500 are lost to the job.
    times = [T0 + timedelta(seconds=s) for s in range(8)]
    increase = [None, 10.0, 10.0, 510.0, 10.0, 10.0, 10.0, 10.0]
    signals = pl.LazyFrame(
        {
            "series": [1] * len(times),
            "metric": [physics.DISCARDED] * len(times),
            "prev_time": [None, *times[:-1]],
            "time": times,
            "next_time": [*times[1:], None],
            "value": [0.0] * len(times),
            "increase": increase,
            "seconds": [None] + [1.0] * (len(times) - 1),
        },
        schema=schemas.SIGNALS,
    )
    labels = pl.LazyFrame(
        {
            "series": [1],
            "link": ["l1"],
            "device": ["b"],
            "interface": ["e1"],
            "queue": [None],
            "direction": [None],
        },
        schema_overrides={"series": pl.UInt64, "queue": pl.String, "direction": pl.String},
    ).with_columns(priority=pl.lit(None, pl.String))
    rows = physics.readings(signals, labels, "3").collect()
    assert rows.filter(pl.col("amount") > 0).select("quantity", "amount").rows() == [("discarded", 500.0)]


def test_frames_the_far_end_discards_on_receipt_are_lost_and_sent_again() -> None:
    # A lossy link's far switch whose receive buffer overflows (an incast) discards the job's frames as
    # they arrive: ifInDiscards, per port, counted as FCS errors are (no class label on either).
    series = pl.DataFrame(
        {
            "metric": [physics.DISCARDED, physics.FCS, physics.DISCARDED],
            "queue": [None, None, "3"],
            "direction": [None, None, "rx"],
            "priority": [None, None, None],
        },
        schema_overrides={"queue": pl.String, "direction": pl.String, "priority": pl.String},
    )
    quantities = series.select(quantity=physics.quantity_of("3"))["quantity"].to_list()
    assert quantities == ["discarded", "fcs", "discarded"]
    # 100 frames discarded in a 1 s window: 100 x 4 KiB lost per second, 0.3 s of it per step, sent again
    # at the 400 MB/s left to the job after one round trip.
    cells = _cells_of_a_second_window(discarded=100.0)
    assert cells.select("window", "device", "cause").rows() == [(1, "b", "loss_recovery")]
    assert cells["physics"].item() == pytest.approx(1e-3 + 100 * rules.FRAME_BYTES * 0.3 / 4e8)


def test_a_wave_down_costs_a_job_nothing_where_its_class_crossed_no_byte() -> None:
    # Half the link's waves down for a second. A job syncing every N steps sent nothing over it then: the
    # capacity lost slowed nothing of it. Sending its 100 MB step, it went at the 200 MB/s left instead of
    # 400: 0.25 s more.
    assert _cells_of_a_second_window(down=0.5)["physics"].sum() == 0.0
    cells = _cells_of_a_second_window(own=1e8, down=0.5, sent=1e8)
    assert cells.select("window", "cause").rows() == [(1, "lost_capacity")]
    assert cells["physics"].item() == pytest.approx(1e8 / 2e8 - 1e8 / 4e8)


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
    amounts = pl.DataFrame(
        {
            "window": [0, 1, 2],
            "link": "l1",
            "device": "a",
            "covered": 1.0,
            "seconds": 1.0,
            **_zeros("sent", "queued"),
            "sent": 1e8,
            "queued": [0.0, 2e6, 0.0],
            "base_rate": 1e8,
            "own_rate": 1e8,
            "rate_noise": 0.0,
        }
    )
    ends = pl.DataFrame(
        {"link": ["l1"], "device": ["a"], "interfaces": [1], "capacity": [4e8]},
        schema_overrides={"interfaces": pl.UInt32},
    )
    links = pl.DataFrame({"link": ["l1"], "bytes": [1e7], "round_trip_seconds": [1e-3]})
    windows = pl.DataFrame({"window": [0, 1, 2], "seconds_step": 0.3})
    cells = episode.step_physics(windows, amounts, ends, links)
    assert cells.select("window", "cause").rows() == [(1, "queueing")]
    assert cells["physics"].item() == pytest.approx(0.02)


def test_a_job_that_sends_in_few_windows_is_spread_by_its_mean_rate() -> None:
    # DiLoCo syncing every 20 steps: the job sends in one window of twenty, 3 parts on l1 for 1 on l2.
    # No window is typical of its traffic (both medians are 0); the mean rates still spread its bytes.
    n = 40
    sent = {
        "l1": [3e9 if i % 20 == 19 else 0.0 for i in range(n)],
        "l2": [1e9 if i % 20 == 19 else 0.0 for i in range(n)],
    }
    amounts = pl.DataFrame(
        [
            {"window": i, "link": link, "device": "a", "seconds": 1.0, "sent": values[i]}
            for link, values in sent.items()
            for i in range(n)
        ]
    )
    rates = steady.job_rates(amounts)
    assert rates["base_rate"].to_list() == [0.0, 0.0]
    spread = steady.link_bytes(rates, steady.JobFigures(bytes_per_step=8e9), 1.0).sort("link")
    assert spread["bytes"].to_list() == pytest.approx([6e9, 2e9])


def test_a_sparse_job_is_spread_by_what_both_directions_carry() -> None:
    # DiLoCo syncing every 20 steps over l2 only, both ways; another tenant's load in the job's class on
    # l1, one way, for 5 windows: over the run it outweighs the job's two syncs, but is not the job's.
    n = 40
    sync = [2e9 if i % 20 == 19 else 0.0 for i in range(n)]
    tenant = [5e9 if 10 <= i < 15 else 0.0 for i in range(n)]
    ends = {("l1", "a"): tenant, ("l1", "b"): [0.0] * n, ("l2", "a"): sync, ("l2", "b"): sync}
    amounts = pl.DataFrame(
        [
            {"window": i, "link": link, "device": device, "seconds": 1.0, "sent": values[i]}
            for (link, device), values in ends.items()
            for i in range(n)
        ]
    )
    spread = steady.link_bytes(steady.job_rates(amounts), steady.JobFigures(bytes_per_step=2e9), 1.0)
    assert dict(spread.iter_rows()) == pytest.approx({"l1": 0.0, "l2": 2e9})


def test_a_job_that_never_exchanged_in_the_run_is_spread_evenly_over_the_links() -> None:
    # DiLoCo syncing less often than the run is long: the job's class carries only another tenant's load,
    # one way on l1; l2 carries nothing. Nothing tells the job's links apart: its declared bytes go evenly
    # (flows hashed over the links), and without a declared total they are unknown.
    n = 40
    one_way = [2e9 if i % 20 == 19 else 0.0 for i in range(n)]
    ends = {("l1", "a"): one_way, ("l1", "b"): [0.0] * n, ("l2", "a"): [0.0] * n, ("l2", "b"): [0.0] * n}
    amounts = pl.DataFrame(
        [
            {"window": i, "link": link, "device": device, "seconds": 1.0, "sent": values[i]}
            for (link, device), values in ends.items()
            for i in range(n)
        ]
    )
    rates = steady.job_rates(amounts)
    spread = steady.link_bytes(rates, steady.JobFigures(bytes_per_step=2e9), 1.0)
    assert dict(spread.iter_rows()) == pytest.approx({"l1": 1e9, "l2": 1e9})
    assert steady.link_bytes(rates, steady.JobFigures(), 1.0).is_empty()


def test_a_sparse_senders_own_bursts_are_not_other_traffic() -> None:
    # DiLoCo syncing every 8 steps: the job's class carries 8 GB/s in one window of eight and nothing between,
    # so its median rate is 0. Its own bursts are then read against its rate when it sends, and only what
    # comes on top of one (30 GB/s more, in the last window) is other traffic in its class.
    sent = ([8e9] + [0.0] * 7) * 12 + [3.8e10]
    n = len(sent)
    amounts = _one_end(sent)
    rates = steady.job_rates(amounts)
    assert rates["base_rate"].item() == 0.0
    assert rates["sending_rate"].item() == pytest.approx(8e9)
    assert steady.sends_sparsely(rates)  # its median stays 0 for the beat and the bytes' spread
    read = episode.with_job_rates(amounts, rates).with_columns(capacity=pl.lit(1e11))
    causing = read.filter(episode.has_a_cause())
    assert causing["window"].to_list() == [n - 1]
