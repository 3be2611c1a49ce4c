"""``spanwatch plan``: its flags, turning their text into a ``PlanInput``, and the table or JSON it prints.

Every flag is read as text and parsed here rather than by argparse, so a bad value gets the same one-line
message and exit status 1 as every other user error (argparse would print usage and exit 2), and several
bad values are all reported at once.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from analyzer.plan import (
    BUFFER_PRESET_NOTES,
    BUFFER_PRESETS,
    CROSSINGS,
    DEFAULT_FIBRE_DELAY_US_PER_KM,
    DEFAULT_MTU_BYTES,
    DEFAULT_ROUND_TRIPS,
    PlanError,
    PlanInput,
    PlanResult,
    parse_bytes,
    parse_bytes_per_param,
    parse_count,
    plan,
    readable_seconds,
    readable_size,
)
from collector.contracts import optics as optics_profiles

if TYPE_CHECKING:
    from analyzer.text_table import TextTable

T = TypeVar("T")

# flag, metavar, help; the attribute is the flag's name with underscores.
_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--distance-km", "KM", "fibre distance between the two sites (required)"),
    ("--fibre-delay-us-per-km", "US", f"fibre propagation delay (default {DEFAULT_FIBRE_DELAY_US_PER_KM})"),
    ("--links", "N", "parallel waves between the sites, the members of one link of the report (default 1)"),
    ("--link-gbps", "GBPS", "line rate of each wave in Gb/s (default 800)"),
    ("--params", "N", "model parameters: 1e12, 70B, 1.5T (required for gradients)"),
    ("--bytes-per-param", "B", "bytes per gradient element, or a dtype: bf16, fp32, fp8 (default 2)"),
    ("--crossing", "WHAT", f"what crosses the sites: {' or '.join(CROSSINGS)} (default gradients)"),
    ("--activation-bytes", "BYTES", "activation bytes crossing per step: 1e9, 512MB (with activations)"),
    ("--sync-every", "STEPS", "steps between syncs: 1 synchronous, hundreds DiLoCo-style (default 1)"),
    ("--compute-ms", "MS", "compute time per step in ms (without it, no slowdown)"),
    (
        "--overlap",
        "F",
        "fraction of each step's compute the transfer can hide behind, 0..1 (default 0); with --sync-every N"
        " > 1 the outer sync streams behind the next N inner steps, 0 for one that blocks",
    ),
    ("--efficiency", "F", "goodput over line rate, above 0 and at most 1 (default 0.9)"),
    (
        "--round-trips",
        "N",
        "latency-bound round trips per sync (default "
        + ", ".join(f"{n} for {c}" for c, n in DEFAULT_ROUND_TRIPS.items())
        + ")",
    ),
    ("--mtu", "BYTES", f"largest frame, for the lossless headroom (default {DEFAULT_MTU_BYTES})"),
    (
        "--optics",
        "PROFILE",
        f"optics of the waves, checked for reach and dispersion: {', '.join(optics_profiles.PROFILES)}"
        f" (default {optics_profiles.DEFAULT})",
    ),
    ("--target-sync-seconds", "S", "find the waves at --link-gbps whose sync transfer fits in S seconds"),
    (
        "--buffer-bytes",
        "B",
        "switch packet buffer to check against the bandwidth-delay product: a size (64MB, 8GB) or an assumed"
        " class: " + ", ".join(f"{n} ({readable_size(b)})" for n, b in BUFFER_PRESETS.items()),
    ),
)


def arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``plan`` flags to its subparser.

    Args:
        p: the ``plan`` subparser.
    """
    for flag, metavar, text in _FLAGS:
        p.add_argument(flag, metavar=metavar, help=text)
    p.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")


def _integer(text: str) -> int:
    value = float(text)
    if not value.is_integer():
        raise ValueError(f"not a whole number, got {text!r}")
    return int(value)


def _parsed(args: argparse.Namespace, problems: list[str], flag: str, parse: Callable[[str], T]) -> T | None:
    """The flag's value parsed, or ``None`` when absent or bad (then one line is added to ``problems``)."""
    text: str | None = getattr(args, flag.removeprefix("--").replace("-", "_"))
    if text is None:
        return None
    try:
        return parse(text)
    except (ValueError, OverflowError) as e:
        problems.append(f"{flag}: {_reason(e, text)}")
        return None


def _reason(error: Exception, text: str) -> str:
    # float() says "could not convert string to float: 'x'": say what was expected in the user's words.
    message = str(error)
    return message if "got" in message else f"not a number, got {text!r}"


def input_from_arguments(args: argparse.Namespace) -> PlanInput:
    """Parse the ``plan`` flags into a validated ``PlanInput``.

    Args:
        args: the parsed command line, every plan flag still text (or ``None`` when absent).

    Returns:
        The plan's inputs; absent flags take ``PlanInput``'s defaults.

    Raises:
        PlanError: every flag that is missing, unparsable or out of range, one line each.
    """
    problems: list[str] = []
    given = {
        "distance_km": _parsed(args, problems, "--distance-km", float),
        "fibre_delay_us_per_km": _parsed(args, problems, "--fibre-delay-us-per-km", float),
        "links": _parsed(args, problems, "--links", _integer),
        "link_gbps": _parsed(args, problems, "--link-gbps", float),
        "params": _parsed(args, problems, "--params", parse_count),
        "bytes_per_param": _parsed(args, problems, "--bytes-per-param", parse_bytes_per_param),
        "crossing": _parsed(args, problems, "--crossing", lambda t: t.strip().lower()),
        "activation_bytes": _parsed(args, problems, "--activation-bytes", parse_bytes),
        "sync_every": _parsed(args, problems, "--sync-every", _integer),
        "compute_seconds": _parsed(args, problems, "--compute-ms", lambda t: float(t) / 1e3),
        "overlap": _parsed(args, problems, "--overlap", float),
        "efficiency": _parsed(args, problems, "--efficiency", float),
        "round_trips": _parsed(args, problems, "--round-trips", _integer),
        "mtu_bytes": _parsed(args, problems, "--mtu", _integer),
        "optics": _parsed(args, problems, "--optics", _optics_name),
        "target_sync_seconds": _parsed(args, problems, "--target-sync-seconds", float),
    }
    buffer = _parsed(args, problems, "--buffer-bytes", _buffer)
    if isinstance(buffer, str):
        given["switch_buffer_preset"] = buffer
    else:
        given["switch_buffer_bytes"] = buffer
    if args.distance_km is None:
        problems.insert(0, "--distance-km: required, the fibre distance between the sites in km")
    return _validated({k: v for k, v in given.items() if v is not None}, problems)


def _optics_name(text: str) -> str:
    # Profile names are case-insensitive on the command line (800zr+ is 800ZR+); unknown ones pass through
    # to PlanInput, which lists the known ones.
    known = {name.lower(): name for name in optics_profiles.PROFILES}
    return known.get(text.strip().lower(), text.strip())


def _buffer(text: str) -> float | str:
    preset = text.strip().lower()
    if preset in BUFFER_PRESETS:
        return preset
    try:
        return parse_bytes(text)
    except ValueError:
        presets = ", ".join(BUFFER_PRESETS)
        raise ValueError(f"not a size (64MB, 8GB) or one of {presets}, got {text!r}") from None


def _validated(fields: dict[str, object], problems: list[str]) -> PlanInput:
    """``PlanInput(**fields)``, raising every problem: those found parsing, then those of the values.

    Absent flags are left out of ``fields``, so ``PlanInput``'s defaults are the only ones. A flag already
    reported while parsing is not reported again (a bad ``--params`` is not also a missing one).
    """
    reported = {problem.split(":")[0] for problem in problems}
    fields.setdefault("distance_km", 1.0)  # a stand-in when missing or bad: that is reported already
    try:
        # The values come typed from their parsers; a dict of them is only `object` to mypy.
        result = PlanInput(**fields)  # type: ignore[arg-type]
    except PlanError as e:
        problems += [problem for problem in e.problems if problem.split(":")[0] not in reported]
    if problems:
        raise PlanError(*problems)
    return result


def run(args: argparse.Namespace) -> int:
    """``spanwatch plan``: print the budget as a table, or as JSON with ``--json``.

    Args:
        args: the parsed command line.

    Returns:
        0.

    Raises:
        PlanError: the inputs are wrong (the CLI prints it and exits 1).
    """
    result = plan(input_from_arguments(args))
    if args.json:
        json.dump(result.as_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(table(result).render())
        for warning in result.warnings:
            # One line each, left to the terminal to wrap: a warning stays whole for grep and copy.
            print(f"warning: {warning}")
    return 0


seconds = readable_seconds
size = readable_size


def _rows(r: PlanResult) -> list[tuple[str, str, str]]:
    p = r.inputs
    slowdown = "— (give --compute-ms)" if r.slowdown is None else f"{r.slowdown:.3f}x"
    what = (
        "gradients (ring all-reduce between 2 sites)" if p.crossing == "gradients" else "activations per step"
    )
    # Say "can hide" only where something does: with no compute given or no overlap, nothing is hidden.
    hides = p.compute_seconds is not None and p.overlap > 0
    behind = "hides" if hides else "could hide"
    if r.sync_model == "synchronous":
        model = ("synchronous", f"{behind} behind its own step's compute (backward)")
        steps = "1 step"
    else:
        model = ("streaming", f"outer sync {behind} behind the next {r.hideable_steps} inner steps")
        steps = f"{r.hideable_steps} inner steps"
    if p.compute_seconds is None:
        hideable = f"nothing: no compute given (--compute-ms) to hide behind {steps}"
    elif p.overlap <= 0:
        hideable = f"nothing: --overlap 0 (the sync overlaps none of the compute of {steps})"
    else:
        hideable = f"overlap {p.overlap:g} x compute of {steps}"
    return [
        ("one-way delay", seconds(r.one_way_delay_seconds), f"{p.distance_km:g} km x {p.fibre_delay_us_per_km:g} µs/km"),
        ("round trip", seconds(r.round_trip_seconds), "2 x one way"),
        ("wave rate", size(r.link_bytes_per_second, "B/s"), f"{p.link_gbps:g} Gb/s / 8, per wave (one of --links)"),
        ("bandwidth-delay product", size(r.bandwidth_delay_product_bytes), "wave rate x round trip, per wave"),
        ("lossless buffer", size(r.buffer_bytes_per_link), f"BDP + 2 x {p.mtu_bytes} B MTU, per wave"),
        *_buffer_rows(r),
        *_optics_rows(r),
        ("bytes per sync", size(r.bytes_per_sync), what),
        ("goodput", size(r.goodput_bytes_per_second, "B/s"), f"{p.links} wave(s) x efficiency {p.efficiency:g}"),
        ("transfer per sync", seconds(r.transfer_seconds),
         f"{seconds(r.serialization_seconds)} serialization + {p.effective_round_trips} round trip(s)"),
        *_target_rows(r),
        ("sync model", *model),
        ("hideable behind compute", seconds(r.hideable_seconds_per_sync), hideable),
        ("exposed per step", seconds(r.exposed_seconds_per_step), f"(transfer - hideable) / {p.sync_every} step(s)"),
        ("slowdown", slowdown, "(compute + exposed) / compute"),
    ]  # fmt: skip


def _optics_rows(r: PlanResult) -> list[tuple[str, str, str]]:
    o = r.optics
    reach = "within reach" if o.within_reach else "BEYOND REACH"
    cd = "within tolerance" if o.within_cd_tolerance else "BEYOND TOLERANCE"
    rows = [
        (f"optic reach ({o.profile})", f"{o.reach_km:g} km", f"{o.distance_km:g} km route: {reach}"),
        (
            "chromatic dispersion",
            f"{o.dispersion_ps_nm:,.0f} ps/nm",
            f"17 ps/nm/km x distance; {o.profile} tolerates {o.cd_tolerance_ps_nm:,.0f}: {cd}",
        ),
    ]
    if not o.within_rate:
        rows.append(("optic rate", f"{o.profile_gbps:g} Gb/s", f"BELOW --link-gbps {r.inputs.link_gbps:g}"))
    return rows  # the profiles that would carry the route are in the warnings below the table


def _target_rows(r: PlanResult) -> list[tuple[str, str, str]]:
    t = r.target
    if t is None:
        return []
    label = f"waves for a {seconds(t.target_sync_seconds)} sync"
    if t.waves is None:
        return [(label, "none", f"the round trips alone take {seconds(t.latency_floor_seconds)}")]
    assert t.transfer_seconds is not None  # set with the waves
    return [
        (
            label,
            str(t.waves),
            f"at {r.inputs.link_gbps:g} Gb/s x {r.inputs.efficiency:g}: transfer {seconds(t.transfer_seconds)};"
            f" {r.inputs.links} given",
        )
    ]


def _buffer_rows(r: PlanResult) -> list[tuple[str, str, str]]:
    b = r.buffer
    if b is None:
        return []
    source = "given" if b.preset is None else BUFFER_PRESET_NOTES[b.preset]
    if b.holds_all_links:
        verdict = f"holds all {r.inputs.links} wave(s)' lossless headroom"
    elif b.holds_lossless_per_link:
        verdict = f"holds one link's headroom, NOT all {r.inputs.links} ({size(b.lossless_bytes_all_links)})"
    elif b.holds_bdp:
        verdict = "holds one link's BDP, NOT its lossless headroom"
    else:
        verdict = f"holds {b.fraction_of_bdp:.0%} of one link's BDP: NOT ENOUGH"
    return [
        ("switch buffer", size(b.buffer_bytes), source),
        ("buffer vs BDP", f"{b.fraction_of_bdp:.3g}x", verdict),
        (
            "buffer covers",
            f"{b.covers_km:.3g} km",
            f"{seconds(b.covers_round_trip_seconds)} round trip at link rate",
        ),
    ]


def table(r: PlanResult) -> TextTable:
    """The budget as a table: quantity, value in readable units, and how it was computed.

    Args:
        r: the computed plan.

    Returns:
        The table (``render()`` for its text).
    """
    from analyzer.text_table import TextTable

    out = TextTable("spanwatch plan: latency and traffic budget", ("quantity", "value", "from"), ("value",))
    for row in _rows(r):
        out.add_row(*row)
    return out
