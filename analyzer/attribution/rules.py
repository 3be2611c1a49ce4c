"""The method's rule table: every tunable number of the attribution, with its reason, origin and test.

Each number is registered here once (``_rule``) and imported by name where the method uses it;
``tests/analyzer/attribution/test_rules.py`` fails when a module of the method holds a number that is not
in this table, and ``docs/method.md`` is written from it (``analyzer.attribution.document``).

An origin is either a principle (physical or statistical) or ``fitted: on what`` (what the code's comments
and the commit that set the number say it was tuned to).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TypeVar

# The steps of ``../shared/design/measurement.md``, by the module that holds each, in the order the entry
# (``pipeline.attribute``) runs them.
STEPS = {
    "lines": "1. The lines and their evidence",
    "steady": "2. The steady cost per link",
    "episode": "3. The episode cost per link, from physics",
    "skew": "4. Clock skew",
    "step_windows": "5. Each step's physics, over its collectives' windows",
    "beat": "6. The job's own beat, at the resolution of its log",
    "excess": "7. The step's excess over its clean baseline, and its noise",
    "reconcile": "8. Reconciliation of the physics with the measured excess",
    "placement": "9. Placement of interval lines' iterations",
}

Value = TypeVar("Value", int, float, tuple[int, ...])


@dataclass(frozen=True)
class Rule:
    """One tunable number of the method.

    Attributes:
        name: the constant's name in the code.
        value: its value.
        step: the ``STEPS`` key it belongs to.
        reason: one line: what it decides.
        origin: the principle it follows, or ``fitted: on what``.
        test: the test that pins it (``path::name``), or ``none`` when no test does.
        off: for a fitted rule, the value that turns it off (the method without it), which
            ``bench/bench_ablation.py`` runs; None where the number is a model's constant or a cost bound
            with nothing to turn off.
    """

    name: str
    value: int | float | tuple[int, ...]
    step: str
    reason: str
    origin: str
    test: str
    off: float | None = None


RULES: dict[str, Rule] = {}
# The method without some of its fitted rules, for ``bench/bench_ablation.py``: each rule named here (comma
# separated) takes its ``off`` value. The table keeps the real values.
OFF_VARIABLE = "SPANWATCH_RULES_OFF"
TURNED_OFF = frozenset(name for name in os.environ.get(OFF_VARIABLE, "").split(",") if name)


def _rule(
    name: str, value: Value, step: str, reason: str, origin: str, test: str, off: float | None = None
) -> Value:
    """Register a rule and return its value (the constant's definition)."""
    if name in RULES or step not in STEPS:
        raise ValueError(f"rule {name}: duplicate, or unknown step {step!r}")
    RULES[name] = Rule(name, value, step, reason, origin, test, off)
    return off if name in TURNED_OFF and off is not None else value  # type: ignore[return-value]


_T = "tests/analyzer/test_attribution_"
_PRINCIPLE = "principle: "
_FITTED = "fitted: "

# Statistics shared by every step.
MAD_TO_SIGMA = _rule(
    "MAD_TO_SIGMA",
    1.4826,
    "excess",
    "the MAD of a normal distribution times this is its standard deviation",
    _PRINCIPLE + "statistics (1 / Phi^-1(3/4))",
    _T + "excess.py::test_a_block_within_its_noise_is_not_blamed",
)
SIGNIFICANT_SIGMAS = _rule(
    "SIGNIFICANT_SIGMAS",
    3.0,
    "excess",
    "an excess past this many noise deviations is measured, not noise",
    _PRINCIPLE + "statistics (a 3-sigma test: 0.13 % of clean lines pass by chance)",
    _T + "excess.py::test_a_block_within_its_noise_is_not_blamed",
)
BASELINE_SECONDS = _rule(
    "BASELINE_SECONDS",
    60.0,
    "excess",
    "a line's clean baseline is the median of the clean lines within this window around it",
    _FITTED + "the lab on a shared 2-core host, whose clean steps drifted 0.20 -> 0.33 s in a run (bdd9eee)",
    _T + "excess.py::test_a_drifting_step_time_is_not_excess",
    off=1e9,
)
BASELINE_WINDOWS_PER_SPAN = _rule(
    "BASELINE_WINDOWS_PER_SPAN",
    4,
    "excess",
    "local baselines are read on windows starting every this fraction of their length (cost, not accuracy)",
    _FITTED + "speed: a rolling median per line cost 3 s at 1M steps (411a71c)",
    _T + "excess.py::test_a_drifting_step_time_is_not_excess",
)
CYCLES = _rule(
    "CYCLES",
    (2, 3, 4, 5, 6, 8, 10, 12, 16),
    "excess",
    "communication cycles tried (DiLoCo sync_every, gradient accumulation)",
    _PRINCIPLE + "the cycles jobs configure (DiLoCo's published sync intervals, powers of two)",
    _T + "excess.py::test_cycle_finds_a_sync_every_four_steps",
)
CYCLE_STEPS = _rule(
    "CYCLE_STEPS",
    20_000,
    "excess",
    "clean single steps read to find the cycle (a cycle repeats: the first ones show it)",
    _FITTED + "speed at 1M steps (411a71c)",
    _T + "excess.py::test_cycle_finds_a_sync_every_four_steps",
)
CYCLE_MIN_REPEATS = _rule(
    "CYCLE_MIN_REPEATS",
    4,
    "excess",
    "a cycle is looked for only over at least this many repeats of the longest one tried",
    _PRINCIPLE + "statistics (a median per position needs a few samples)",
    _T + "excess.py::test_cycle_finds_a_sync_every_four_steps",
)
CYCLE_SLOW_QUANTILE = _rule(
    "CYCLE_SLOW_QUANTILE",
    0.25,
    "excess",
    "every step of the slow position is slow: its lower quartile, not its median, must stand out",
    _PRINCIPLE + "a sync every N steps slows all of them, a checkpoint every 2N half of them",
    _T + "excess.py::test_cycle_finds_a_sync_every_four_steps",
)
CYCLE_SLOW_LEVELS = _rule(
    "CYCLE_SLOW_LEVELS",
    2.0,
    "excess",
    "a single-step cycle's slow position stands out by this many significance levels over the next (no "
    "chance test there; the beat's lines have one and ask one level: beat.stands_out)",
    _FITTED + "the shipped DiLoCo scenario (51ca618)",
    _T + "excess.py::test_cycle_finds_a_sync_every_four_steps",
    off=math.inf,
)
CYCLE_TOLD_POLLS = _rule(
    "CYCLE_TOLD_POLLS",
    4.0,
    "excess",
    "a cycle longer than this many polls is a communication cycle only where the job sends sparsely",
    _PRINCIPLE
    + "a sync's burst lands in at most two poll intervals, so a cycle of more than four leaves most of "
    "the counters' windows without the job's bytes: the counters then tell a sync (DiLoCo) from a "
    "checkpoint (compute), which a step log alone cannot",
    _T + "excess.py::test_a_checkpoint_cycle_is_no_communication_cycle_where_the_job_sends_every_step",
)
CYCLE_NOISE_FLOOR_SECONDS = _rule(
    "CYCLE_NOISE_FLOOR_SECONDS",
    1e-6,
    "excess",
    "the clean steps' noise is never read as less than this (a perfectly even log)",
    _PRINCIPLE + "timing resolution (microsecond timestamps)",
    _T + "excess.py::test_cycle_finds_a_sync_every_four_steps",
)
BEAT_PERIODS = _rule(
    "BEAT_PERIODS",
    2,
    "beat",
    "the job's own periods looked for, each on what the ones before leave",
    _PRINCIPLE + "a job has two rhythms of its own in the spec: DiLoCo's outer sync and its checkpoints",
    _T + "beat.py::test_a_sync_and_a_checkpoint_are_both_found",
)
BEAT_LONGEST_STEPS = _rule(
    "BEAT_LONGEST_STEPS",
    500,
    "beat",
    "the longest period of its own a job is searched for (the search costs its square in steps read)",
    _PRINCIPLE
    + "the longest DiLoCo outer-sync interval the spec draws (1-500 inner steps, as in DiLoCo's runs)",
    _T + "beat.py::test_a_sync_every_22_steps_is_found_through_lines_of_12",
)
# Step 2: the steady cost.
STEADY_ROUND_TRIPS = _rule(
    "STEADY_ROUND_TRIPS",
    2,
    "steady",
    "round trips a step's collective pays on a clean link, beside its serialization",
    _FITTED + "unstated: unnamed since 51ca618 (a ring all-reduce's two phases would make it a principle)",
    "none",
)
JOB_LINK_SHARE = _rule(
    "JOB_LINK_SHARE",
    0.01,
    "steady",
    "a job link carries at least this share of the job's cross-site bytes; below it the class is someone else's",
    _PRINCIPLE + "ECMP spreads a job's flows over its links, never 1 % on one",
    _T + "steady.py::test_steady_figures_from_probes_capacity_and_bytes",
)
# Step 3: the episode cost from physics.
MIN_SHARE = _rule(
    "MIN_SHARE",
    0.05,
    "episode",
    "past saturation the job keeps at least this share of its queue (keeps the estimate finite)",
    _PRINCIPLE + "congestion control shares a saturated queue; the measured excess then sets the amount",
    _T + "episode.py::test_a_port_below_its_usual_speed_reads_as_lost_capacity",
)
FRAME_BYTES = _rule(
    "FRAME_BYTES",
    4096.0,
    "episode",
    "the bytes an FCS error, a discarded frame or a dropped packet loses",
    _PRINCIPLE + "a RoCE frame at the usual 4 KiB MTU",
    _T + "episode.py::test_frames_the_far_end_discards_on_receipt_are_lost_and_sent_again",
)
OTHER_SHARE = _rule(
    "OTHER_SHARE",
    0.01,
    "episode",
    "other traffic in the job's class under this share of the capacity is no cause",
    _PRINCIPLE + "it adds under 1 % of the serialization, below any step's noise",
    _T + "episode.py::test_the_jobs_own_rate_noise_is_not_other_traffic",
)
RATE_NOISE_SIGMAS = _rule(
    "RATE_NOISE_SIGMAS",
    3.0,
    "episode",
    "... nor under this many deviations of the job's own window rate",
    _PRINCIPLE + "statistics (a 3-sigma test)",
    _T + "episode.py::test_the_jobs_own_rate_noise_is_not_other_traffic",
)
NOISE_SHARE = _rule(
    "NOISE_SHARE",
    0.1,
    "episode",
    "... up to this share of the capacity; also the reroute's slack over what went missing",
    _FITTED + "the lab's links, whose job rate varies 20 % window to window on a loaded host (5376d6e)",
    _T + "episode.py::test_the_jobs_bytes_moved_off_a_downed_link_are_its_reroute_not_other_traffic",
    off=0.0,
)
PHYSICS_FLOOR_SECONDS = _rule(
    "PHYSICS_FLOOR_SECONDS",
    1e-3,
    "episode",
    "a physical estimate under this per step is no cause",
    _PRINCIPLE + "step times resolve no less; the scorer calls a step with less clean",
    _T + "reconcile.py::test_no_physical_cause_no_blame",
)
GRID_POINTS = _rule(
    "GRID_POINTS",
    20_000,
    "episode",
    "cells of the regular grid the physics is read on (at most; never finer than the skew's resolution)",
    _FITTED + "speed: the grid's cost against its resolution (fc77859)",
    "none",
)
TYPICAL_WINDOW_STRIDE = _rule(
    "TYPICAL_WINDOW_STRIDE",
    0.5,
    "step_windows",
    "a long step is read over typical-length windows this share of a typical step apart (the worst decides)",
    _FITTED
    + "checkpoint-in-episode and wave-down-reroute (577138f): a step over 1.5 typical ones gets several",
    _T + "step_windows.py::test_a_long_step_is_read_over_every_typical_window_in_it_ending_with_its_last",
)
MIN_STRIDE_SECONDS = _rule(
    "MIN_STRIDE_SECONDS",
    1e-6,
    "step_windows",
    "the windows' stride is never shorter than this (a zero typical step)",
    _PRINCIPLE + "timing resolution (microsecond timestamps)",
    "none",
)
# Step 4: clock skew.
MAX_SKEW_SECONDS = _rule(
    "MAX_SKEW_SECONDS",
    2.5,
    "skew",
    "clock skew is searched over +- this; beyond, the log is not placed by the search",
    _FITTED + "the shipped skewed scenarios, and the control run's shift must never be found (51ca618)",
    _T + "skew.py::test_skew_is_found_by_cross_correlation",
    off=0.0,
)
SKEW_RESOLUTION_SECONDS = _rule(
    "SKEW_RESOLUTION_SECONDS",
    0.1,
    "skew",
    "the skew search's step",
    _PRINCIPLE + "a tenth of the usual 1 s poll",
    _T + "skew.py::test_skew_is_found_by_cross_correlation",
)
SKEW_MIN_CORRELATION = _rule(
    "SKEW_MIN_CORRELATION",
    0.3,
    "skew",
    "below this correlation the search found nothing: the skew stays 0",
    _FITTED + "the shipped scenarios (51ca618)",
    _T + "skew.py::test_skew_is_found_by_cross_correlation",
    off=-1.0,
)
SKEW_MIN_GAIN = _rule(
    "SKEW_MIN_GAIN",
    0.1,
    "skew",
    "a skew must correlate this much better than none to be believed",
    _FITTED + "the shipped scenarios (04eba6a): a flat correlation is no evidence against NTP",
    _T + "skew.py::test_skew_is_found_from_interval_lines",
    off=0.0,
)
SKEW_RANGE_STANDARD_ERRORS = _rule(
    "SKEW_RANGE_STANDARD_ERRORS",
    2.0,
    "skew",
    "the skews whose correlation lies within this many standard errors of the best's fit the logs as well",
    _PRINCIPLE + "statistics: a correlation r of n lines has a standard error of (1 - r^2) / sqrt(n - 1); "
    "two of them, a 95 % band",
    _T + "skew.py::test_the_skews_the_logs_cannot_tell_apart_are_reported",
)
SKEW_MIN_LINES = _rule(
    "SKEW_MIN_LINES",
    3,
    "skew",
    "lines (and grid cells) a correlation needs at least, at every candidate skew",
    _PRINCIPLE + "statistics (a correlation of two points is always +-1)",
    "none",
)
SKEW_MAX_LINES = _rule(
    "SKEW_MAX_LINES",
    50_000,
    "skew",
    "lines the skew search reads at most (a regular sample: every rank logs the same windows)",
    _FITTED + "speed at 1M steps (d490062)",
    "none",
)
SKEW_PROXY_QUANTILE = _rule(
    "SKEW_PROXY_QUANTILE",
    0.95,
    "skew",
    "the skew search's excess is clipped at this quantile (an outlier line would decide the correlation)",
    _FITTED + "unstated: unnamed since 51ca618",
    "none",
    off=1.0,
)
# Reconciliation.
ALONE_SHARE = _rule(
    "ALONE_SHARE",
    0.8,
    "reconcile",
    "a link with this share of a line's physics is its only cause (its gain is readable there)",
    _FITTED + "overlap-unequal-two-links and two-vendors-overlap (8d1791d)",
    _T + "reconcile.py::test_each_link_is_scaled_by_its_own_gain",
    off=1.0,
)
GATE_SIGMAS = _rule(
    "GATE_SIGMAS",
    1.0,
    "reconcile",
    "a line's excess past this many noise deviations lets its scaled physics stand",
    _FITTED + "the lab, whose episodes sit near its noise (b98b237)",
    _T + "reconcile.py::test_an_episodes_first_step_is_its_excess_where_its_physics_is_only_partly_there",
    off=0.0,
)
ALLOWANCE_SIGMAS = _rule(
    "ALLOWANCE_SIGMAS",
    2.0,
    "reconcile",
    "the cap keeps this much step-time noise above the physics (never cut a real step); a line's log "
    "shows at most its excess plus this much (the timing spread)",
    _PRINCIPLE + "statistics (a 2-sigma allowance)",
    _T + "reconcile.py::test_a_checkpoint_inside_an_episode_keeps_its_compute",
)
AGREE_SIGMAS = _rule(
    "AGREE_SIGMAS",
    5.0,
    "reconcile",
    "excess and scaled physics within this many combined deviations measure the same thing",
    _FITTED + "the shipped scenarios (35e3d92)",
    _T + "reconcile.py::test_an_episodes_first_step_is_its_excess_where_its_physics_is_only_partly_there",
    off=math.inf,
)
PHYSICS_ERROR = _rule(
    "PHYSICS_ERROR",
    0.25,
    "reconcile",
    "the largest relative error of a line's scaled physics (1 s counters, step timing)",
    _FITTED + "the shipped matrix (35e3d92, 92729bd)",
    _T + "reconcile.py::test_an_episodes_first_step_is_its_excess_where_its_physics_is_only_partly_there",
)
PHYSICS_ERROR_FLOOR = _rule(
    "PHYSICS_ERROR_FLOOR",
    0.1,
    "reconcile",
    "the least relative error of the scaled physics: it is never taken as exact",
    _FITTED + "the shipped matrix: diloco and harmless-beside-harmful (92729bd)",
    "none",
    off=0.0,
)
MIN_ERROR_LINES = _rule(
    "MIN_ERROR_LINES",
    10,
    "reconcile",
    "lines with both measures needed to read the physics' error from the data",
    _PRINCIPLE + "statistics (a MAD needs a few samples)",
    "none",
)
# Placement of interval lines.
EDGE_SHARE = _rule(
    "EDGE_SHARE",
    0.5,
    "placement",
    "a run's ramp is what comes before (after) its first (last) level of this share of its peak",
    _FITTED + "logs-every-10-skewed and overlap-unequal-two-links (4709c1b)",
    _T + "placement.py::test_an_episodes_smeared_first_reading_is_its_level_over_the_readings_last_part",
    off=0.0,
)
STALL_SHARE = _rule(
    "STALL_SHARE",
    0.5,
    "placement",
    "a run of an interval's time the network took at least this much of is one stall",
    _FITTED + "logs-every-10-skewed (fd713cb)",
    _T + "placement.py::test_a_smeared_stall_is_sharpened_into_one_block_and_congestion_keeps_its_density",
    off=math.inf,
)
STALL_HELD_WITHIN = _rule(
    "STALL_HELD_WITHIN",
    0.25,
    "placement",
    "a stall block opening within this share of an iteration after its work ended is that iteration's",
    _FITTED + "logs-every-10-skewed on six recordings (b1feeee)",
    _T + "placement.py::test_a_stall_opening_just_after_an_iteration_ended_is_that_iterations",
    off=0.0,
)
# analyzer.physics: how the readings become quantities.
HELD_OVER_USUAL = _rule(
    "HELD_OVER_USUAL",
    2.0,
    "episode",
    "an egress queue past this many times its usual length (two readings running) stands",
    _FITTED + "a burst's one-reading peak must not stand; set with the standing-queue rule (0f5e93b)",
    _T + "episode.py::test_an_egress_queue_stands_past_twice_its_usual_length_in_two_readings_running",
    off=math.inf,
)
STEADY_QUANTILE = _rule(
    "STEADY_QUANTILE",
    0.05,
    "steady",
    "of the per-interval minimum round trips: the steady (queue-free) round trip",
    _FITTED
    + "the lab's links: probes wait behind the job's own traffic (61-72 us by median on a 27 us path; 1039c4b)",
    "none",
    off=0.0,
)


_UNKNOWN = TURNED_OFF - {rule.name for rule in RULES.values() if rule.off is not None}
if _UNKNOWN:
    raise ValueError(f"{OFF_VARIABLE}: not a rule with an off value: {', '.join(sorted(_UNKNOWN))}")
