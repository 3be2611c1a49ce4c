"""``spanwatch plan``: the seed's figures, the stated formulas, the JSON contract, and one message per bad input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzer.plan import (
    PlanError,
    PlanInput,
    parse_bytes,
    parse_bytes_per_param,
    parse_count,
    plan,
    ring_allreduce_bytes,
)
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
    p = PlanInput(distance_km=100, params=1e12, compute_seconds=2.0, overlap=0.5, sync_every=100)
    r = plan(p)
    assert r.hideable_seconds_per_step == pytest.approx(1.0)
    assert r.exposed_seconds_per_step == pytest.approx((r.transfer_seconds - 1.0) / 100)
    assert r.slowdown == pytest.approx((2.0 + r.exposed_seconds_per_step) / 2.0)


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
