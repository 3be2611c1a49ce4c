"""Event detection on synthetic archives written with the collector's archive writer."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from synthetic_fabric import T0, Episode, write_archive

from analyzer import events, schemas, telemetry
from analyzer.thresholds import Thresholds


def detect(root: Path, thresholds: Thresholds | None = None, bdp: pl.LazyFrame | None = None) -> pl.DataFrame:
    readings = telemetry.scan_archive(root)
    sig, labels = telemetry.signals(readings), telemetry.series_labels(readings)
    return events.detect_events(sig, thresholds or Thresholds(), labels, bdp).collect()


# Counter rates and watermarks describe (t-1, t]: an episode over [start, end) seconds shows exactly there;
# a state (oper-status) holds from its reading to the next, so it does too. Instant gauges (BER, OSNR) are
# placed half a sample early at each edge.
@pytest.mark.parametrize(
    ("kind", "offset"),
    [
        ("drops", 0.0),
        ("ecn", 0.0),
        ("pfc", 0.0),
        ("queue", 0.0),
        ("fcs", 0.0),
        ("wave_down", 0.0),
        ("ber", -0.5),
        ("osnr", -0.5),
    ],
)
def test_each_kind_is_detected_with_its_boundaries(tmp_path: Path, kind: str, offset: float) -> None:
    write_archive(tmp_path, 120, [Episode(kind, "a1", 40, 60)])
    found = detect(tmp_path)
    assert found.height == 1, found
    event = found.row(0, named=True)
    assert (event["kind"], event["link"], event["device"], event["interface"]) == (
        kind,
        "l1",
        "a1",
        "Ethernet1",
    )
    assert event["start_time"] == T0 + timedelta(seconds=40 + offset)
    assert event["end_time"] == T0 + timedelta(seconds=60 + offset)
    assert event["duration_seconds"] == pytest.approx(20.0)


def test_quiet_fabric_has_no_events(tmp_path: Path) -> None:
    write_archive(tmp_path, 60, [])
    assert detect(tmp_path).height == 0


def test_close_episodes_merge_and_far_ones_do_not(tmp_path: Path) -> None:
    eps = [Episode("drops", "a1", 10, 20), Episode("drops", "a1", 21, 30), Episode("drops", "a1", 50, 60)]
    write_archive(tmp_path, 80, eps)
    found = detect(tmp_path).sort("start_time")
    assert found["duration_seconds"].to_list() == [20.0, 10.0]
    separate = detect(tmp_path, Thresholds(merge_gap_seconds=0))
    assert separate.height == 3


def test_minimum_duration_drops_short_episodes(tmp_path: Path) -> None:
    write_archive(tmp_path, 60, [Episode("drops", "b1", 10, 12), Episode("drops", "b1", 30, 45)])
    found = detect(tmp_path, Thresholds(min_duration_seconds=5))
    assert found["duration_seconds"].to_list() == [15.0]


def test_hysteresis_keeps_an_episode_through_a_dip_between_levels() -> None:
    # A drop rate of 5, 5, 0.8, 5, 0.2: 0.8 is under enter (1) but over exit (0.5), so the episode holds.
    times = [T0 + timedelta(seconds=s) for s in range(6)]
    totals = [0.0, 5.0, 10.0, 10.8, 15.8, 16.0]  # floats: the value column (no exact counter)
    frame = pl.DataFrame(
        {
            "time": times,
            "device": "a1",
            "metric": "dci_queue_dropped_packets_total",
            "interface": "Ethernet1",
            "link": "l1",
            "value": totals,
        }
    )
    readings = schemas.conform_lazy(schemas.TELEMETRY, frame.lazy())
    sig, labels = telemetry.signals(readings), telemetry.series_labels(readings)
    found = events.detect_events(
        sig, Thresholds(drop_rate_exit_pps=0.5, merge_gap_seconds=0), labels
    ).collect()
    assert found.height == 1
    assert found["duration_seconds"].item() == 4.0
    strict = events.detect_events(
        sig, Thresholds(drop_rate_exit_pps=1.0, merge_gap_seconds=0), labels
    ).collect()
    assert strict.height == 2


def test_queue_threshold_follows_the_bandwidth_delay_product(tmp_path: Path) -> None:
    # Enter at 1.5 x BDP: a 9 MB watermark is a congestion episode on a 5 MB-BDP interface, not on 40 MB.
    write_archive(tmp_path, 60, [Episode("queue", "a1", 10, 20)])
    bdp = pl.LazyFrame({"device": ["a1"], "interface": ["Ethernet1"], "bdp_bytes": [5e6]})
    assert detect(tmp_path, bdp=bdp).height == 1
    deep = pl.LazyFrame({"device": ["a1"], "interface": ["Ethernet1"], "bdp_bytes": [40e6]})
    assert detect(tmp_path, bdp=deep).height == 0


def test_queue_threshold_has_a_floor_of_a_few_frames(tmp_path: Path) -> None:
    # At near-zero distance 1.5 x BDP is under one frame: the floor keeps a queue at work (20 kB here, under
    # a 30 kB floor) quiet, and the 9 MB episode is still one.
    write_archive(tmp_path, 60, [Episode("queue", "a1", 10, 20)])
    near = pl.LazyFrame({"device": ["a1"], "interface": ["Ethernet1"], "bdp_bytes": [1.0]})
    floor = Thresholds(queue_floor_enter_bytes=3e4, queue_floor_exit_bytes=2.5e4)
    found = detect(tmp_path, floor, near)
    assert found.height == 1 and found["duration_seconds"].item() == pytest.approx(10.0)


def test_spilled_batches_give_the_same_result_as_one_pass_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from analyzer import network, spill, telemetry, topology

    write_archive(tmp_path, 120, [Episode("drops", "a1", 10, 30), Episode("pfc", "b2", 50, 70)])
    members = topology.link_members(None)
    whole = network.analyse_telemetry(telemetry.scan_archive(tmp_path), Thresholds(), members)
    # One batch; one device a batch; and files read in pieces of 100 rows, so series keep turning up
    # in later pieces.
    for max_rows, piece_rows in ((network.DEFAULT_BATCH_ROWS, spill.PIECE_ROWS), (2_000, 100)):
        monkeypatch.setattr(spill, "PIECE_ROWS", piece_rows)
        batched = network.analyse_archive(tmp_path, Thresholds(), members, max_rows=max_rows)
        assert batched.events.height == 2
        assert batched.events.drop("event_id").equals(whole.events.drop("event_id"))
        keys = ["device", "interface", "metric"]
        assert_frame_equal(batched.totals.sort(keys), whole.totals.sort(keys), check_exact=False)
        samples_keys = ["device", "interface", "link", "metric", "bucket"]
        assert_frame_equal(batched.samples.sort(samples_keys), whole.samples.sort(samples_keys))
        assert batched.rows == whole.rows


def _series(metric: str, values: list[float], **labels: str) -> pl.DataFrame:
    """One reading a second of one series on a1/Ethernet1 (link l1); counters as running totals."""
    times = [T0 + timedelta(seconds=s) for s in range(len(values))]
    return pl.DataFrame(
        {
            "time": times,
            "device": "a1",
            "metric": metric,
            "interface": "Ethernet1",
            "link": "l1",
            "value": values,
        }
    ).with_columns(pl.lit(v).alias(k) for k, v in labels.items())


def _detect(
    *series: pl.DataFrame, job_class: str | None = None, bdp: pl.LazyFrame | None = None
) -> pl.DataFrame:
    frame = pl.concat(series, how="diagonal_relaxed")
    readings = schemas.conform_lazy(schemas.TELEMETRY, frame.lazy())
    sig, labels = telemetry.signals(readings), telemetry.series_labels(readings)
    return events.detect_events(sig, Thresholds(), labels, bdp=bdp, job_class=job_class).collect()


def _total(rates: list[float]) -> list[float]:
    return [float(sum(rates[: i + 1])) for i in range(len(rates))]


def _window(start: int, end: int, inside: float, outside: float, seconds: int = 60) -> list[float]:
    return [inside if start < s <= end else outside for s in range(seconds + 1)]


def test_a_standing_optical_margin_is_its_normal_and_a_departure_is_an_episode() -> None:
    # A long wave reads BER 8e-3 all run (past a tenth of the 2e-2 FEC limit): its margin, not an episode.
    ber = _series("dci_optics_pre_fec_ber", _window(30, 40, 1.8e-2, 8e-3))
    found = _detect(ber)
    assert found["kind"].to_list() == ["ber"]
    assert found["start_time"].item() == T0 + timedelta(seconds=30.5)
    assert found["end_time"].item() == T0 + timedelta(seconds=40.5)
    osnr = _series("dci_optics_osnr_db", _window(30, 40, 28.2, 29.5))  # 1.5 dB over the required 28 dB
    assert _detect(osnr)["kind"].to_list() == ["osnr"]


def test_another_class_in_its_normal_state_is_not_an_episode() -> None:
    drops = _series("dci_queue_dropped_packets_total", _total(_window(20, 30, 50_000, 2_000)), queue="0")
    found = _detect(drops, job_class="3")
    assert found.select("kind", "queue").rows() == [("drops", "0")]
    assert found["duration_seconds"].item() == 10.0
    # The job's own class enters at the absolute level: its drops are never normal.
    assert _detect(drops, job_class="0")["duration_seconds"].to_list() == [60.0]


def test_errors_while_the_wave_is_down_are_the_outage_not_optics() -> None:
    down = _series("dci_interface_oper_up", _window(19, 30, 0.0, 1.0))
    # Loss of light and relocking count FCS errors up to the reading after the wave is back.
    fcs = _series("dci_interface_receive_fcs_errors_total", _total(_window(20, 31, 1_000, 0)))
    sentinel = _series("dci_optics_pre_fec_ber", _window(19, 30, 0.5, 1e-4))
    assert _detect(down, fcs, sentinel)["kind"].to_list() == ["wave_down"]


def test_a_surge_of_the_job_class_that_squeezes_another_class_is_a_burst() -> None:
    sent = _series("dci_queue_transmit_packets_total", _total(_window(20, 30, 1e6, 1e5)), queue="3")
    drops = _series("dci_queue_dropped_packets_total", _total(_window(20, 30, 10_000, 0)), queue="0")
    found = _detect(sent, drops, job_class="3")
    assert found.select("kind", "queue", "duration_seconds").rows() == [("burst", "3", 10.0)]
    # Without the squeeze the job's class is just busy; without the surge the other class has its own.
    assert _detect(sent, job_class="3").height == 0
    quiet = _series("dci_queue_transmit_packets_total", _total([1e5] * 61), queue="3")
    assert _detect(quiet, drops, job_class="3").select("kind", "queue").rows() == [("drops", "0")]


def test_another_classs_long_episode_with_a_short_surge_inside_is_its_own() -> None:
    # Class 0 drops from 20 to 30 s; the job's class surges for 2 s inside it: the surge explains a fifth
    # of the drops' time at most, so they are an episode of their own (the lab's background congestion).
    drops = _series("dci_queue_dropped_packets_total", _total(_window(20, 30, 10_000, 0)), queue="0")
    sent = _series("dci_queue_transmit_packets_total", _total(_window(24, 26, 1e6, 1e5)), queue="3")
    found = _detect(sent, drops, job_class="3")
    assert ("drops", "0", 10.0) in found.select("kind", "queue", "duration_seconds").rows()


def test_one_optical_event_per_wave_end() -> None:
    ber = _series("dci_optics_pre_fec_ber", _window(20, 40, 5e-2, 1e-5))
    fcs = _series("dci_interface_receive_fcs_errors_total", _total(_window(25, 38, 1_000, 0)))
    assert _detect(ber, fcs)["kind"].to_list() == ["ber"]


def test_another_class_starting_where_a_surge_ends_is_its_own_episode() -> None:
    # The job's class surges until the reading at 12 s; another class drops from that reading on: sharing
    # one reading's edge, its episode is not the surge seen from below.
    sent = _series("dci_queue_transmit_packets_total", _total(_window(10, 12, 1e6, 1e5)), queue="3")
    drops = _series("dci_queue_dropped_packets_total", _total(_window(12, 20, 10_000, 0)), queue="0")
    found = _detect(sent, drops, job_class="3")
    assert ("drops", "0") in found.select("kind", "queue").rows()


def test_another_class_squeezed_without_more_load_is_not_its_own_episode() -> None:
    # Class 0 is offered 1e5 packets/s all run. From 20 to 30 s the job's class takes more of the port
    # (no surge: 1.3x its rate), so class 0 sends less and drops the rest: nothing more was offered.
    drops = _series("dci_queue_dropped_packets_total", _total(_window(20, 30, 30_000, 2_000)), queue="0")
    sent = _series("dci_queue_transmit_packets_total", _total(_window(20, 30, 70_000, 98_000)), queue="0")
    job = _series("dci_queue_transmit_packets_total", _total(_window(20, 30, 1.3e6, 1e6)), queue="3")
    assert _detect(drops, sent, job, job_class="3").height == 0
    # Another tenant offering twice its load in that class is an episode of its own.
    tenant = _series("dci_queue_transmit_packets_total", _total(_window(20, 30, 170_000, 98_000)), queue="0")
    found = _detect(drops, tenant, job, job_class="3")
    assert found.select("kind", "queue", "duration_seconds").rows() == [("drops", "0", 10.0)]


def test_another_tenants_episode_inside_one_of_the_job_class_is_its_own() -> None:
    # The job's class drops from 10 to 50 s. Class 0 drops from 20 to 30 s: when it was offered its usual
    # 1e5 packets/s, that is the job's episode seen from below; offered twice that, another tenant's.
    job = _series("dci_queue_dropped_packets_total", _total(_window(10, 50, 10_000, 0)), queue="3")
    drops = _series("dci_queue_dropped_packets_total", _total(_window(20, 30, 30_000, 2_000)), queue="0")
    squeezed = _series("dci_queue_transmit_packets_total", _total(_window(20, 30, 70_000, 98_000)), queue="0")
    assert _detect(job, drops, squeezed, job_class="3")["queue"].to_list() == ["3"]
    tenant = _series("dci_queue_transmit_packets_total", _total(_window(20, 30, 170_000, 98_000)), queue="0")
    found = _detect(job, drops, tenant, job_class="3").sort("queue")
    assert found.select("kind", "queue", "duration_seconds").rows() == [
        ("drops", "0", 10.0),
        ("drops", "3", 40.0),
    ]


def test_another_classs_burst_shorter_than_a_poll_is_seen_in_its_one_reading() -> None:
    # Class 0 drops 30 000 packets in the poll that ends at 30 s (a 200 ms burst) and nothing else.
    burst = _series("dci_queue_dropped_packets_total", _total(_window(29, 30, 30_000, 0)), queue="0")
    found = _detect(burst, job_class="3")
    assert found.select("kind", "queue", "duration_seconds").rows() == [("drops", "0", 1.0)]
    # A counter read again a tenth of a second after a reading (a second subscription of the leaf) gives
    # a rate over that tenth alone: one such reading is no episode.
    flat = _series("dci_queue_dropped_packets_total", _total(_window(29, 30, 3_000, 0)), queue="0")
    extra = flat.filter(pl.col("time") == T0 + timedelta(seconds=30)).with_columns(
        time=pl.lit(T0 + timedelta(seconds=29.1))
    )
    assert _detect(flat.vstack(extra).sort("time"), job_class="3").height == 0


def test_a_standing_ingress_queue_of_the_job_class_is_a_queue_event() -> None:
    # A far switch holding the job's bytes (an incast on its hosts) shows in its ingress queue only.
    held = _series("dci_queue_watermark_bytes", _window(20, 30, 5e6, 0.0), queue="3", direction="rx")
    egress = _series("dci_queue_watermark_bytes", [0.0] * 61, queue="3")
    found = _detect(held, egress, job_class="3")
    assert found.select("kind", "link", "interface", "queue").rows() == [("queue", "l1", "Ethernet1", "3")]
    assert found["start_time"].item() == T0 + timedelta(seconds=20)
    assert found["duration_seconds"].item() == 10.0


def test_an_ingress_backlog_is_an_episode_below_the_links_bdp_where_an_egress_queue_is_not() -> None:
    # 75 MB held at the far end of a 100 MB-BDP wave (the default demo's fan-in-4 incast): a clean far switch
    # forwards as fast as the link brings, so any standing receive backlog is the far side failing to drain.
    # The same depth at egress is the job's own burst (under 1.5 BDP) and no episode.
    bdp = pl.LazyFrame({"device": ["a1"], "interface": ["Ethernet1"], "bdp_bytes": [100e6]})
    held = _series("dci_queue_watermark_bytes", _window(20, 27, 75e6, 0.0), queue="3", direction="rx")
    found = _detect(held, job_class="3", bdp=bdp)
    assert found.select("kind", "queue", "duration_seconds").rows() == [("queue", "3", 7.0)]
    bursts = _series("dci_queue_watermark_bytes", _window(20, 27, 75e6, 0.0), queue="3")
    assert _detect(bursts, job_class="3", bdp=bdp).height == 0


def test_an_ingress_queue_has_its_own_normal_beside_the_egress_queue() -> None:
    # Another class's egress queue stands at 8 MB all run (its normal); its ingress queue, usually empty,
    # holding 12 MB is an episode: with one normal for both it would be under 3 x 8 MB.
    egress = _series("dci_queue_watermark_bytes", [8e6] * 61, queue="0")
    ingress = _series("dci_queue_watermark_bytes", _window(20, 30, 12e6, 0.0), queue="0", direction="rx")
    found = _detect(egress, ingress, job_class="3")
    assert found.select("kind", "queue", "duration_seconds").rows() == [("queue", "0", 10.0)]


def test_queue_depth_samples_read_egress_queues_only() -> None:
    from analyzer import network

    egress = _series("dci_queue_watermark_bytes", [5e6] * 11, queue="3")
    ingress = _series("dci_queue_watermark_bytes", [0.0] * 11, queue="3", direction="rx")
    readings = schemas.conform_lazy(
        schemas.TELEMETRY, pl.concat([egress, ingress], how="diagonal_relaxed").lazy()
    )
    sig, labels = telemetry.signals(readings), telemetry.series_labels(readings)
    counts = network.samples(sig, labels).collect()
    assert counts["count"].sum() == 11  # the ingress queue's readings do not dilute the egress depths


def test_a_state_sent_only_when_it_changes_holds_from_its_reading_to_the_next() -> None:
    # gNMI ON_CHANGE oper-status: up at 0 s, down at 40 s, up at 46 s. The wave was down 40-46 s, not from
    # half-way between 0 and 40 s (a 26 s outage that also masks the optics of the 20 s before it).
    times = [T0, T0 + timedelta(seconds=40), T0 + timedelta(seconds=46), T0 + timedelta(seconds=60)]
    state = pl.DataFrame(
        {
            "time": times,
            "device": "a1",
            "metric": "dci_interface_oper_up",
            "interface": "Ethernet1",
            "link": "l1",
            "value": [1.0, 0.0, 1.0, 1.0],
        }
    )
    found = _detect(state)
    assert found.select("kind", "start_time", "end_time").rows() == [
        ("wave_down", T0 + timedelta(seconds=40), T0 + timedelta(seconds=46))
    ]


def test_errors_while_the_wave_relocks_are_the_outage_not_optics() -> None:
    # The far end's transmitter comes back a poll later: its receiver counts FCS errors for a reading or
    # two after it reads up again. Those are the outage's; errors later on are an episode of their own.
    down = _series("dci_interface_oper_up", _window(19, 30, 0.0, 1.0))
    relocking = _series("dci_interface_receive_fcs_errors_total", _total(_window(30, 32, 1_000, 0)))
    assert _detect(down, relocking)["kind"].to_list() == ["wave_down"]
    later = _series("dci_interface_receive_fcs_errors_total", _total(_window(40, 45, 1_000, 0)))
    assert sorted(_detect(down, later)["kind"].to_list()) == ["fcs", "wave_down"]
