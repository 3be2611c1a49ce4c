"""Detection thresholds: documented defaults, overridable from a YAML file (``--thresholds FILE``).

Every condition has an *enter* and an *exit* level (hysteresis): an episode starts when a signal crosses the
enter level and lasts until it falls back past the exit level, so a signal hovering around one threshold
does not flap into many short episodes. Episodes of one kind on one interface closer than
``merge_gap_seconds`` are merged; episodes shorter than ``min_duration_seconds`` are dropped.

Defaults and why:

* drops, FCS errors, uncorrectable FEC blocks: any sustained loss matters to RDMA traffic, so enter at
  1 per second, leave below 0.5 per second.
* ECN marks: DCQCN marks about 1% of a busy queue's packets in normal operation; 5% marked means the
  queue sits above its marking threshold (leave below 2.5%). Queues that report no transmitted packets
  fall back to a rate: 100 marks/s.
* PFC: paused 1% of the time (duration counters) or 100 pause frames/s (frame counters only).
* queue depth: 1.5 x the interface's bandwidth-delay product (speed x round-trip fibre delay from the
  config), leaving below 1 x: a training job's own bursts fill a deep buffer up to about one BDP, a
  standing queue beyond that is another flow's traffic; without a config, 1 MB.
* pre-FEC BER: a tenth of the FEC limit (2e-2, the oFEC limit of 400ZR/800ZR coherent optics, what inter-DC
  waves use); set ``fec_limit_ber: 2.4e-4`` for KP4 RS(544,514) grey optics.
* OSNR: within 2 dB of the required OSNR (26 dB, 400ZR's 0.1 nm figure).
* a wave down: the interface reports oper-status down.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from analyzer.errors import InputError
from collector import yaml_input


class Thresholds(BaseModel):
    """Every tunable level of event detection and step classification (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    drop_rate_enter_pps: float = Field(default=1.0, gt=0, description="dropped packets per second")
    drop_rate_exit_pps: float = Field(default=0.5, ge=0)
    ecn_fraction_enter: float = Field(default=0.05, gt=0, le=1, description="ECN-marked share of packets")
    ecn_fraction_exit: float = Field(default=0.025, ge=0, le=1)
    ecn_rate_enter_pps: float = Field(default=100.0, gt=0, description="ECN-marked packets per second")
    ecn_rate_exit_pps: float = Field(default=10.0, ge=0)
    pfc_pause_fraction_enter: float = Field(default=0.01, gt=0, le=1, description="share of time paused")
    pfc_pause_fraction_exit: float = Field(default=0.001, ge=0, le=1)
    pfc_frames_enter_pps: float = Field(default=100.0, gt=0, description="PFC pause frames per second")
    pfc_frames_exit_pps: float = Field(default=10.0, ge=0)
    queue_bdp_fraction_enter: float = Field(
        default=1.5, gt=0, description="queue depth / bandwidth-delay product"
    )
    queue_bdp_fraction_exit: float = Field(default=1.0, ge=0)
    queue_fallback_enter_bytes: float = Field(default=1e6, gt=0, description="when the BDP is unknown")
    queue_fallback_exit_bytes: float = Field(default=5e5, ge=0)
    fec_limit_ber: float = Field(default=2e-2, gt=0, description="the pre-FEC BER the FEC can still correct")
    ber_limit_fraction_enter: float = Field(default=0.1, gt=0)
    ber_limit_fraction_exit: float = Field(default=0.05, ge=0)
    osnr_required_db: float = Field(default=26.0, description="the receiver's required OSNR")
    osnr_margin_enter_db: float = Field(default=2.0, description="enter when OSNR < required + this")
    osnr_margin_exit_db: float = Field(default=3.0)
    fcs_rate_enter_per_second: float = Field(default=1.0, gt=0)
    fcs_rate_exit_per_second: float = Field(default=0.5, ge=0)
    fec_uncorrectable_enter_per_second: float = Field(default=1.0, gt=0)
    fec_uncorrectable_exit_per_second: float = Field(default=0.5, ge=0)
    min_duration_seconds: float = Field(default=0.0, ge=0, description="shorter episodes are dropped")
    merge_gap_seconds: float = Field(default=2.0, ge=0, description="closer episodes of one kind are merged")
    inflated_min_ratio: float = Field(
        default=0.05, ge=0, description="a step is inflated when it exceeds its baseline by this share"
    )
    inflated_mad_factor: float = Field(
        default=3.0, ge=0, description="... and by this many median absolute deviations of the clean steps"
    )


def load_thresholds(path: Path | None) -> Thresholds:
    """Read thresholds from a YAML mapping; keys not given keep their defaults.

    Args:
        path: the YAML file, or None for the defaults.

    Returns:
        The validated thresholds.

    Raises:
        InputError: the file cannot be read, is not YAML, or has unknown keys or invalid values.
    """
    if path is None:
        return Thresholds()
    try:
        raw = yaml_input.load(path) or {}
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    except yaml_input.YamlInputError as exc:
        raise InputError(path, str(exc)) from None
    if not isinstance(raw, dict):
        raise InputError(path, "thresholds must be a mapping of name: value")
    try:
        return Thresholds.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InputError(path, problems) from None
