"""The scorer catches each defect issue 12 lists, on hand-made truth and analysis folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from scoring_frames import (
    COSTS,
    EPISODES,
    EVENTS,
    STEPS,
    scaled,
    truth_doc,
    write_analysis,
    write_control,
    write_truth,
)

from spanwatch import score
from spanwatch.cli import main


def scored(
    tmp_path: Path, doc: dict[str, Any] | None = None, control: bool = True, **analysis: Any
) -> dict[str, Any]:
    """Write the truth and an analysis (with its control unless told), and score them."""
    truth = write_truth(tmp_path / "truth.json", doc)
    folder = write_analysis(tmp_path / "analysis", **analysis)
    if control:
        write_control(folder)
    return score.score(score.read_truth(truth), folder)


def test_a_perfect_analysis_passes_and_its_shifted_control_fails(tmp_path: Path) -> None:
    result = scored(tmp_path)
    for name in ("step_error", "false_blame", "link_error", "misplaced_blame", "steady_error"):
        assert result[name] == pytest.approx(0.0), name
    assert result["event_recall"] == 1.0
    assert result["event_precision"] == 1.0
    assert result["failed"] == {}
    control = result["control"]
    assert control["shift_ok"], control
    assert control["step_error"] == pytest.approx(1.0)
    assert control["fails_timing_goal"]
    assert result["passed"], result["why"]


def test_a_shifted_step_log_fails(tmp_path: Path) -> None:
    # The analyzer read the log 5 s late: each step got the cost of the step five before it.
    late = {s + 5: per for s, per in COSTS.items()}
    result = scored(tmp_path, costs=late, shift=5.0)
    assert result["step_error"] > 1.5  # the cost is on the wrong steps twice over
    assert result["misplaced_blame"] > 0.5
    assert not result["passed"]


def test_a_control_that_still_passes_fails_the_score(tmp_path: Path) -> None:
    truth = write_truth(tmp_path / "truth.json")
    folder = write_analysis(tmp_path / "analysis")
    write_control(folder, costs=COSTS)  # shifted, yet it finds the same costs: it measures nothing
    result = score.score(score.read_truth(truth), folder)
    assert result["failed"] == {}
    assert not result["control"]["fails_timing_goal"]
    assert not result["passed"]
    assert any("still meets every goal" in why for why in result["why"])


def test_a_control_that_is_not_shifted_as_called_for_fails_the_score(tmp_path: Path) -> None:
    truth = write_truth(tmp_path / "truth.json")
    folder = write_analysis(tmp_path / "analysis")
    write_control(folder, shift=20.0)
    result = score.score(score.read_truth(truth), folder)
    assert result["control"]["expected_shift_seconds"] == pytest.approx(100.0)  # 10 x the 10 s congestion
    assert not result["control"]["shift_ok"]
    assert not result["passed"]


def test_a_missing_control_is_reported_and_fails(tmp_path: Path) -> None:
    result = scored(tmp_path, control=False)
    assert result["failed"] == {}
    assert "no control analysis" in result["control"]["missing"]
    assert not result["passed"]


def test_congestion_on_the_wrong_wave_or_queue_is_no_detection(tmp_path: Path) -> None:
    incast = {
        "kind": "incast",
        "link": "L1",
        "wave": 3,
        "start": "25s",
        "duration": "2s",
        "interfaces": ["Ethernet1/3"],
        "queues": [3],
    }
    wrong_wave = {
        "kind": "pfc",
        "link": "L1",
        "interface": "Ethernet1/4",
        "queue": "3",
        "start": 25.0,
        "end": 27.0,
    }
    wrong_queue = {
        "kind": "ecn",
        "link": "L1",
        "interface": "Ethernet1/1",
        "queue": "0",
        "start": 10.5,
        "end": 20.0,
    }
    events = [wrong_queue, *EVENTS[2:], wrong_wave]
    result = scored(tmp_path, truth_doc(episodes=[*EPISODES, incast]), events=events)
    assert result["event_recall"] == pytest.approx(2 / 4)
    assert result["event_precision"] == pytest.approx(3 / 5)
    missed = result["detail"]["events"]["episodes_missed"]
    assert any(m.startswith("incast on L1 wave 3") for m in missed)
    assert any(m.startswith("congestion on L1") for m in missed)


def test_missed_episodes_that_did_not_slow_the_job_are_counted_by_kind(tmp_path: Path) -> None:
    """A diagnosis, not a goal: recall still counts them."""
    result = scored(tmp_path, events=EVENTS[:1])
    missed = result["detail"]["events"]["episodes_missed"]
    assert len(missed) == 2  # the wave down (it slowed the job) and the optical degradation (it did not)
    assert result["detail"]["events"]["missed_harmless"] == {"optical_degradation": 1}
    assert result["event_recall"] == pytest.approx(1 / 3)


def test_a_missed_wave_down_lowers_recall(tmp_path: Path) -> None:
    # Only drops while the wave was down: a congestion-family event cannot stand for an outage.
    drops = {
        "kind": "drops",
        "link": "L2",
        "interface": "Ethernet1/1",
        "queue": "3",
        "start": 30.2,
        "end": 35.0,
    }
    events = [e for e in EVENTS if e["kind"] != "wave_down"] + [drops]
    result = scored(tmp_path, events=events)
    assert result["event_recall"] == pytest.approx(2 / 3)
    assert "event_recall" in result["failed"]
    assert result["detail"]["events"]["unmatched_events_by_kind"] == {"drops": 1}


def test_optical_warnings_spanning_the_whole_run_do_not_match(tmp_path: Path) -> None:
    always = [
        {"kind": kind, "link": "L1", "interface": place, "queue": None, "start": 0.0, "end": float(STEPS)}
        for kind, place in (("osnr", "OpticalChannel1/2"), ("ber", "Ethernet1/2"))
    ]
    result = scored(tmp_path, events=[*EVENTS[:3], *always])
    assert result["event_recall"] == pytest.approx(2 / 3)  # the degradation is not found by them
    assert result["event_precision"] == pytest.approx(3 / 5)
    assert not result["passed"]


def test_a_short_burst_seen_as_one_poll_still_matches(tmp_path: Path) -> None:
    burst = {"kind": "burst", "link": "L2", "start": "25s", "duration": "200ms", "affects_job": False}
    seen = {
        "kind": "queue",
        "link": "L2",
        "interface": "Ethernet1/2",
        "queue": "3",
        "start": 25.0,
        "end": 26.0,
    }
    result = scored(tmp_path, truth_doc(episodes=[*EPISODES, burst]), events=[*EVENTS, seen])
    assert result["event_recall"] == 1.0
    assert result["event_precision"] == 1.0


def test_a_burst_that_runs_into_a_congestion_of_its_queue_is_found_by_their_one_event(tmp_path: Path) -> None:
    # One queue, one event: no reading can tell where the burst ends and the congestion begins.
    burst = {"kind": "burst", "link": "L2", "start": "24.9s", "duration": "100ms", "affects_job": False}
    congestion = {"kind": "congestion", "link": "L2", "start": "25s", "duration": "12s", "affects_job": False}
    seen = {
        "kind": "queue",
        "link": "L2",
        "interface": "Ethernet1/2",
        "queue": "3",
        "start": 24.0,
        "end": 38.0,
    }
    episodes = [*EPISODES, burst, congestion]
    result = scored(tmp_path, truth_doc(episodes=episodes), events=[*EVENTS, seen])
    assert result["event_recall"] == 1.0 and result["event_precision"] == 1.0
    # The same event beside the burst alone lies mostly outside it: it matches nothing.
    alone = scored(tmp_path / "alone", truth_doc(episodes=[*EPISODES, burst]), events=[*EVENTS, seen])
    assert alone["event_recall"] < 1.0 and alone["event_precision"] < 1.0


def test_over_and_under_attribution_that_cancel_are_caught_per_step(tmp_path: Path) -> None:
    # Steps 10-14 get 1.5 x their cost, steps 15-19 0.5 x: the link's total is exact.
    wrong = {
        s: {link: v * (1.5 if s < 15 else 0.5 if s < 20 else 1.0) for link, v in per.items()}
        for s, per in COSTS.items()
    }
    result = scored(tmp_path, costs=wrong)
    l1 = next(row for row in result["detail"]["links"] if row["link"] == "L1")
    assert l1["error"] == pytest.approx(0.0, abs=1e-12)
    assert result["step_error"] == pytest.approx(10 * 0.05 / 2.0)  # 2 s of truth in all
    assert "step_error" in result["failed"]


def test_blame_moved_between_links_in_a_step_is_caught_per_link(tmp_path: Path) -> None:
    # Both links cost 100 ms in steps 10-19; the analysis gives 160 ms to L1 and 40 ms to L2: every step's
    # total is exact.
    truth_costs = {s: {"L1": 0.1, "L2": 0.1} for s in range(10, 20)}
    estimate = {s: {"L1": 0.16, "L2": 0.04} for s in range(10, 20)}
    result = scored(tmp_path, truth_doc(costs=truth_costs), costs=estimate)
    assert result["step_error"] == pytest.approx(0.0, abs=1e-12)
    assert result["link_error"] == pytest.approx(0.6)
    assert "link_error" in result["failed"]


def test_blame_on_a_link_with_no_truth_is_misplaced(tmp_path: Path) -> None:
    # Steps 10-14: L1's cost given to L2, which costs nothing then.
    estimate = {s: ({"L2": 0.1} if s < 15 else per) for s, per in COSTS.items()}
    result = scored(tmp_path, costs=estimate)
    assert result["step_error"] == pytest.approx(0.0, abs=1e-12)
    assert result["misplaced_blame"] == pytest.approx(0.5 / 2.0)
    assert "misplaced_blame" in result["failed"]


def test_false_blame_on_clean_steps(tmp_path: Path) -> None:
    estimate = {**COSTS, **{s: {"L1": 0.06} for s in range(50, 53)}}  # 60 ms > 5 % of a 1 s step
    estimate |= {s: {"L1": 0.04} for s in range(53, 56)}  # 40 ms <= 50 ms: noise, not blame
    result = scored(tmp_path, costs=estimate)
    clean = result["detail"]["clean_steps"]
    assert clean == STEPS - 15
    assert result["false_blame"] == pytest.approx(3 / clean)
    assert result["detail"]["falsely_blamed_steps"] == 3
    assert "false_blame" in result["failed"]


def test_ranks_are_averaged_and_a_job_wide_row_is_one_rank(tmp_path: Path) -> None:
    # Truth per rank (0 and 1), the analysis job-wide: each side is its own mean.
    assert scored(tmp_path / "wide", ranks=[None])["step_error"] == pytest.approx(0.0)
    # Steps per rank, attribution job-wide: the job-wide figure is the step's, not shared among ranks.
    assert scored(tmp_path / "mixed", attribution_ranks=[None])["step_error"] == pytest.approx(0.0)
    # The analysis logged rank 0 only: the truth is read for rank 0 too.
    assert scored(tmp_path / "one", ranks=[0])["step_error"] == pytest.approx(0.0)


def test_a_missing_steady_figure_fails_and_is_not_zero(tmp_path: Path) -> None:
    result = scored(tmp_path, steady=None)
    assert result["steady_error"] is None
    assert result["failed"]["steady_error"] == "missing or undefined"
    assert "links.parquet has no round_trip_seconds for L2" in json.dumps(result["detail"]["steady"])
    off = scored(tmp_path / "off", steady={"L1": (0.0012, 0.01), "L2": (0.0014, 0.02)})
    assert off["steady_error"] == pytest.approx(0.2)


def test_absolute_episode_times_and_list_links_are_read(tmp_path: Path) -> None:
    doc = truth_doc()
    doc["links"] = [{"name": name, **figures} for name, figures in doc["links"].items()]
    for episode in doc["episodes"]:
        start = float(episode.pop("start").rstrip("s"))
        length = float(episode.pop("duration").rstrip("s"))
        episode["start_time"], episode["end_time"] = stamp_pair(start, length)
    del doc["start_time"]
    result = scored(tmp_path, doc)
    assert result["passed"], result["why"]


def test_the_simulators_nested_network_seconds_are_read(tmp_path: Path) -> None:
    doc = write_truth(tmp_path / "plain.json")
    raw = json.loads(doc.read_text())
    for row in raw["steps"]:
        by_link, by_cause = row.pop("by_link"), row.pop("by_cause")
        row["network_seconds"] = {"total": row["network_seconds"], "by_link": by_link, "by_cause": by_cause}
    nested = tmp_path / "truth.json"
    nested.write_text(json.dumps(raw))
    assert score.read_truth(nested).costs.equals(score.read_truth(doc).costs)


def stamp_pair(start: float, length: float) -> tuple[str, str]:
    from scoring_frames import stamp

    return stamp(start), stamp(start + length)


def test_the_command_prints_the_score(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    truth = write_truth(tmp_path / "truth.json")
    folder = write_control(write_analysis(tmp_path / "analysis")).parent
    assert main(["score", "--truth", str(truth), "--analysis", str(folder)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["passed"] is True
    assert set(score.GOALS) <= set(printed) and "control" in printed


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("bad_json", "not valid JSON"),
        ("no_table", "events.parquet: not found"),
        ("relative_without_start", "no run start_time"),
        ("no_by_link", "a step needs by_link"),
        ("bad_duration", "not a duration"),
        ("bad_column", "does not hold what the scorer reads"),
    ],
)
def test_bad_input_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str, message: str
) -> None:
    doc = truth_doc()
    folder = write_analysis(tmp_path / "analysis")
    if setup == "bad_json":
        (tmp_path / "truth.json").write_text("{not json")
    else:
        if setup == "no_table":
            (folder / "events.parquet").unlink()
        elif setup == "bad_column":
            bad = {"step": ["x"], "rank": [0], "link": ["L1"], "attributed_seconds": [0.1]}
            pl.DataFrame(bad).write_parquet(folder / "attribution.parquet")
        elif setup == "relative_without_start":
            del doc["start_time"]
        elif setup == "no_by_link":
            del doc["steps"][3]["by_link"]
        elif setup == "bad_duration":
            doc["episodes"][0]["duration"] = "ten seconds"
        write_truth(tmp_path / "truth.json", doc)
    status = main(["score", "--truth", str(tmp_path / "truth.json"), "--analysis", str(folder)])
    err = capsys.readouterr().err
    assert status == 1
    assert message in err
    assert "Traceback" not in err


def test_the_scorer_imports_nothing_of_the_analyzer_or_the_simulator() -> None:
    code = "import sys, spanwatch.score; print('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    banned = [m for m in loaded if m == "analyzer" or m.startswith(("analyzer.", "spanwatch.sim"))]
    assert banned == []


def test_family_map_agrees_with_every_kind_the_analyzer_declares() -> None:
    from analyzer.kinds import KINDS

    # The scorer keeps its own map (it may not import the analyzer); the analyzer calls outages "down".
    theirs = {name: {"down": "outage"}.get(kind.family, kind.family) for name, kind in KINDS.items()}
    assert {name: score.family(name) for name in KINDS} == theirs
    assert score.family("compute_stall") is None  # never the network's doing


def test_scaling_keeps_links(tmp_path: Path) -> None:
    result = scored(tmp_path, costs=scaled(COSTS, 1.1))
    assert result["step_error"] == pytest.approx(0.1)
    assert result["link_error"] == pytest.approx(0.1)


def test_a_quiet_run_has_no_control_to_fail_and_passes_on_its_own_figures(tmp_path: Path) -> None:
    # The truth's episodes cost the job nothing: a shifted log has no timing to break, so the control
    # meets every goal as the real run does, and that must not fail the score.
    result = scored(tmp_path, truth_doc(costs={}), costs={})
    assert score.is_quiet(score.read_truth(tmp_path / "truth.json"))
    assert result["failed"] == {}
    assert not result["control"]["fails_timing_goal"]
    assert "quiet run" in result["control"]["not_applicable"]
    assert result["passed"], result["why"]
    assert "not_applicable" in score.headline(result)["control"]


def test_a_cost_below_the_scorings_resolution_is_a_quiet_run(tmp_path: Path) -> None:
    # 0.6 ms over the whole run (a wave down the job barely felt): no step lost 1 ms, so every step is clean
    # by false_blame's definition. Reading nothing there is right; a relative error on it is not judged.
    result = scored(tmp_path, truth_doc(costs={30: {"L1": 0.0006}}), costs={})
    assert result["step_error"] == pytest.approx(1.0)  # shown ...
    assert result["not_applicable"] == ["step_error", "misplaced_blame"]  # ... not judged
    assert result["failed"] == {} and result["passed"], result["why"]
    # Blaming clean steps is still judged: false_blame covers every step of a quiet run.
    blamed = {s: {"L1": 0.3} for s in range(20, 30)}
    invented = scored(tmp_path / "invented", truth_doc(costs={30: {"L1": 0.0006}}), costs=blamed)
    assert invented["false_blame"] == pytest.approx(10 / 60) and not invented["passed"]


def test_a_quiet_run_that_invents_a_cost_fails(tmp_path: Path) -> None:
    invented = {s: {"L1": 0.2} for s in range(10, 30)}  # 20 clean steps blamed 200 ms each
    result = scored(tmp_path, truth_doc(costs={}), costs=invented)
    assert result["false_blame"] == pytest.approx(20 / 60)
    assert result["step_error"] is None  # 4 s against no true cost: undefined, and failed
    assert not result["passed"]


def test_events_are_not_judged_where_there_is_nothing_to_judge(tmp_path: Path) -> None:
    # A run whose only episode is a straggler (seed 509560 of the random family): no network episode to
    # recall and, rightly, no event. Recall and precision are 0/0 there: no verdict, not a failure.
    stall = [e for e in EPISODES if e["kind"] == "compute_stall"]
    result = scored(tmp_path, truth_doc(costs={}, episodes=stall), costs={}, events=[])
    assert result["event_recall"] is None and result["event_precision"] is None
    assert result["not_applicable"] == ["event_recall", "event_precision", "step_error", "misplaced_blame"]
    assert result["passed"], result["why"]
    # The other figure still judges: an event invented on that quiet network fails precision ...
    invented = scored(tmp_path / "invented", truth_doc(costs={}, episodes=stall), costs={}, events=EVENTS[:1])
    assert result["event_recall"] is None and invented["event_precision"] == 0.0
    assert "event_precision" in invented["failed"] and not invented["passed"]
    # ... and an episode missed fails recall, with no event to be imprecise about.
    missed = scored(tmp_path / "missed", events=[])
    assert missed["event_recall"] == 0.0 and missed["event_precision"] is None
    assert missed["not_applicable"] == ["event_precision"] and not missed["passed"]


def test_an_episode_the_network_never_showed_is_still_judged_and_its_miss_is_told_apart(
    tmp_path: Path,
) -> None:
    # Another tenant's congestion at 0.3 of a deep link that every queue absorbed below its marking
    # threshold (seed 103415 of the random family): the truth says ``shown: false`` (spanwatch.sim.witness).
    # Recall stays the spec's (every episode); the diagnosis counts the miss as one the network did not show.
    quiet = {"kind": "congestion", "link": "L2", "start": "40s", "duration": "8s", "affects_job": False}
    unseen = scored(tmp_path / "unseen", truth_doc(episodes=[*EPISODES, {**quiet, "shown": False}]))
    events = unseen["detail"]["events"]
    assert unseen["event_recall"] < 1.0 and "event_recall" in unseen["failed"]
    assert events["episodes_unshown"] == 1 and events["missed_unshown"] == 1
    # Without the mark (an older truth, a real lab's) the episode counts as shown.
    judged = scored(tmp_path / "judged", truth_doc(episodes=[*EPISODES, quiet]))["detail"]["events"]
    assert judged["episodes_unshown"] == 0 and judged["missed_unshown"] == 0
    # An event on it is a right one: found, it is no miss of either kind.
    seen = {
        "kind": "queue",
        "link": "L2",
        "interface": "Ethernet1/2",
        "queue": "3",
        "start": 40.0,
        "end": 47.0,
    }
    found = scored(
        tmp_path / "found", truth_doc(episodes=[*EPISODES, {**quiet, "shown": False}]), events=[*EVENTS, seen]
    )
    assert found["event_recall"] == 1.0 and found["event_precision"] == 1.0
    assert found["detail"]["events"]["missed_unshown"] == 0


def test_a_run_with_any_true_cost_keeps_its_control(tmp_path: Path) -> None:
    result = scored(tmp_path, truth_doc(costs={12: {"L1": 0.002}}), costs={12: {"L1": 0.002}})
    assert not score.is_quiet(score.read_truth(tmp_path / "truth.json"))
    assert "not_applicable" not in result["control"]
    assert result["control"]["fails_timing_goal"] and result["passed"], result["why"]


def test_the_diagnosis_tells_cost_misplaced_inside_logged_lines_and_reads_the_skew(tmp_path: Path) -> None:
    """Steps 1-10 logged as two lines of 5: a cost on step 3 read on step 4 is right per line and wrong per
    step; one read on step 7 is wrong both ways."""
    doc = truth_doc(costs={3: {"L1": 0.2}}, episodes=[])
    doc["job"] = {"log_every": 5, "clock_skew_seconds": 0.5}
    analysis = tmp_path / "inside" / "analysis"  # where ``scored`` writes the analysis
    analysis.mkdir(parents=True)
    (analysis / "summary.json").write_text(json.dumps({"skew_seconds": -1.0}))
    inside = scored(tmp_path / "inside", doc, costs={4: {"L1": 0.2}})["detail"]["diagnosis"]
    assert inside["line_error"] == pytest.approx(0.0)
    assert inside["skew_error_seconds"] == pytest.approx(-1.5)
    outside = scored(tmp_path / "outside", doc, costs={7: {"L1": 0.2}})["detail"]["diagnosis"]
    assert outside["line_error"] == pytest.approx(2.0)
    assert outside["skew_error_seconds"] is None  # no summary.json: the analysis does not say


def test_the_diagnosis_says_whether_a_true_cost_stands_above_the_step_noise(tmp_path: Path) -> None:
    # Compute times spread by +-10 ms around 0.8 s (a robust sigma of about 15 ms): 20 ms in one step of a
    # 5-step line is within 3 sigma * sqrt(5) of noise, 200 ms is not.
    def doc(cost: float) -> dict[str, Any]:
        d = truth_doc(costs={3: {"L1": cost}}, episodes=[])
        d["job"] = {"log_every": 5}
        for step in d["steps"]:
            step["compute_seconds"] = 0.8 + (0.01 if step["step"] % 2 else -0.01)
        return d

    hidden = scored(tmp_path / "hidden", doc(0.02), costs={3: {"L1": 0.02}})["detail"]["diagnosis"]
    shown = scored(tmp_path / "shown", doc(0.2), costs={3: {"L1": 0.2}})["detail"]["diagnosis"]
    assert hidden["truth_visible"] is False
    assert shown["truth_visible"] is True
