"""The kinds of network event: each kind is one declaration here.

A kind says how it is recognised (its rules: the catalogue metrics read, which direction is bad, and the
enter/exit levels of its hysteresis), the tunable levels it owns with their defaults (they become fields of
``analyzer.thresholds.Thresholds``, overridable from ``--thresholds FILE``), how much of an overlapping
step's excess it may be blamed for (``weight``), and its family (congestion, optical or down: the report's
category). Adding a kind is adding one entry to ``KINDS``.

Level defaults and why:

* drops, FCS errors, uncorrectable FEC blocks: any sustained loss matters to RDMA traffic, so enter at
  1 per second, leave below 0.5 per second.
* ECN marks: DCQCN marks about 1% of a busy queue's packets in normal operation; 5% marked means the
  queue sits above its marking threshold (leave below 2.5%). Queues that report no transmitted packets
  fall back to a rate: 100 marks/s.
* PFC: paused 1% of the time (duration counters) or 100 pause frames/s (frame counters only).
* queue depth: 1.5 x the interface's bandwidth-delay product (speed x round-trip fibre delay from the
  config), leaving below 1 x: a training job's own bursts fill a deep buffer up to about one BDP, a
  standing queue beyond that is another flow's traffic; without a config, 1 MB; never under 16 KiB (about
  ten frames: a port sending at line rate holds a few, and at near-zero distance 1.5 BDP is under one).
  A receive-stage (ingress) queue enters past that floor alone: the job's bursts queue where flows converge,
  at egress, while a clean far switch forwards what the link brings as fast as it arrives, so a backlog
  standing in its receive stage is the far side failing to drain (an incast onto the hosts, or their
  pauses), whatever its size against the link's BDP.
* pre-FEC BER: a tenth of the FEC limit of the link's optics profile (``collector.contracts.optics``), and
  twice the series' normal: a long wave lives with a BER near its FEC limit, which is its margin (the
  report's optics verdict), not an episode.
* OSNR: 0.8 dB under the series' normal (leave within 0.4 dB): the readings scatter by about 0.2 dB, and
  a wave whose margin is small all run is the optics verdict's finding, not an episode.
* a wave down: the interface reports oper-status down.

An episode is a departure from the normal: the median of the place's own readings (``analyzer.events``),
so an episode has to fill half the run to hide itself. Traffic classes other than the job's
(``background``) enter only past ``background_rise_enter`` x their normal as well: a background class
lives with a standing queue, drops and marks under strict priority.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import polars as pl

from analyzer import schemas

Family = Literal["congestion", "optical", "down"]


class Levels(Protocol):
    """What a rule reads its levels from (``analyzer.thresholds.Thresholds``)."""

    def level(self, name: str) -> float:
        """The value of a named level."""
        ...


LevelExpr = Callable[[Levels], pl.Expr]


@dataclass(frozen=True)
class Level:
    """A tunable threshold owned by a kind.

    Attributes:
        name: the field name in a thresholds file.
        default: its value when not overridden.
        description: what it measures, for the thresholds schema.
        lowest: the smallest accepted value (inclusive).
        highest: the largest accepted value (inclusive), if bounded.
    """

    name: str
    default: float
    description: str = ""
    lowest: float = 0.0
    highest: float | None = None


@dataclass(frozen=True)
class Rule:
    """One way a kind is recognised.

    Attributes:
        metrics: catalogue names (or derived signals) whose value is compared; counters as per-second rates.
        enter: the level that starts an episode (an expression: it may read the row's ``bdp_bytes``,
            ``fec_limit_ber`` and ``osnr_required_db``, the link's figures, and ``ingress``, whether the
            series is a receive-stage queue's).
        exit: the level that ends it.
        low_is_bad: True when small values are the problem (OSNR, oper-status).
        relative: True when the levels read the series' ``normal`` (and ``background``: the series is of
            a traffic class other than the job's).
    """

    metrics: tuple[str, ...]
    enter: LevelExpr
    exit: LevelExpr
    low_is_bad: bool = False
    relative: bool = False


@dataclass(frozen=True)
class EventKind:
    """One kind of event (see the module docstring). ``colour`` is the kind's in every chart: Paul Tol's
    colour-blind-safe "muted" palette, one colour per kind, black for a wave down."""

    name: str
    family: Family
    colour: str
    weight: float
    rules: tuple[Rule, ...]
    levels: tuple[Level, ...] = ()


def _lit(name: str) -> LevelExpr:
    return lambda t: pl.lit(t.level(name))


def _background(level: LevelExpr, rise: str) -> LevelExpr:
    # Another class's series enters only past ``rise`` x its normal as well (null for the job's: ignored).
    return lambda t: pl.max_horizontal(
        level(t), pl.when(pl.col("background")).then(pl.col("normal") * t.level(rise))
    )


def _congestion(metrics: tuple[str, ...], enter: LevelExpr, leave: LevelExpr) -> Rule:
    return Rule(
        metrics,
        _background(enter, "background_rise_enter"),
        _background(leave, "background_rise_exit"),
        relative=True,
    )


def _queue(fraction: str, fallback: str, floor: str) -> LevelExpr:
    # An egress queue against the link's bandwidth-delay product where the config gives the fibre, else an
    # absolute level; a receive-stage queue (ingress) against the floor alone; never under a few frames (at
    # near-zero distance 1.5 BDP is less than the frame being sent).
    return lambda t: pl.max_horizontal(
        pl.when(~pl.col("ingress")).then(
            pl.coalesce(pl.col("bdp_bytes") * t.level(fraction), pl.lit(t.level(fallback)))
        ),
        pl.lit(t.level(floor)),
    )


def _ber(fraction: str, rise: str) -> LevelExpr:
    return lambda t: pl.max_horizontal(
        pl.col("fec_limit_ber") * t.level(fraction), pl.col("normal") * t.level(rise)
    )


def _osnr(drop: str) -> LevelExpr:
    return lambda t: pl.col("normal") - t.level(drop)


def _pair(
    prefix: str, enter: float, leave: float, unit: str, highest: float | None = None
) -> tuple[Level, ...]:
    """The enter and exit levels of one hysteresis."""
    return (
        Level(f"{prefix}_enter{unit}", enter, highest=highest),
        Level(f"{prefix}_exit{unit}", leave, highest=highest),
    )


def _rate(metrics: tuple[str, ...], prefix: str, unit: str) -> Rule:
    return Rule(metrics, _lit(f"{prefix}_enter{unit}"), _lit(f"{prefix}_exit{unit}"))


def _class_rate(metrics: tuple[str, ...], prefix: str, unit: str) -> Rule:
    return _congestion(metrics, _lit(f"{prefix}_enter{unit}"), _lit(f"{prefix}_exit{unit}"))


ECN = "dci_queue_ecn_marked_packets_total"
QUEUE_SENT = "dci_queue_transmit_packets_total"
QUEUE_DROPPED = "dci_queue_dropped_packets_total"
EGRESS = pl.col("direction").is_null()
"""An egress queue's series (an ingress one carries ``direction="rx"``): what a class offered and how deep a
vendor's queues run are read there; the far end's ingress queue, mostly empty, would dilute them."""
SURGE = Rule(
    (QUEUE_SENT,),
    # A queue that is idle half the time has no normal rate to surge from.
    lambda t: pl.when(pl.col("normal") > 0).then(pl.col("normal") * t.level("surge_rise_enter")),
    lambda t: pl.col("normal") * t.level("surge_rise_exit"),
    relative=True,
)
"""A queue transmitting several times its normal packet rate (the ``burst`` kind's evidence)."""
# Derived: ECN-marked / transmitted packets of one queue over a sample interval. DCQCN marks a percent or
# so of packets in normal operation on a busy shallow buffer, so the share, not the rate, tells congestion.
ECN_FRACTION = schemas.ECN_FRACTION

# Weights: loss and pauses stall collectives directly, a deep queue or ECN marks slow them less, optical
# margins warn before they cost anything.
KINDS: dict[str, EventKind] = {
    kind.name: kind
    for kind in (
        EventKind(
            "drops",
            "congestion",
            "#CC6677",  # rose
            1.0,
            (
                _class_rate(
                    (QUEUE_DROPPED, "dci_interface_transmit_discards_total"),
                    "drop_rate",
                    "_pps",
                ),
            ),
            _pair("drop_rate", 1.0, 0.5, "_pps"),
        ),
        EventKind(
            "ecn",
            "congestion",
            "#DDCC77",  # sand
            0.5,
            (
                _congestion((ECN_FRACTION,), _lit("ecn_fraction_enter"), _lit("ecn_fraction_exit")),
                # Only for queues whose transmitted packets are not reported (no fraction can be formed).
                _class_rate((ECN,), "ecn_rate", "_pps"),
            ),
            (*_pair("ecn_fraction", 0.05, 0.025, "", highest=1.0), *_pair("ecn_rate", 100.0, 10.0, "_pps")),
        ),
        EventKind(
            "pfc",
            "congestion",
            "#AA4499",  # purple
            1.0,
            (
                _congestion(
                    ("dci_pfc_pause_duration_seconds_total",),
                    _lit("pfc_pause_fraction_enter"),
                    _lit("pfc_pause_fraction_exit"),
                ),
                _class_rate(("dci_pfc_pause_frames_total",), "pfc_frames", "_pps"),
            ),
            (
                *_pair("pfc_pause_fraction", 0.01, 0.001, "", highest=1.0),
                *_pair("pfc_frames", 100.0, 10.0, "_pps"),
            ),
        ),
        EventKind(
            "queue",
            "congestion",
            "#882255",  # wine
            0.5,
            (
                _congestion(
                    ("dci_queue_watermark_bytes", "dci_queue_occupancy_bytes"),
                    _queue(
                        "queue_bdp_fraction_enter", "queue_fallback_enter_bytes", "queue_floor_enter_bytes"
                    ),
                    _queue("queue_bdp_fraction_exit", "queue_fallback_exit_bytes", "queue_floor_exit_bytes"),
                ),
            ),
            (
                *_pair("queue_bdp_fraction", 1.5, 1.0, ""),
                *_pair("queue_fallback", 1e6, 5e5, "_bytes"),
                *_pair("queue_floor", 16384, 8192, "_bytes"),
            ),
        ),
        EventKind(
            "ber",
            "optical",
            "#332288",  # indigo
            0.1,
            (
                Rule(
                    ("dci_optics_pre_fec_ber", "dci_optics_pre_fec_ber_max"),
                    _ber("ber_limit_fraction_enter", "ber_rise_enter"),
                    _ber("ber_limit_fraction_exit", "ber_rise_exit"),
                    relative=True,
                ),
            ),
            (*_pair("ber_limit_fraction", 0.1, 0.05, ""), *_pair("ber_rise", 2.0, 1.5, "")),
        ),
        EventKind(
            "osnr",
            "optical",
            "#88CCEE",  # cyan
            0.1,
            (
                Rule(
                    ("dci_optics_osnr_db", "dci_optics_osnr_db_min"),
                    _osnr("osnr_drop_enter_db"),
                    _osnr("osnr_drop_exit_db"),
                    low_is_bad=True,
                    relative=True,
                ),
            ),
            (
                Level("osnr_drop_enter_db", 0.8, "enter when OSNR < the series' normal - this"),
                Level("osnr_drop_exit_db", 0.4),
                # The optics verdict's warning level (analyzer.report.optics), not an event level.
                Level("osnr_margin_enter_db", 2.0, "warn when OSNR < required + this", lowest=-50.0),
            ),
        ),
        EventKind(
            "fcs",
            "optical",
            "#44AA99",  # teal
            1.0,
            (_rate(("dci_interface_receive_fcs_errors_total",), "fcs_rate", "_per_second"),),
            _pair("fcs_rate", 1.0, 0.5, "_per_second"),
        ),
        EventKind(
            "fec_uncorrectable",
            "optical",
            "#117733",  # green
            1.0,
            (_rate(("dci_interface_fec_uncorrectable_blocks_total",), "fec_uncorrectable", "_per_second"),),
            _pair("fec_uncorrectable", 1.0, 0.5, "_per_second"),
        ),
        # Derived, not detected alone (analyzer.events.surges): the job's class sent ``SURGE`` times its
        # normal and squeezed the other classes on the interface (retransmissions, another tenant's
        # traffic in the job's class). A job's own bulk phases surge too, but leave the others served.
        # Also where a link end sent more of the job's class than the whole job can (analyzer.foreign).
        EventKind("burst", "congestion", "#999933", 0.5, (), _pair("surge_rise", 3.0, 2.0, "")),
        EventKind(
            "wave_down",
            "down",
            "#000000",  # black
            1.0,
            (
                Rule(
                    ("dci_interface_oper_up",), lambda t: pl.lit(0.5), lambda t: pl.lit(0.5), low_is_bad=True
                ),
            ),
        ),
    )
}

LOW_IS_BAD: frozenset[str] = frozenset(k.name for k in KINDS.values() if any(r.low_is_bad for r in k.rules))
METRICS: frozenset[str] = frozenset(m for k in KINDS.values() for r in k.rules for m in r.metrics) - {
    ECN_FRACTION
} | {QUEUE_SENT}
"""The catalogue metrics detection reads."""
