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
    hideable  = overlap * compute                                per step (0 <= overlap <= 1)
    exposed   = max(0, transfer - hideable) / sync_every         per step
    slowdown  = (compute + exposed) / compute

The overlap is with the compute of the step that ends in the sync (backward of the same step for
synchronous data parallelism); a streaming DiLoCo that spreads a sync over several steps is not modelled.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Literal, get_args

from analyzer.errors import AnalyzerError
from collector.config import Defaults
from collector.contracts.fibre import one_way_delay_s

Crossing = Literal["gradients", "activations"]
CROSSINGS: tuple[str, ...] = get_args(Crossing)

# The two sites of the plan: the participants of the inter-site ring all-reduce.
SITES = 2
# The config's default, so a plan and a measured link agree on the same fibre.
DEFAULT_FIBRE_DELAY_US_PER_KM: float = Defaults.model_fields["fibre_delay_us_per_km"].default
DEFAULT_ROUND_TRIPS: dict[str, int] = {"gradients": 2, "activations": 1}
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
        overlap: fraction of the step's compute the transfer can hide behind.
        efficiency: goodput / line rate on the links.
        round_trips: latency-bound round trips per sync; ``None`` for the crossing's default.
        crossing: what crosses the sites.
        activation_bytes: bytes crossing per step (required for ``activations``).
        fibre_delay_us_per_km: propagation delay of the fibre.
        mtu_bytes: largest frame, for the lossless headroom term.

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

    def __post_init__(self) -> None:
        problems = _range_problems(self) + _crossing_problems(self)
        if problems:
            raise PlanError(*problems)

    @property
    def effective_round_trips(self) -> int:
        """The round trips per sync: the given number, else the crossing's default."""
        return DEFAULT_ROUND_TRIPS[self.crossing] if self.round_trips is None else self.round_trips


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
    ]


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
        hideable_seconds_per_step: how much of the transfer can hide behind compute.
        exposed_seconds_per_step: what the transfer adds to each step, averaged over the sync interval.
        slowdown: step time with the network over step time without; ``None`` without a compute time.
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
    hideable_seconds_per_step: float
    exposed_seconds_per_step: float
    slowdown: float | None

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
    """Compute the latency and traffic budget (the formulas are in the module docstring).

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
    hideable = p.overlap * p.compute_seconds if p.compute_seconds is not None else 0.0
    exposed = max(0.0, transfer - hideable) / p.sync_every
    slowdown = (p.compute_seconds + exposed) / p.compute_seconds if p.compute_seconds is not None else None
    bdp = link_rate * rtt
    return PlanResult(
        inputs=p,
        one_way_delay_seconds=one_way,
        round_trip_seconds=rtt,
        link_bytes_per_second=link_rate,
        goodput_bytes_per_second=goodput,
        bandwidth_delay_product_bytes=bdp,
        buffer_bytes_per_link=bdp + 2 * p.mtu_bytes,
        bytes_per_sync=size,
        serialization_seconds=serialization,
        latency_seconds=latency,
        transfer_seconds=transfer,
        hideable_seconds_per_step=hideable,
        exposed_seconds_per_step=exposed,
        slowdown=slowdown,
    )


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
