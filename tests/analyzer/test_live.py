"""The live path (``spanwatch follow``): logs tailed as they grow, the archive read as it is flushed, and the
blame over a sliding window putting the cost on the right link, in bounded memory."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from synthetic_fabric import T0, Episode, config_yaml, step_rows, write_archive

from analyzer import blame, live, physics, schemas, telemetry, topology
from analyzer.archive_tail import ArchiveTail
from analyzer.attribution import beat
from analyzer.errors import IngestError
from analyzer.ingest import tail as tail_module
from analyzer.ingest.tail import LogTail
from analyzer.thresholds import Thresholds
from spanwatch.follow import Follower


def _line(step: int, start: float, end: float, rank: int = 0) -> str:
    stamp = lambda s: (T0 + timedelta(seconds=s)).isoformat().replace("+00:00", "Z")  # noqa: E731
    return json.dumps({"step": step, "start": stamp(start), "end": stamp(end), "rank": rank}) + "\n"


def _append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


def test_tail_reads_complete_lines_and_numbers_bad_ones_in_the_file(tmp_path: Path) -> None:
    log = tmp_path / "steps.jsonl"
    tail = LogTail(log, None, tmp_path)
    assert tail.read().steps.is_empty()  # no file yet: waits for it
    whole = _line(3, 3.0, 4.0)
    log.write_text(_line(1, 1.0, 2.0) + _line(2, 2.0, 3.0) + whole[:20])  # the third is still being written
    first = tail.read()
    assert first.steps["step"].to_list() == [1, 2] and first.lines == 2
    _append(log, whole[20:] + '{"step": "x"}\n' + _line(4, 4.0, 5.0))
    second = tail.read()
    assert second.steps["step"].to_list() == [3, 4]
    assert [(p.line, p.file) for p in second.problems] == [(4, str(log))]
    assert second.steps["source_file"].unique().to_list() == [str(log)]
    log.write_text(_line(9, 9.0, 10.0))  # rotated: a new, shorter file
    assert tail.read().steps["step"].to_list() == [9]
    tail.close()


def test_tail_drops_a_line_that_never_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A log that stops writing newlines (a binary blob): the line is reported once, dropped up to its
    # newline, and the tail's memory stays bounded while it grows.
    monkeypatch.setattr(tail_module, "MAX_LINE_BYTES", 100)
    log = tmp_path / "steps.jsonl"
    log.write_text(_line(1, 1.0, 2.0))
    tail = LogTail(log, "steplog", tmp_path)
    assert tail.read().steps["step"].to_list() == [1]
    _append(log, "x" * 150)
    assert [(p.line, "longer than 100 bytes" in p.reason) for p in tail.read().problems] == [(2, True)]
    _append(log, "y" * 150)
    assert tail.read().problems == [] and len(tail._partial) == 0
    _append(log, "z\n" + _line(3, 3.0, 4.0))
    after = tail.read()
    assert after.steps["step"].to_list() == [3] and after.problems == []
    tail.close()


def test_tail_gives_megatron_lines_their_interval_from_the_line_before(tmp_path: Path) -> None:
    log = tmp_path / "megatron.log"

    def iteration(it: int, clock: str) -> str:
        return (
            f"[2026-11-30 10:00:{clock}] iteration {it:8d}/    1000 | consumed samples: {it * 8:8d} | "
            "elapsed time per iteration (ms): 1000.0 | lm loss: 7.0E+00 |\n"
        )

    log.write_text(iteration(10, "10.000000"))
    tail = LogTail(log, None, tmp_path)
    tail.read()
    assert tail.format == "megatron"
    _append(log, iteration(20, "20.000000"))
    row = tail.read().steps.row(0, named=True)
    assert row["step"] == 20 and row["interval_steps"] == 10
    assert row["start_time"] == T0 + timedelta(seconds=10)  # the previous line's clock, read before
    tail.close()


def test_tail_refuses_a_format_it_cannot_follow(tmp_path: Path) -> None:
    with pytest.raises(IngestError):
        LogTail(tmp_path / "trace.json", "kineto", tmp_path)


def _flushes(root: Path, seconds: int, episodes: list[Episode], every: int) -> list[pl.DataFrame]:
    """The synthetic fabric's readings cut into ``every``-second files, as the collector flushes them."""
    write_archive(root, seconds, episodes)
    files = sorted(root.rglob("*.parquet"))
    frame = pl.concat([pl.read_parquet(f) for f in files])
    for f in files:
        f.unlink()
    offset = (pl.col("time") - T0).dt.total_seconds() // every
    return [
        part
        for _, part in sorted(frame.with_columns(chunk=offset).partition_by("chunk", as_dict=True).items())
    ]


def test_the_window_blames_the_episode_link_soon_and_stays_bounded(tmp_path: Path) -> None:
    """Steps appended to a log and readings flushed every 5 s: the PFC episode on l1 (40-50 s) shows on
    l1 and not on l2 while it lasts, and nothing older than the window is kept."""
    episodes = [Episode("pfc", "a1", 40, 50)]
    archive = tmp_path / "archive"
    flushes = _flushes(archive, 120, episodes, 5)
    rows = sorted(step_rows(120, episodes, ranks=2), key=lambda r: str(r["end"]))
    log = tmp_path / "steps.jsonl"
    log.touch()
    members = topology.link_members(topology.load_config(config_yaml(tmp_path / "config.yaml")))
    tail, reader = LogTail(log, None, tmp_path), ArchiveTail(archive)
    window = live.Window(live.Settings(window_seconds=30.0, recent_seconds=4.0))
    seen: dict[int, dict[str, float]] = {}
    folder = archive / "date=2026-11-30" / "hour=10"
    folder.mkdir(parents=True, exist_ok=True)
    for i, flush in enumerate(flushes):
        now = T0 + timedelta(seconds=5 * (i + 1))
        flush.drop("chunk").write_parquet(folder / f"test-{i:04d}.parquet")
        _append(
            log,
            "".join(_line(int(r["step"]), *_seconds(r), int(r["rank"])) for r in rows if _ends_by(r, now)),
        )
        rows = [r for r in rows if not _ends_by(r, now)]
        window.add_steps(tail.read().steps)
        window.add_readings(reader.read(window.cutoff()))
        figures = live.compute(window, members, blame.JobFigures(traffic_class="3"), Thresholds())
        seen[5 * (i + 1)] = figures.network_seconds
        cutoff = window.cutoff()
        assert cutoff is not None and window.steps["end_time"].min() >= cutoff
        assert window.readings()["time"].min() >= cutoff
    during = [seen[t] for t in (45, 50)]
    assert all(s["l1"] > 0.1 and s["l2"] == 0.0 for s in during), seen
    assert all(seen[t]["l1"] == 0.0 for t in (20, 30, 70, 80)), seen
    # The run's first steps, kept for the job's own beat: here all of them (a short run).
    assert window.first_steps.height == len(step_rows(120, episodes, ranks=2)) > window.steps.height
    tail.close()


def _states(metric: str, seconds: list[float], values: list[float]) -> pl.DataFrame:
    """``schemas.TELEMETRY`` rows of one link state series of device a, port e1."""
    times = [T0 + timedelta(seconds=x) for x in seconds]
    rows = {"time": times, "device": "a", "metric": metric, "interface": "e1", "value": values}
    return (
        pl.DataFrame(rows)
        .with_columns([pl.lit(None).alias(c) for c in schemas.TELEMETRY.names() if c not in rows])
        .select(schemas.TELEMETRY.names())
        .cast(schemas.TELEMETRY)
    )


def test_the_window_starts_with_the_link_states_read_before_it() -> None:
    """gNMI sends oper-status on change: the wave read down at 10 s is still down when the window has moved
    past that reading (a speed is sampled every second), and stays so as it moves on."""
    window = live.Window(live.Settings(window_seconds=30.0))
    window.add_readings(_states(physics.UP, [0.0, 10.0], [1.0, 0.0]))
    for second in range(0, 100, 5):
        window.add_readings(_states(physics.SPEED, [float(x) for x in range(second, second + 5)], [5e10] * 5))
        states = window.readings().filter(pl.col("metric") == physics.UP).sort("time")
        assert 1 <= states.height <= 2, states  # the carried state and the reading inside, if any
        assert states["value"].to_list()[-1] == 0.0, states
        assert states["time"].min() >= window.cutoff()  # type: ignore[operator]
    ends = physics.readings(telemetry.signals(window.readings().lazy()), *_labels(window)).collect()
    assert ends.filter(pl.col("quantity") == "down")["amount"].sum() == pytest.approx(30.0, abs=1.0)


def test_a_follower_started_while_a_wave_is_down_reads_it_down(tmp_path: Path) -> None:
    """The wave went down two hours before the follower started, and gNMI sent "down" once: the first read
    finds that reading in an earlier hour's partition, and the window starts with it."""
    archive = tmp_path / "archive"
    earlier = archive / "date=2026-11-30" / "hour=08"
    earlier.mkdir(parents=True)
    _states(physics.UP, [-7200.0, -7190.0], [1.0, 0.0]).write_parquet(earlier / "a-0000.parquet")
    now = archive / "date=2026-11-30" / "hour=10"
    now.mkdir(parents=True)
    _states(physics.SPEED, [float(x) for x in range(60)], [5e10] * 60).write_parquet(now / "a-0001.parquet")

    def state_at_start() -> list[float]:
        window = live.Window(live.Settings(window_seconds=30.0))
        window.add_readings(ArchiveTail(archive).read(T0 + timedelta(seconds=30)))
        states = window.readings().filter(pl.col("metric") == physics.UP)
        assert states["time"].min() >= window.cutoff()  # type: ignore[operator]
        return states["value"].to_list()

    assert state_at_start() == [0.0]
    # Back up 5 s into this hour, before the window: the newest state before it is read, wherever it lies.
    _states(physics.UP, [5.0], [1.0]).write_parquet(now / "a-0002.parquet")
    assert state_at_start() == [1.0]


def _labels(window: live.Window) -> tuple[pl.LazyFrame, str]:
    """The series labels of the window's readings, on link l1 (its device a)."""
    labels = telemetry.series_labels(window.readings().lazy()).with_columns(link=pl.lit("l1"))
    return labels, "3"


def test_the_window_keeps_the_runs_first_steps_for_the_beat_and_no_more() -> None:
    window = live.Window(live.Settings(window_seconds=30.0))
    for chunk in range(3):
        steps = range(1 + chunk * 3000, 1 + (chunk + 1) * 3000)
        rows = pl.DataFrame(
            {"step": list(steps), "rank": 0, "end_time": [T0 + timedelta(seconds=0.1 * s) for s in steps]}
        )
        window.add_steps(pl.concat([schemas.empty("steps"), rows], how="diagonal_relaxed"))
    assert window.steps.height < 400  # the window: 30 s of 0.1 s steps
    assert window.first_steps["step"].to_list() == list(range(1, 1 + beat.STEPS_READ))


def test_the_window_reads_the_beat_again_only_as_its_first_steps_grow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[int] = []
    monkeypatch.setattr(live.pipeline, "read_beat", lambda steps: reads.append(steps.height) or ((22, 0),))
    window = live.Window(live.Settings(window_seconds=30.0))
    for first in (1, 101, 20_001):  # the last steps are past the first ones kept
        steps = range(first, first + 100)
        rows = pl.DataFrame(
            {"step": list(steps), "rank": 0, "end_time": [T0 + timedelta(seconds=0.1 * s) for s in steps]}
        )
        window.add_steps(pl.concat([schemas.empty("steps"), rows], how="diagonal_relaxed"))
        assert window.beat() == ((22, 0),)
        assert window.beat() == ((22, 0),)
    assert reads == [100, 200]


def test_the_window_reads_another_sender_in_the_jobs_class_as_the_analysis_does(tmp_path: Path) -> None:
    """A link end that sends more of the job's class than the whole job can (20-25 s on a1) is a ``burst``
    live too, where the job's bytes per step are known, and is not read without them."""
    write_archive(tmp_path / "archive", 40, [])
    readings = ArchiveTail(tmp_path / "archive").read()
    # One step a second sending 1e9 bytes: a 1 s reading holds at most about 3e9 of the job's.
    packets = readings.filter(
        (pl.col("device") == "a1") & (pl.col("metric") == "dci_queue_transmit_packets_total")
    ).sort("time")
    added = [8e9 if 20 < t <= 25 else 0.5e9 for t in range(packets.height)]
    totals = pl.Series([sum(added[: t + 1]) for t in range(packets.height)])
    sent = packets.with_columns(
        metric=pl.lit(physics.SENT).cast(readings.schema["metric"]),
        value=totals,
        counter=totals.cast(readings.schema["counter"]),
    )
    log = tmp_path / "steps.jsonl"
    log.write_text("".join(_line(int(r["step"]), *_seconds(r), int(r["rank"])) for r in step_rows(40, [])))
    window = live.Window(live.Settings(window_seconds=60.0, recent_seconds=40.0))
    window.add_steps(LogTail(log, None, tmp_path).read().steps)
    window.add_readings(pl.concat([readings, sent]))
    members = topology.link_members(topology.load_config(config_yaml(tmp_path / "config.yaml")))
    known = live.compute(window, members, blame.JobFigures(1e9, "3"), Thresholds())
    assert known.events.get(("l1", "burst")) == 1, known.events
    assert not any(kind == "burst" for link, kind in known.events if link != "l1")
    unknown = live.compute(window, members, blame.JobFigures(traffic_class="3"), Thresholds())
    assert ("l1", "burst") not in unknown.events


def _seconds(row: dict[str, object]) -> tuple[float, float]:
    return tuple(  # type: ignore[return-value]
        (pl.Series([str(row[k])]).str.to_datetime(time_zone="UTC")[0] - T0).total_seconds()
        for k in ("start", "end")
    )


def _ends_by(row: dict[str, object], now: object) -> bool:
    return bool(pl.Series([str(row["end"])]).str.to_datetime(time_zone="UTC")[0] <= now)


def test_the_follower_exports_the_figures_per_link(tmp_path: Path) -> None:
    episodes = [Episode("pfc", "b2", 20, 30)]
    write_archive(tmp_path / "archive", 35, episodes)
    log = tmp_path / "steps.jsonl"
    log.write_text(
        "".join(_line(int(r["step"]), *_seconds(r), int(r["rank"])) for r in step_rows(30, episodes))
        + "not json\n"
    )
    members = topology.link_members(topology.load_config(config_yaml(tmp_path / "config.yaml")))
    follower = Follower(
        [log],
        None,
        tmp_path / "archive",
        members,
        blame.JobFigures(traffic_class="3"),
        live.Settings(window_seconds=60.0, recent_seconds=5.0),
        Thresholds(),
    )
    follower.tick()
    store = follower.store
    assert float(store.value("spanwatch_training_network_seconds", (("link", "l2"),)) or 0) > 0.1  # type: ignore[arg-type]
    assert store.value("spanwatch_training_network_seconds", (("link", "l1"),)) == 0.0
    peak = store.value("spanwatch_training_network_peak_seconds", (("link", "l2"),))
    assert float(peak or 0) >= float(
        store.value("spanwatch_training_network_seconds", (("link", "l2"),)) or 0
    )  # type: ignore[arg-type]
    assert store.value("spanwatch_training_malformed_lines_total", ()) == 1
    assert float(store.value("spanwatch_training_step_seconds", ()) or 0) > 1.0  # type: ignore[arg-type]
    follower.close()
