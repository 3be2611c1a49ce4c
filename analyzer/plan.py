"""The latency and traffic budget of a planned two-site training run, before anything is bought.

``plan(PlanInput) -> PlanResult`` is a pure function; ``analyzer.plan_render`` turns text from the command
line into a ``PlanInput`` and the result into a table or JSON. The model, stated once:

Delay (sources.md 4.4; the fibre arithmetic is ``collector.contracts.fibre.one_way_delay_s``)::

    one_way = distance_km * fibre_delay_us_per_km * 1e-6        (default 4.9 us/km, the config default)
    rtt     = 2 * one_way

Each link (line rate, not goodput: a buffer must absorb what arrives at line rate)::

    link_rate = link_gbps * 1e9 / 8                              bytes/s
    bdp       = link_rate * rtt                                  bytes in flight on one link
    buffer    = bdp + 2 * mtu                                    lossless (PFC) headroom per link: the
                                                                 round trip in flight, plus one frame
                                                                 being sent at each end when PAUSE lands;
                                                                 vendor formulas add response-time terms

What crosses the sites per sync (``crossing``), per direction (links are full duplex, so both directions
move at once):

* ``gradients`` (data parallel; default): a hierarchical all-reduce reduces inside each site first, then
  runs a ring all-reduce between the sites. A ring of N participants sends ``2 * (N - 1) / N * S`` bytes out
  of each participant (reduce-scatter then all-gather), so for the two sites: ``S = params *
  bytes_per_param``. ``sync_every`` is 1 for synchronous data parallelism, hundreds for DiLoCo-style runs.
* ``activations`` (pipeline stage boundary between the sites): ``activation_bytes`` per step, every step.

Time::

    goodput   = links * link_rate * efficiency                   (default efficiency 0.9)
    transfer  = bytes_per_sync / goodput + round_trips * rtt     (round_trips: 2 for gradients, one each for
                                                                 reduce-scatter and all-gather; 1 for
                                                                 activations, forward there, backward back)
    window    = sync_every                                       steps of compute the sync can hide behind
    hideable  = overlap * compute * window                       per sync (0 <= overlap <= 1)
    exposed   = max(0, transfer - hideable) / sync_every         per step, amortised over the interval
    slowdown  = (compute + exposed) / compute

Which compute the sync hides behind (``PlanResult.sync_model``):

* ``synchronous`` (``sync_every`` 1: data parallel, or pipeline activations): the backward of the step
  that ends in the sync, so the window is one step.
* ``streaming outer sync`` (``sync_every`` N > 1: DiLoCo-style): the outer sync streams while the next N
  inner steps compute (streaming DiLoCo), so up to N steps' compute, times ``overlap``, hides it. An outer
  sync that blocks the inner loop (the original DiLoCo) is ``overlap`` 0: then each sync costs its whole
  transfer, once every N steps.

Checks beside the budget (each also a line of ``PlanResult.warnings`` when it fails):

* Optics (``collector.contracts.optics``, default 800ZR): the distance against the profile's reach, and
  the route's chromatic dispersion ``distance_km * 17 ps/nm/km`` (``collector.contracts.fibre``) against
  its CD tolerance; when either fails, the profiles that pass both are suggested, shortest reach first.
* Waves for a target sync time ``S``: the fewest parallel waves at ``link_gbps`` with
  ``transfer <= S``, i.e. ``ceil(bytes_per_sync / (link_rate * efficiency * (S - round_trips * rtt)))``;
  none when the round trips alone take ``S``.
* Switch buffer against the bandwidth-delay product: whether a buffer of the given size (or an assumed
  class: ``deep`` 8 GB, ``shallow`` 64 MB) holds one link's BDP, its lossless headroom, and the headroom of
  every inter-site link at once (a shared buffer); and the round trip and fibre distance it covers.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Literal, get_args

from analyzer.errors import AnalyzerError
from collector.config import Defaults
from collector.contracts import optics as optics_profiles
from collector.contracts.fibre import DISPERSION_PS_PER_NM_KM, one_way_delay_s

Crossing = Literal["gradients", "activations"]
CROSSINGS: tuple[str, ...] = get_args(Crossing)

# The two sites of the plan: the participants of the inter-site ring all-reduce.
SITES = 2
# The config's default, so a plan and a measured link agree on the same fibre.
DEFAULT_FIBRE_DELAY_US_PER_KM: float = Defaults.model_fields["fibre_delay_us_per_km"].default
DEFAULT_ROUND_TRIPS: dict[str, int] = {"gradients": 2, "activations": 1}
# The steady network time per step the analysis measures (``analyzer.blame``'s links: serialization + two
# round trips, the collective's handshake and its last byte's); a plan set beside a run uses the same count.
STEADY_ROUND_TRIPS = 2
# Jumbo frames, as inter-DC RoCE fabrics run them.
DEFAULT_MTU_BYTES = 9216

# Size suffixes for counts: 70B (billion) and 70G are the same model.
_COUNT_SUFFIXES = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
# Size suffixes for bytes: decimal, as link rates are (800 Gb/s x 1 ms = 100 MB), or binary with "i".
_BYTE_SUFFIXES = {
    **{k: v for k, v in _COUNT_SUFFIXES.items() if k != "b"},
    "ki": 2.0**10,
    "mi": 2.0**20,
    "gi": 2.0**30,
    "ti": 2.0**40,
}
# Line rate per wave of each optics profile (the contract's docstring: 400ZR and OpenZR+ are 400G, 800ZR and
# 800ZR+ 800G), so a suggested profile says when it would need more waves.
PROFILE_GBPS: dict[str, float] = {"400ZR": 400.0, "800ZR": 800.0, "800ZR+": 800.0, "OpenZR+": 400.0}
# The longest single amplified span ZR optics target (OIF 400ZR/800ZR: 80-120 km).
SINGLE_SPAN_KM = 120.0
# Switch buffer classes, assumptions rather than any one switch: deep is a Jericho-class chip with HBM
# (about 8 GB), shallow a Tomahawk-class chip with on-die SRAM only (about 64 MB), each shared by its ports.
BUFFER_PRESETS: dict[str, float] = {"deep": 8e9, "shallow": 64e6}
BUFFER_PRESET_NOTES: dict[str, str] = {
    "deep": "assumed deep buffer: Jericho-class, HBM, shared by the ports",
    "shallow": "assumed shallow buffer: Tomahawk-class, on-die SRAM, shared by the ports",
}

# Bytes per parameter by the dtype names people say.
DTYPE_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5}


class PlanError(AnalyzerError):
    """The plan's inputs are wrong.

    Attributes:
        problems: one line per bad input, each starting with the flag it concerns.
    """

    def __init__(self, *problems: str) -> None:
        self.problems = problems
        if len(problems) == 1:
            message = f"plan: {problems[0]}"
        else:
            message = f"plan: {len(problems)} bad inputs\n" + "\n".join(f"  {p}" for p in problems)
        super().__init__(message)


@dataclass(frozen=True)
class PlanInput:
    """What the planner knows about the run; validated on construction.

    Attributes:
        distance_km: fibre distance between the sites.
        params: parameter count (required for ``gradients``).
        links: parallel inter-site links.
        link_gbps: line rate of each link, Gb/s.
        bytes_per_param: bytes per gradient element (2 for bf16).
        sync_every: steps between syncs (1 synchronous, hundreds DiLoCo-style).
        compute_seconds: compute time per step; ``None`` when unknown (no slowdown then).
        overlap: fraction of each step's compute the transfer can hide behind (over sync_every steps).
        efficiency: goodput / line rate on the links.
        round_trips: latency-bound round trips per sync; ``None`` for the crossing's default.
        crossing: what crosses the sites.
        activation_bytes: bytes crossing per step (required for ``activations``).
        fibre_delay_us_per_km: propagation delay of the fibre.
        mtu_bytes: largest frame, for the lossless headroom term.
        optics: the optics profile of the waves (``collector.contracts.optics``).
        target_sync_seconds: a sync time to find the waves for; ``None`` for no target.
        switch_buffer_bytes: the switch's packet buffer; ``None`` for the preset's, or no check.
        switch_buffer_preset: ``deep`` or ``shallow`` (``BUFFER_PRESETS``) when the size is assumed.

    Raises:
        PlanError: every bad input, one line each.
    """

    distance_km: float
    params: float | None = None
    links: int = 1
    link_gbps: float = 800.0
    bytes_per_param: float = 2.0
    sync_every: int = 1
    compute_seconds: float | None = None
    overlap: float = 0.0
    efficiency: float = 0.9
    round_trips: int | None = None
    crossing: Crossing = "gradients"
    activation_bytes: float | None = None
    fibre_delay_us_per_km: float = DEFAULT_FIBRE_DELAY_US_PER_KM
    mtu_bytes: int = DEFAULT_MTU_BYTES
    optics: str = optics_profiles.DEFAULT
    target_sync_seconds: float | None = None
    switch_buffer_bytes: float | None = None
    switch_buffer_preset: str | None = None

    def __post_init__(self) -> None:
        problems = _range_problems(self) + _crossing_problems(self)
        if problems:
            raise PlanError(*problems)

    @property
    def effective_round_trips(self) -> int:
        """The round trips per sync: the given number, else the crossing's default."""
        return DEFAULT_ROUND_TRIPS[self.crossing] if self.round_trips is None else self.round_trips

    @property
    def buffer_bytes(self) -> float | None:
        """The switch buffer to check: the size given, else the preset's, else ``None``."""
        if self.switch_buffer_bytes is not None:
            return self.switch_buffer_bytes
        return None if self.switch_buffer_preset is None else BUFFER_PRESETS[self.switch_buffer_preset]


def _positive(flag: str, value: float | None) -> list[str]:
    # NaN and infinity fail too: a plan with them has no meaningful figure.
    if value is not None and not (math.isfinite(value) and value > 0):
        return [f"{flag}: must be a positive number, got {value:g}"]
    return []


def _whole(flag: str, value: int | None, minimum: int) -> list[str]:
    if value is not None and value < minimum:
        return [f"{flag}: must be a whole number >= {minimum}, got {value}"]
    return []


def _fraction(flag: str, value: float, *, zero_ok: bool) -> list[str]:
    low_ok = value >= 0 if zero_ok else value > 0
    if not (math.isfinite(value) and low_ok and value <= 1):
        bounds = "between 0 and 1" if zero_ok else "above 0 and at most 1"
        return [f"{flag}: must be {bounds}, got {value:g}"]
    return []


def _range_problems(p: PlanInput) -> list[str]:
    return [
        *_positive("--distance-km", p.distance_km),
        *_positive("--params", p.params),
        *_whole("--links", p.links, 1),
        *_positive("--link-gbps", p.link_gbps),
        *_positive("--bytes-per-param", p.bytes_per_param),
        *_whole("--sync-every", p.sync_every, 1),
        *_positive("--compute-ms", None if p.compute_seconds is None else p.compute_seconds * 1e3),
        *_fraction("--overlap", p.overlap, zero_ok=True),
        *_fraction("--efficiency", p.efficiency, zero_ok=False),
        *_whole("--round-trips", p.round_trips, 0),
        *_positive("--activation-bytes", p.activation_bytes),
        *_positive("--fibre-delay-us-per-km", p.fibre_delay_us_per_km),
        *_whole("--mtu", p.mtu_bytes, 1),
        *_positive("--target-sync-seconds", p.target_sync_seconds),
        *_positive("--buffer-bytes", p.switch_buffer_bytes),
        *_choice_problems(p),
    ]


def _choice_problems(p: PlanInput) -> list[str]:
    problems = []
    if p.optics not in optics_profiles.PROFILES:
        problems.append(f"--optics: must be one of {', '.join(optics_profiles.PROFILES)}, got {p.optics!r}")
    if p.switch_buffer_preset is not None and p.switch_buffer_preset not in BUFFER_PRESETS:
        presets = ", ".join(BUFFER_PRESETS)
        problems.append(f"--buffer-bytes: a size or one of {presets}, got {p.switch_buffer_preset!r}")
    if p.switch_buffer_preset is not None and p.switch_buffer_bytes is not None:
        problems.append("--buffer-bytes: give a size or a preset, not both")
    return problems


def _crossing_problems(p: PlanInput) -> list[str]:
    # Each input belongs to one crossing; one given to the other is a mistake, never silently ignored.
    if p.crossing not in CROSSINGS:
        return [f"--crossing: must be one of {', '.join(CROSSINGS)}, got {p.crossing!r}"]
    if p.crossing == "gradients":
        problems = (
            [] if p.params is not None else ["--params: required, the model's parameter count (70B, 1e12)"]
        )
        if p.activation_bytes is not None:
            problems.append("--activation-bytes: only with --crossing activations")
        return problems
    problems = (
        [] if p.activation_bytes is not None else ["--activation-bytes: required with --crossing activations"]
    )
    if p.params is not None:
        problems.append("--params: not used with --crossing activations (give --activation-bytes)")
    if p.sync_every != 1:
        problems.append("--sync-every: pipeline activations cross every step; leave it at 1")
    return problems


@dataclass(frozen=True)
class ProfileReach:
    """One optics profile that would carry the route: its reach, CD tolerance and line rate per wave."""

    name: str
    reach_km: float
    cd_tolerance_ps_nm: float
    gbps: float | None


@dataclass(frozen=True)
class OpticsCheck:
    """The route against the optics profile of its waves (the same distance for every parallel link).

    Attributes:
        profile: the profile checked.
        distance_km: the route's length.
        reach_km: the longest route the profile targets.
        within_reach: ``distance_km <= reach_km``.
        dispersion_ps_nm: the route's chromatic dispersion, ``distance_km * 17 ps/nm/km``.
        cd_tolerance_ps_nm: the dispersion the profile's receiver compensates.
        within_cd_tolerance: ``dispersion_ps_nm <= cd_tolerance_ps_nm``.
        profile_gbps: the profile's line rate per wave, ``None`` when not known.
        within_rate: ``link_gbps`` is no more than the profile carries (true when not known).
        ok: all three hold.
        suggested: when not ``ok``, the profiles that reach and tolerate the route, shortest reach first.
    """

    profile: str
    distance_km: float
    reach_km: float
    within_reach: bool
    dispersion_ps_nm: float
    cd_tolerance_ps_nm: float
    within_cd_tolerance: bool
    profile_gbps: float | None
    within_rate: bool
    ok: bool
    suggested: tuple[ProfileReach, ...]


@dataclass(frozen=True)
class TargetWaves:
    """The parallel waves a target sync time needs.

    Attributes:
        target_sync_seconds: the time one sync's transfer must fit in.
        latency_floor_seconds: the round trips of one sync, which no number of waves shortens.
        waves: the fewest waves at ``link_gbps`` whose transfer fits; ``None`` when the floor is the target
            or more.
        transfer_seconds: one sync's transfer over that many waves; ``None`` without waves.
    """

    target_sync_seconds: float
    latency_floor_seconds: float
    waves: int | None
    transfer_seconds: float | None


@dataclass(frozen=True)
class BufferCheck:
    """A switch buffer against the bytes in flight on the inter-site links.

    Attributes:
        buffer_bytes: the switch's packet buffer.
        preset: ``deep`` or ``shallow`` when the size is an assumed class, else ``None``.
        bdp_bytes_per_link: one link's bandwidth-delay product.
        holds_bdp: the buffer holds one link's round trip in flight.
        holds_lossless_per_link: the buffer holds one link's lossless headroom (BDP + 2 MTU).
        lossless_bytes_all_links: every link's headroom together, for a buffer the ports share.
        holds_all_links: the buffer holds that.
        fraction_of_bdp: buffer over one link's BDP.
        covers_round_trip_seconds: the round trip at one link's line rate the buffer holds.
        covers_km: the fibre distance of that round trip.
    """

    buffer_bytes: float
    preset: str | None
    bdp_bytes_per_link: float
    holds_bdp: bool
    holds_lossless_per_link: bool
    lossless_bytes_all_links: float
    holds_all_links: bool
    fraction_of_bdp: float
    covers_round_trip_seconds: float
    covers_km: float


@dataclass(frozen=True)
class PlanResult:
    """The budget; every figure in seconds, bytes or bytes per second.

    Attributes:
        inputs: what the plan was computed from.
        one_way_delay_seconds: fibre propagation delay, one way.
        round_trip_seconds: twice that.
        link_bytes_per_second: line rate of one link.
        goodput_bytes_per_second: what all links together carry, after efficiency.
        bandwidth_delay_product_bytes: bytes in flight on one link over a round trip.
        buffer_bytes_per_link: buffer one link needs to stay lossless.
        bytes_per_sync: bytes each site sends the other per sync.
        serialization_seconds: time to push ``bytes_per_sync`` through the links.
        latency_seconds: the latency-bound round trips of one sync.
        transfer_seconds: both together, one sync.
        sync_model: ``synchronous`` (the sync hides behind one step) or ``streaming outer sync`` (behind
            the next ``sync_every`` inner steps).
        hideable_steps: the steps of compute the sync can hide behind.
        hideable_seconds_per_step: one step's compute the transfer can hide behind (overlap x compute).
        hideable_seconds_per_sync: all the compute one sync can hide behind (that, times the steps).
        exposed_seconds_per_step: what the transfer adds to each step, averaged over the sync interval.
        slowdown: step time with the network over step time without; ``None`` without a compute time.
        optics: the route against the waves' optics profile.
        target: the waves a target sync time needs; ``None`` without a target.
        buffer: the switch buffer against the bandwidth-delay product; ``None`` without a buffer.
        warnings: one sentence per failed check, for the table and ``--json``.
    """

    inputs: PlanInput
    one_way_delay_seconds: float
    round_trip_seconds: float
    link_bytes_per_second: float
    goodput_bytes_per_second: float
    bandwidth_delay_product_bytes: float
    buffer_bytes_per_link: float
    bytes_per_sync: float
    serialization_seconds: float
    latency_seconds: float
    transfer_seconds: float
    sync_model: str
    hideable_steps: int
    hideable_seconds_per_step: float
    hideable_seconds_per_sync: float
    exposed_seconds_per_step: float
    slowdown: float | None
    optics: OpticsCheck
    target: TargetWaves | None
    buffer: BufferCheck | None
    warnings: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        """The figures as JSON-ready values, with the inputs under ``inputs``."""
        out = asdict(self)
        out["inputs"] = {**asdict(self.inputs), "round_trips": self.inputs.effective_round_trips}
        return out


def ring_allreduce_bytes(payload_bytes: float, participants: int) -> float:
    """Bytes each participant of a ring all-reduce sends: reduce-scatter, then all-gather.

    Args:
        payload_bytes: the size of the buffer being reduced.
        participants: the ring's members (at least 1).

    Returns:
        ``2 * (participants - 1) / participants * payload_bytes``.
    """
    return 2 * (participants - 1) / participants * payload_bytes


def bytes_per_sync(p: PlanInput) -> float:
    """Bytes one site sends the other per sync, for what crosses the sites.

    Args:
        p: the plan's inputs.

    Returns:
        The bytes, per direction.

    Raises:
        PlanError: the input lacks what its crossing needs.
    """
    if p.crossing == "activations" and p.activation_bytes is not None:
        return p.activation_bytes
    if p.crossing == "gradients" and p.params is not None:
        return ring_allreduce_bytes(p.params * p.bytes_per_param, SITES)
    raise PlanError(*_crossing_problems(p))  # only for an input that bypassed PlanInput's validation


def plan(p: PlanInput) -> PlanResult:
    """Compute the latency and traffic budget and its checks (the formulas are in the module docstring).

    Args:
        p: the plan's inputs, already validated by ``PlanInput``.

    Returns:
        Every figure of the budget.
    """
    one_way = one_way_delay_s(p.distance_km, p.fibre_delay_us_per_km)
    rtt = 2 * one_way
    link_rate = p.link_gbps * 1e9 / 8
    goodput = p.links * link_rate * p.efficiency
    size = bytes_per_sync(p)
    serialization = size / goodput
    latency = p.effective_round_trips * rtt
    transfer = serialization + latency
    # A DiLoCo outer sync streams behind the next sync_every inner steps; a synchronous one only behind the
    # backward of its own step. With sync_every 1 both are the same single step.
    window = p.sync_every
    hideable_step = p.overlap * p.compute_seconds if p.compute_seconds is not None else 0.0
    hideable_sync = hideable_step * window
    exposed = max(0.0, transfer - hideable_sync) / p.sync_every
    slowdown = (p.compute_seconds + exposed) / p.compute_seconds if p.compute_seconds is not None else None
    bdp = link_rate * rtt
    lossless = bdp + 2 * p.mtu_bytes
    optics = optics_check(p.distance_km, p.link_gbps, p.optics)
    target = (
        None
        if p.target_sync_seconds is None
        else waves_for_target(p.target_sync_seconds, size, link_rate * p.efficiency, latency)
    )
    buffer = None if p.buffer_bytes is None else _buffer_check(p, p.buffer_bytes, link_rate, bdp, lossless)
    return PlanResult(
        inputs=p,
        one_way_delay_seconds=one_way,
        round_trip_seconds=rtt,
        link_bytes_per_second=link_rate,
        goodput_bytes_per_second=goodput,
        bandwidth_delay_product_bytes=bdp,
        buffer_bytes_per_link=lossless,
        bytes_per_sync=size,
        serialization_seconds=serialization,
        latency_seconds=latency,
        transfer_seconds=transfer,
        sync_model="synchronous" if window == 1 else "streaming outer sync",
        hideable_steps=window,
        hideable_seconds_per_step=hideable_step,
        hideable_seconds_per_sync=hideable_sync,
        exposed_seconds_per_step=exposed,
        slowdown=slowdown,
        optics=optics,
        target=target,
        buffer=buffer,
        warnings=(
            *_optics_warnings(optics, p.link_gbps),
            *_target_warnings(target),
            *_buffer_warnings(p, buffer),
        ),
    )


def optics_check(distance_km: float, link_gbps: float, name: str = optics_profiles.DEFAULT) -> OpticsCheck:
    """The route against an optics profile's reach, CD tolerance and line rate.

    Args:
        distance_km: the route's fibre length.
        link_gbps: the line rate each wave must carry.
        name: the profile (``collector.contracts.optics.PROFILES``).

    Returns:
        The check, with the profiles that would carry the route when this one does not.
    """
    chosen = optics_profiles.profile(name)
    dispersion = distance_km * DISPERSION_PS_PER_NM_KM

    def carries(o: optics_profiles.OpticsProfile) -> bool:
        return distance_km <= o.reach_km and dispersion <= o.cd_tolerance_ps_nm

    gbps = PROFILE_GBPS.get(chosen.name)
    within_rate = gbps is None or link_gbps <= gbps
    ok = carries(chosen) and within_rate
    # Shortest reach first: the least optic that does the job; the faster first at the same reach.
    others = sorted(
        (o for o in optics_profiles.PROFILES.values() if o.name != chosen.name and carries(o)),
        key=lambda o: (o.reach_km, -(PROFILE_GBPS.get(o.name) or 0.0)),
    )
    suggested = (
        ()
        if ok
        else tuple(
            ProfileReach(o.name, o.reach_km, o.cd_tolerance_ps_nm, PROFILE_GBPS.get(o.name)) for o in others
        )
    )
    return OpticsCheck(
        profile=chosen.name,
        distance_km=distance_km,
        reach_km=chosen.reach_km,
        within_reach=distance_km <= chosen.reach_km,
        dispersion_ps_nm=dispersion,
        cd_tolerance_ps_nm=chosen.cd_tolerance_ps_nm,
        within_cd_tolerance=dispersion <= chosen.cd_tolerance_ps_nm,
        profile_gbps=gbps,
        within_rate=within_rate,
        ok=ok,
        suggested=suggested,
    )


def waves_for_target(
    target_seconds: float, bytes_per_sync: float, wave_goodput: float, latency_seconds: float
) -> TargetWaves:
    """The fewest parallel waves whose transfer of one sync fits in ``target_seconds``.

    Args:
        target_seconds: the time the transfer must fit in.
        bytes_per_sync: bytes per sync and direction.
        wave_goodput: one wave's goodput, bytes/s.
        latency_seconds: the round trips of one sync (no wave count shortens them).

    Returns:
        The waves and the transfer over them; no waves when the round trips alone take the target.
    """
    budget = target_seconds - latency_seconds
    if budget <= 0:
        return TargetWaves(target_seconds, latency_seconds, None, None)
    needed = bytes_per_sync / (wave_goodput * budget)
    # A ratio that lands on a whole number by arithmetic (2.0000000000000004) needs that number, not one more.
    waves = max(1, math.ceil(needed * (1 - 1e-12)))
    return TargetWaves(
        target_seconds, latency_seconds, waves, bytes_per_sync / (waves * wave_goodput) + latency_seconds
    )


def _buffer_check(p: PlanInput, buffer: float, link_rate: float, bdp: float, lossless: float) -> BufferCheck:
    covers_rtt = buffer / link_rate
    return BufferCheck(
        buffer_bytes=buffer,
        preset=p.switch_buffer_preset if p.switch_buffer_bytes is None else None,
        bdp_bytes_per_link=bdp,
        holds_bdp=buffer >= bdp,
        holds_lossless_per_link=buffer >= lossless,
        lossless_bytes_all_links=p.links * lossless,
        holds_all_links=buffer >= p.links * lossless,
        fraction_of_bdp=buffer / bdp,
        covers_round_trip_seconds=covers_rtt,
        covers_km=covers_rtt / 2 / (p.fibre_delay_us_per_km * 1e-6),
    )


def _optics_warnings(o: OpticsCheck, link_gbps: float) -> list[str]:
    out = []
    if not o.within_reach:
        out.append(f"optics: {o.distance_km:g} km is beyond {o.profile}'s reach of {o.reach_km:g} km")
    if not o.within_cd_tolerance:
        out.append(
            f"optics: {o.dispersion_ps_nm:,.0f} ps/nm of dispersion ({o.distance_km:g} km x "
            f"{DISPERSION_PS_PER_NM_KM:g} ps/nm/km) is beyond {o.profile}'s tolerance of "
            f"{o.cd_tolerance_ps_nm:,.0f} ps/nm"
        )
    if not o.within_rate:
        out.append(
            f"optics: {o.profile} carries {o.profile_gbps:g} Gb/s per wave, below --link-gbps {link_gbps:g}"
        )
    if not o.ok:
        out.append(f"optics: {suggestion(o, link_gbps)}")
    return out


def suggestion(o: OpticsCheck, link_gbps: float) -> str:
    """What would carry the route instead, in words: the suggested profiles, or that none does."""
    if not o.suggested:
        return (
            f"no profile in the contracts carries {o.distance_km:g} km: regenerate along the route or use a "
            "long-haul line system"
        )
    names = []
    for s in o.suggested:
        rate = "" if s.gbps is None else f", {s.gbps:g}G"
        slower = (
            f": {math.ceil(link_gbps / s.gbps)} waves per {link_gbps:g}G"
            if s.gbps is not None and s.gbps < link_gbps
            else ""
        )
        names.append(f"{s.name} ({s.reach_km:g} km{rate}{slower})")
    # ZR optics reach one amplified span; past it the route needs in-line amplifiers (an open line system).
    line = " over an amplified multi-span line" if o.distance_km > SINGLE_SPAN_KM else ""
    return f"{' or '.join(names)} would carry it{line}"


def _target_warnings(t: TargetWaves | None) -> list[str]:
    if t is None or t.waves is not None:
        return []
    return [
        f"target: the round trips alone take {readable_seconds(t.latency_floor_seconds)}, not under "
        f"{readable_seconds(t.target_sync_seconds)}: no number of waves reaches it"
    ]


def _buffer_warnings(p: PlanInput, b: BufferCheck | None) -> list[str]:
    if b is None or b.holds_all_links:
        return []
    if not b.holds_bdp:
        return [
            f"buffer: {readable_size(b.buffer_bytes)} holds {b.fraction_of_bdp:.0%} of one link's "
            f"{readable_size(b.bdp_bytes_per_link)} in flight (it covers {b.covers_km:.3g} km, not "
            f"{p.distance_km:g} km): PFC cannot keep the link lossless, what is in flight when PAUSE is sent overflows it"
        ]
    if not b.holds_lossless_per_link:
        return [f"buffer: {readable_size(b.buffer_bytes)} holds one link's BDP but not its lossless headroom"]
    return [
        f"buffer: {readable_size(b.buffer_bytes)} holds one link's lossless headroom but not all {p.links} "
        f"links' at once ({readable_size(b.lossless_bytes_all_links)}) if the ports share it"
    ]


def readable_seconds(value: float) -> str:
    """A duration with the unit that keeps it readable: ``980 µs``, ``4.9 ms``, ``22.2 s``."""
    if value == 0:
        return "0 ms"
    if value < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if value < 1:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def readable_size(value: float, unit: str = "B") -> str:
    """A decimal size, as link rates are counted: ``98 MB``, ``2 TB``, ``90 GB/s`` with ``unit="B/s"``."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


_SIZED = re.compile(r"(?P<number>[+-]?[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(?P<suffix>[a-z]*)")


def _sized(text: str, suffixes: dict[str, float], trailing: str = "") -> float | None:
    cleaned = text.strip().lower().replace("_", "").replace(",", "")
    match = _SIZED.fullmatch(cleaned)
    if match is None:
        return None
    suffix = match["suffix"]
    if trailing and suffix.endswith(trailing) and suffix[: -len(trailing)] in suffixes:
        suffix = suffix[: -len(trailing)]
    scale = suffixes.get(suffix)
    return None if scale is None else float(match["number"]) * scale


def parse_count(text: str) -> float:
    """A count such as a parameter count: ``1e12``, ``70B``, ``1.5T``, ``400M``, ``7_000_000_000``.

    Args:
        text: the count as typed; suffixes k, M, B or G (billion), T, P.

    Returns:
        The count.

    Raises:
        ValueError: the text is not a count.
    """
    value = _sized(text, _COUNT_SUFFIXES)
    if value is None:
        raise ValueError(f"not a count (examples: 1e12, 70B, 1.5T), got {text!r}")
    return value


def parse_bytes(text: str) -> float:
    """A size in bytes: ``1e9``, ``512MB``, ``4G``, ``2GiB`` (k/M/G/T decimal, Ki/Mi/Gi/Ti binary).

    Args:
        text: the size as typed, with an optional unit.

    Returns:
        The size in bytes.

    Raises:
        ValueError: the text is not a size.
    """
    value = _sized(text, _BYTE_SUFFIXES, trailing="b")
    if value is None:
        raise ValueError(f"not a size in bytes (examples: 1e9, 512MB, 2GiB), got {text!r}")
    return value


def parse_bytes_per_param(text: str) -> float:
    """Bytes per parameter: a number (``2``) or a dtype name (``bf16``, ``fp32``, ``fp8``).

    Args:
        text: the number or dtype as typed.

    Returns:
        Bytes per parameter.

    Raises:
        ValueError: neither a number nor a known dtype.
    """
    dtype = DTYPE_BYTES.get(text.strip().lower())
    if dtype is not None:
        return dtype
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"not a number or one of {', '.join(DTYPE_BYTES)}, got {text!r}") from None
