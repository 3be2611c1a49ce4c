"""``spanwatch plan``: the seed's figures, the stated formulas, the JSON contract, and one message per bad input."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzer.plan import (
    BUFFER_PRESETS,
    PlanError,
    PlanInput,
    optics_check,
    parse_bytes,
    parse_bytes_per_param,
    parse_count,
    plan,
    ring_allreduce_bytes,
    waves_for_target,
)
from analyzer.report.planned import compare
from collector.contracts.fibre import one_way_delay_s
from spanwatch.cli import main

# The seed quotes round figures ("about 0.5 ms"); 4.9 us/km gives 0.49 ms, so allow a few per cent.
ABOUT = 0.03
SEED = PlanInput(distance_km=100, params=1e12, bytes_per_param=2, links=1, link_gbps=800)
REQUIRED_KEYS = {
    "one_way_delay_seconds",
    "round_trip_seconds",
    "bandwidth_delay_product_bytes",
    "bytes_per_sync",
    "transfer_seconds",
    "exposed_seconds_per_step",
}
# The walkthrough's DiLoCo plan (shared/findings/2026-12-01-user-walkthrough.md): 1T bf16 over 4 x 800G at
# 500 km, an outer sync every 100 inner steps of 1.5 s, half of whose compute the sync can stream behind.
DILOCO = PlanInput(
    distance_km=500,
    params=1e12,
    links=4,
    link_gbps=800,
    bytes_per_param=2,
    sync_every=100,
    compute_seconds=1.5,
    overlap=0.5,
)
DILOCO_ARGV = ["plan", "--distance-km", "500", "--links", "4", "--link-gbps", "800", "--params", "1T"]
DILOCO_ARGV += [
    "--bytes-per-param",
    "bf16",
    "--sync-every",
    "100",
    "--compute-ms",
    "1500",
    "--overlap",
    "0.5",
]


@pytest.fixture(autouse=True)
def _wide_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    # One table row per line whatever the terminal running the tests: the checks look for phrases in a cell.
    monkeypatch.setenv("COLUMNS", "200")


def test_100_km_is_half_a_millisecond_one_way_and_one_round_trip() -> None:
    r = plan(SEED)
    assert r.one_way_delay_seconds == pytest.approx(0.5e-3, rel=ABOUT)
    assert r.round_trip_seconds == pytest.approx(1e-3, rel=ABOUT)


def test_500_km_is_five_milliseconds_round_trip() -> None:
    r = plan(PlanInput(distance_km=500, params=1e12))
    assert r.round_trip_seconds == pytest.approx(5e-3, rel=ABOUT)


def test_the_fibre_arithmetic_is_the_collectors() -> None:
    r = plan(PlanInput(distance_km=321, params=1e9, fibre_delay_us_per_km=5.0))
    assert r.one_way_delay_seconds == one_way_delay_s(321, 5.0)


def test_a_trillion_bf16_parameters_is_two_terabytes_per_full_sync() -> None:
    assert plan(SEED).bytes_per_sync == pytest.approx(2e12, rel=ABOUT)


def test_one_800g_link_is_100_gb_per_second_so_tens_of_seconds_per_full_sync() -> None:
    r = plan(SEED)
    assert r.link_bytes_per_second == pytest.approx(100e9)
    assert 10 <= r.transfer_seconds < 100


def test_800g_for_1_ms_is_100_mb_in_flight() -> None:
    r = plan(SEED)
    assert r.bandwidth_delay_product_bytes == pytest.approx(100e6, rel=ABOUT)
    assert r.buffer_bytes_per_link > r.bandwidth_delay_product_bytes  # the headroom term


def test_transfer_is_serialization_plus_the_round_trips() -> None:
    p = PlanInput(distance_km=100, params=1e12, efficiency=1.0, round_trips=3)
    r = plan(p)
    assert r.serialization_seconds == pytest.approx(20.0)
    assert r.transfer_seconds == pytest.approx(20.0 + 3 * r.round_trip_seconds)


def test_a_ring_of_two_sends_the_payload_once_each_way() -> None:
    assert ring_allreduce_bytes(10.0, 2) == 10.0
    assert ring_allreduce_bytes(10.0, 4) == 15.0


def test_exposed_time_is_what_compute_cannot_hide_spread_over_the_sync_interval() -> None:
    # Was: hideable 1 s (one step's compute) and (22.2 s - 1 s) / 100 exposed; the outer sync streams behind
    # all 100 inner steps, 100 s of hideable compute, of which 20 ms per step stays exposed here.
    p = PlanInput(distance_km=100, params=1e12, compute_seconds=0.2, overlap=0.5, sync_every=100)
    r = plan(p)
    assert r.sync_model == "streaming outer sync"
    assert r.hideable_steps == 100
    assert r.hideable_seconds_per_step == pytest.approx(0.1)
    assert r.hideable_seconds_per_sync == pytest.approx(10.0)
    assert r.exposed_seconds_per_step == pytest.approx((r.transfer_seconds - 10.0) / 100)
    assert r.slowdown == pytest.approx((0.2 + r.exposed_seconds_per_step) / 0.2)


def test_the_seeds_diloco_outer_sync_hides_behind_the_inner_loop() -> None:
    # Before: 750 ms hideable (one step) and 48.2 ms exposed per step. 0.5 x 100 x 1.5 s = 75 s hides 5.57 s.
    r = plan(DILOCO)
    assert r.transfer_seconds == pytest.approx(5.57, abs=0.01)
    assert r.hideable_seconds_per_sync == pytest.approx(75.0)
    assert r.exposed_seconds_per_step == 0.0
    assert r.slowdown == 1.0


def test_a_diloco_inner_loop_too_short_to_hide_the_outer_sync_exposes_the_rest() -> None:
    # 100 inner steps of 40 ms, half hideable: 2 s of cover for a 5.57 s sync, 3.57 s over 100 steps.
    r = plan(PlanInput(**{**DILOCO.__dict__, "compute_seconds": 0.04}))
    assert r.hideable_seconds_per_sync == pytest.approx(2.0)
    assert r.exposed_seconds_per_step == pytest.approx((r.transfer_seconds - 2.0) / 100)
    assert r.exposed_seconds_per_step == pytest.approx(0.0357, abs=1e-4)


def test_an_outer_sync_that_blocks_is_overlap_zero_and_costs_its_transfer_once_per_interval() -> None:
    r = plan(PlanInput(**{**DILOCO.__dict__, "overlap": 0.0}))
    assert r.hideable_seconds_per_sync == 0.0
    assert r.exposed_seconds_per_step == pytest.approx(r.transfer_seconds / 100)


def test_synchronous_data_parallel_hides_behind_its_own_step_only() -> None:
    r = plan(PlanInput(distance_km=500, params=1e12, links=4, compute_seconds=1.5, overlap=0.5))
    assert r.sync_model == "synchronous"
    assert r.hideable_steps == 1
    assert r.hideable_seconds_per_sync == r.hideable_seconds_per_step == pytest.approx(0.75)
    assert r.exposed_seconds_per_step == pytest.approx(r.transfer_seconds - 0.75)


def test_a_transfer_shorter_than_the_hideable_time_exposes_nothing() -> None:
    p = PlanInput(distance_km=10, params=1e6, compute_seconds=1.0, overlap=1.0)
    r = plan(p)
    assert r.exposed_seconds_per_step == 0.0
    assert r.slowdown == 1.0


def test_without_a_compute_time_nothing_hides_and_there_is_no_slowdown() -> None:
    r = plan(SEED)
    assert r.exposed_seconds_per_step == r.transfer_seconds
    assert r.slowdown is None


def test_pipeline_activations_cross_every_step_with_one_round_trip() -> None:
    p = PlanInput(distance_km=100, crossing="activations", activation_bytes=1e9, efficiency=1.0)
    r = plan(p)
    assert r.bytes_per_sync == 1e9
    assert r.transfer_seconds == pytest.approx(0.01 + r.round_trip_seconds)


@pytest.mark.parametrize(
    ("text", "count"),
    [("1e12", 1e12), ("70B", 70e9), ("70g", 70e9), ("1.5T", 1.5e12), ("400M", 400e6), ("7_000_000_000", 7e9)],
)
def test_parameter_counts_take_the_usual_suffixes(text: str, count: float) -> None:
    assert parse_count(text) == pytest.approx(count)


@pytest.mark.parametrize(("text", "size"), [("1e9", 1e9), ("512MB", 512e6), ("4G", 4e9), ("2GiB", 2 * 2**30)])
def test_byte_sizes_take_decimal_and_binary_units(text: str, size: float) -> None:
    assert parse_bytes(text) == pytest.approx(size)


@pytest.mark.parametrize(("text", "width"), [("bf16", 2.0), ("FP32", 4.0), ("fp8", 1.0), ("2", 2.0)])
def test_bytes_per_param_takes_numbers_and_dtypes(text: str, width: float) -> None:
    assert parse_bytes_per_param(text) == width


@pytest.mark.parametrize("text", ["", "x", "70X", "1e", "twelve"])
def test_a_bad_count_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="not a count"):
        parse_count(text)


@given(
    st.floats(min_value=0.1, max_value=20_000),
    st.floats(min_value=0.1, max_value=20_000),
)
def test_more_distance_never_means_less_delay(a: float, b: float) -> None:
    near, far = sorted((a, b))
    r_near, r_far = (
        plan(PlanInput(distance_km=near, params=1e9)),
        plan(PlanInput(distance_km=far, params=1e9)),
    )
    assert r_near.one_way_delay_seconds <= r_far.one_way_delay_seconds
    assert r_near.round_trip_seconds <= r_far.round_trip_seconds
    assert r_near.transfer_seconds <= r_far.transfer_seconds


@given(st.integers(min_value=1, max_value=64), st.floats(min_value=1e6, max_value=1e13))
def test_more_links_means_less_transfer_time(links: int, params: float) -> None:
    fewer = plan(PlanInput(distance_km=100, params=params, links=links))
    more = plan(PlanInput(distance_km=100, params=params, links=links + 1))
    assert more.transfer_seconds < fewer.transfer_seconds
    assert more.exposed_seconds_per_step <= fewer.exposed_seconds_per_step


@given(st.floats(min_value=0, max_value=1), st.floats(min_value=0, max_value=1))
def test_more_overlap_never_exposes_more(a: float, b: float) -> None:
    low, high = sorted((a, b))

    def exposed(overlap: float) -> float:
        p = PlanInput(distance_km=100, params=1e11, compute_seconds=1.0, overlap=overlap)
        return plan(p).exposed_seconds_per_step

    assert exposed(high) <= exposed(low)


def test_json_has_the_contract_keys(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--distance-km", "100", "--links", "1", "--link-gbps", "800", "--params", "1e12"]
    argv += ["--bytes-per-param", "2", "--sync-every", "1", "--compute-ms", "500", "--json"]
    assert main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures.keys() >= REQUIRED_KEYS
    assert figures["round_trip_seconds"] == pytest.approx(1e-3, rel=ABOUT)
    assert figures["bytes_per_sync"] == pytest.approx(2e12)
    assert figures["inputs"]["compute_seconds"] == pytest.approx(0.5)


def test_the_table_shows_readable_units(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["plan", "--distance-km", "500", "--params", "70B", "--compute-ms", "800", "--overlap", "0.5"])
        == 0
    )
    out = capsys.readouterr().out
    for figure in ("4.9 ms", "140 GB", "100 GB/s", "490 MB", "400 ms", "slowdown"):
        assert figure in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--params", "1e12"], "--distance-km: required"),
        (["--distance-km", "-5", "--params", "1e12"], "--distance-km: must be a positive number"),
        (["--distance-km", "far", "--params", "1e12"], "--distance-km: not a number, got 'far'"),
        (["--distance-km", "100"], "--params: required"),
        (["--distance-km", "100", "--params", "lots"], "--params: not a count"),
        (
            ["--distance-km", "100", "--params", "1e12", "--links", "0"],
            "--links: must be a whole number >= 1",
        ),
        (["--distance-km", "100", "--params", "1e12", "--links", "1.5"], "--links: not a whole number"),
        (["--distance-km", "100", "--params", "1e12", "--link-gbps", "0"], "--link-gbps: must be a positive"),
        (
            ["--distance-km", "100", "--params", "1e12", "--bytes-per-param", "fp12"],
            "--bytes-per-param: not a",
        ),
        (
            ["--distance-km", "100", "--params", "1e12", "--overlap", "1.5"],
            "--overlap: must be between 0 and 1",
        ),
        (["--distance-km", "100", "--params", "1e12", "--efficiency", "0"], "--efficiency: must be above 0"),
        (
            ["--distance-km", "100", "--params", "1e12", "--compute-ms", "0"],
            "--compute-ms: must be a positive",
        ),
        (["--distance-km", "100", "--params", "1e12", "--sync-every", "0"], "--sync-every: must be a whole"),
        (["--distance-km", "100", "--params", "1e12", "--crossing", "weights"], "--crossing: must be one of"),
        (["--distance-km", "100", "--crossing", "activations"], "--activation-bytes: required"),
        (
            ["--distance-km", "100", "--params", "1e12", "--distance-km", "nan"],
            "--distance-km: must be a positive",
        ),
    ],
)
def test_a_bad_input_gets_one_clear_line_and_exit_1(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", *argv]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [captured.err.strip()]  # one line
    assert captured.err.startswith(f"spanwatch: plan: {message}")
    assert "Traceback" not in captured.err


def test_several_bad_inputs_are_all_reported(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--links", "0", "--params", "x", "--overlap", "2"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "spanwatch: plan: 4 bad inputs"
    flags = [line.split(":")[0].strip() for line in lines[1:]]
    assert flags == ["--distance-km", "--params", "--links", "--overlap"]


def test_the_library_rejects_bad_inputs_too() -> None:
    with pytest.raises(PlanError, match="--links"):
        PlanInput(distance_km=100, params=1e12, links=0)


def test_the_seeds_diloco_table_says_which_model_and_hides_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(DILOCO_ARGV) == 0
    out = capsys.readouterr().out
    assert "streaming" in out
    assert "next 100 inner steps" in out
    assert "48.2 ms" not in out
    assert "75 s" in out


# --- optics reach -----------------------------------------------------------------------------------------


def test_100_km_is_within_800zr_reach_and_dispersion() -> None:
    o = plan(SEED).optics
    assert o.profile == "800ZR"  # the contracts' default
    assert o.ok and o.within_reach and o.within_cd_tolerance
    assert o.dispersion_ps_nm == pytest.approx(1_700)
    assert o.suggested == ()


def test_130_km_is_beyond_800zr_reach_though_its_dispersion_is_tolerated() -> None:
    o = optics_check(130, 800)
    assert not o.within_reach
    assert o.within_cd_tolerance  # 2,210 of 2,400 ps/nm
    assert [s.name for s in o.suggested] == ["800ZR+", "OpenZR+"]


def test_the_seeds_500_km_needs_zr_plus_and_says_so() -> None:
    r = plan(DILOCO)
    assert not r.optics.within_reach and not r.optics.within_cd_tolerance
    assert r.optics.dispersion_ps_nm == pytest.approx(8_500)
    assert [s.name for s in r.optics.suggested] == ["800ZR+", "OpenZR+"]
    text = " ".join(r.warnings)
    assert "500 km is beyond 800ZR's reach of 120 km" in text
    assert "8,500 ps/nm" in text
    assert "800ZR+ (600 km, 800G)" in text
    assert "OpenZR+ (1000 km, 400G: 2 waves per 800G)" in text


def test_a_route_no_profile_carries_says_so() -> None:
    r = plan(PlanInput(distance_km=1_500, params=1e9, optics="OpenZR+", link_gbps=400))
    assert not r.optics.ok and r.optics.suggested == ()
    assert any("no profile in the contracts carries 1500 km" in w for w in r.warnings)


def test_a_profile_slower_than_the_links_is_flagged() -> None:
    o = optics_check(300, 800, "OpenZR+")
    assert o.within_reach and o.within_cd_tolerance and not o.within_rate and not o.ok
    assert [s.name for s in o.suggested] == ["800ZR+"]


def test_the_optics_check_is_in_the_json_and_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*DILOCO_ARGV, "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["optics"]["within_reach"] is False
    assert [s["name"] for s in figures["optics"]["suggested"]] == ["800ZR+", "OpenZR+"]
    assert any(w.startswith("optics: 800ZR+") for w in figures["warnings"])
    assert main(DILOCO_ARGV) == 0
    out = capsys.readouterr().out
    assert "BEYOND REACH" in out
    assert "warning: optics: 800ZR+ (600 km, 800G)" in out


def test_optics_profiles_are_named_case_insensitively(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*DILOCO_ARGV, "--optics", "800zr+", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["optics"]["profile"] == "800ZR+"
    assert figures["optics"]["ok"] is True
    assert figures["warnings"] == []


# --- waves for a target sync time -------------------------------------------------------------------------


def test_waves_for_a_target_sync_time() -> None:
    # 2 TB at 90 GB/s per wave in 2 s less 9.8 ms of round trips: 11.17, so 12 waves.
    t = plan(PlanInput(**{**DILOCO.__dict__, "target_sync_seconds": 2.0})).target
    assert t is not None
    assert t.latency_floor_seconds == pytest.approx(0.0098)
    assert t.waves == 12
    assert t.transfer_seconds is not None and t.transfer_seconds <= 2.0


def test_a_target_that_lands_on_a_whole_number_of_waves_needs_exactly_that_many() -> None:
    assert waves_for_target(11.0, 1e12, 100e9, 1.0).waves == 1
    assert waves_for_target(6.0, 1e12, 100e9, 1.0).waves == 2


def test_a_target_under_the_round_trips_has_no_waves_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    r = plan(PlanInput(**{**DILOCO.__dict__, "target_sync_seconds": 0.005}))
    assert r.target is not None and r.target.waves is None
    assert any("no number of waves" in w for w in r.warnings)
    assert main([*DILOCO_ARGV, "--target-sync-seconds", "0.005"]) == 0
    assert "the round trips alone take 9.8 ms" in capsys.readouterr().out


@given(st.floats(min_value=0.01, max_value=100), st.floats(min_value=1e6, max_value=1e13))
def test_the_target_waves_are_the_fewest_that_fit(target: float, payload: float) -> None:
    rate, latency = 90e9, 0.005
    t = waves_for_target(target, payload, rate, latency)
    if target <= latency:
        assert t.waves is None
        return
    assert t.waves is not None and t.transfer_seconds is not None
    assert t.transfer_seconds <= target * (1 + 1e-9)
    if t.waves > 1:
        assert payload / ((t.waves - 1) * rate) + latency > target * (1 - 1e-9)


def test_target_waves_in_the_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*DILOCO_ARGV, "--target-sync-seconds", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["target"]["waves"] == 12
    assert main([*DILOCO_ARGV, "--target-sync-seconds", "2"]) == 0
    out = capsys.readouterr().out
    assert "waves for a 2 s sync" in out
    assert "4 given" in out


# --- switch buffer against the bandwidth-delay product ----------------------------------------------------


def test_a_shallow_buffer_does_not_hold_100_km_of_800g_in_flight() -> None:
    r = plan(PlanInput(distance_km=100, params=1e12, switch_buffer_preset="shallow"))
    b = r.buffer
    assert b is not None and b.preset == "shallow"
    assert b.buffer_bytes == BUFFER_PRESETS["shallow"] == 64e6
    assert not b.holds_bdp  # 64 MB of 98 MB
    assert b.fraction_of_bdp == pytest.approx(64 / 98)
    assert b.covers_round_trip_seconds == pytest.approx(0.64e-3)
    assert b.covers_km == pytest.approx(0.64e-3 / 2 / 4.9e-6)
    assert any(w.startswith("buffer: 64 MB holds 65%") for w in r.warnings)


def test_a_deep_buffer_holds_every_links_headroom() -> None:
    b = plan(PlanInput(distance_km=500, params=1e12, links=4, switch_buffer_preset="deep")).buffer
    assert b is not None and b.buffer_bytes == 8e9
    assert b.holds_bdp and b.holds_lossless_per_link and b.holds_all_links
    assert b.lossless_bytes_all_links == pytest.approx(4 * (490e6 + 2 * 9216))


def test_a_buffer_for_one_link_but_not_all_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--distance-km", "100", "--params", "70B", "--links", "4", "--buffer-bytes", "200MB"]
    assert main([*argv, "--json"]) == 0
    b = json.loads(capsys.readouterr().out)["buffer"]
    assert b["preset"] is None and b["buffer_bytes"] == 200e6
    assert b["holds_lossless_per_link"] is True and b["holds_all_links"] is False
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "NOT all 4" in out
    assert "warning: buffer:" in out


def test_no_buffer_flag_no_buffer_check() -> None:
    r = plan(SEED)
    assert r.buffer is None and r.target is None


# --- the report's plan ------------------------------------------------------------------------------------


def test_the_reports_plan_checks_the_links_optics() -> None:
    near = PlanInput(distance_km=80, crossing="activations", activation_bytes=1e9)
    far = PlanInput(distance_km=300, crossing="activations", activation_bytes=1e9)
    assert compare(near, {}).rows[0].note == "80 km route: within reach and CD tolerance"
    row = compare(far, {}).rows[0]
    assert row.quantity == "Optic reach (800ZR)" and row.planned == 120
    assert "800ZR+ (600 km, 800G)" in row.note


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--optics", "1600ZR"], "--optics: must be one of 400ZR, 800ZR, 800ZR+, OpenZR+, got '1600ZR'"),
        (["--buffer-bytes", "huge"], "--buffer-bytes: not a size (64MB, 8GB) or one of deep, shallow"),
        (["--buffer-bytes", "0"], "--buffer-bytes: must be a positive number"),
        (["--target-sync-seconds", "-1"], "--target-sync-seconds: must be a positive number"),
    ],
)
def test_a_bad_check_input_gets_one_clear_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "--distance-km", "100", "--params", "1e12", *argv]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [captured.err.strip()]
    assert captured.err.startswith(f"spanwatch: plan: {message}")


def test_the_library_rejects_a_buffer_given_twice() -> None:
    with pytest.raises(PlanError, match="not both"):
        PlanInput(distance_km=1, params=1, switch_buffer_bytes=1e6, switch_buffer_preset="deep")
    assert math.isfinite(plan(PlanInput(distance_km=1, params=1, switch_buffer_bytes=1e6)).optics.reach_km)


def test_nothing_is_said_to_hide_when_no_compute_is_given(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--distance-km", "100", "--links", "4", "--params", "70B", "--sync-every", "500"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "outer sync could hide behind the next 500 inner steps" in out
    assert "nothing: no compute given (--compute-ms) to hide behind 500 inner steps" in out
    assert "hides behind" not in out


def test_the_plan_calls_a_link_member_a_wave(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--distance-km", "100", "--links", "4", "--params", "70B"]) == 0
    out = capsys.readouterr().out
    assert "per wave" in out and "4 wave(s)" in out and "per link" not in out
