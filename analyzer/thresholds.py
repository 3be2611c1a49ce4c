"""Detection thresholds: documented defaults, overridable from a YAML file (``--thresholds FILE``).

Every condition has an *enter* and an *exit* level (hysteresis): an episode starts when a signal crosses the
enter level and lasts until it falls back past the exit level, so a signal hovering around one threshold
does not flap into many short episodes. Episodes of one kind on one interface closer than
``merge_gap_seconds`` are merged; episodes shorter than ``min_duration_seconds`` are dropped.

The levels of each event kind are declared with the kind (``analyzer.kinds``, where their defaults are
explained); this module adds the ones every kind shares. The optical limits (FEC limit, required OSNR)
come from each link's optics profile in the collector config (``collector.contracts.optics``); a
thresholds file may override them for every link.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from analyzer.errors import InputError
from analyzer.kinds import KINDS, Level
from collector import yaml_input
from collector.contracts import optics


class SharedThresholds(BaseModel):
    """The levels every kind shares and the step classification's (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    optics: str | None = Field(
        default=None, description="an optics profile for every link, over the config's"
    )
    fec_limit_ber: float | None = Field(default=None, gt=0, description="overrides the profiles' FEC limit")
    osnr_required_db: float | None = Field(default=None, description="overrides the profiles' required OSNR")
    min_duration_seconds: float = Field(default=0.0, ge=0, description="shorter episodes are dropped")
    merge_gap_seconds: float = Field(default=2.0, ge=0, description="closer episodes of one kind are merged")
    background_rise_enter: float = Field(
        default=3.0, ge=1, description="another traffic class enters past this x its normal (analyzer.kinds)"
    )
    background_rise_exit: float = Field(default=2.0, ge=1, description="... and leaves under this x")
    background_offered_rise: float = Field(
        default=1.5,
        ge=1,
        description="... and is its own episode only if offered this x its normal load (analyzer.events)",
    )
    inflated_min_ratio: float = Field(
        default=0.05, ge=0, description="a step is inflated when it exceeds its baseline by this share"
    )
    inflated_mad_factor: float = Field(
        default=3.0, ge=0, description="... and by this many median absolute deviations of the clean steps"
    )

    def level(self, name: str) -> float:
        """A named level (``analyzer.kinds.Levels``)."""
        return float(getattr(self, name))

    def optical_limits(self, profile: str | None = None) -> tuple[float, float]:
        """(pre-FEC BER limit, required OSNR dB) for a link of ``profile``, with this file's overrides."""
        chosen = optics.profile(self.optics or profile)
        fec = self.fec_limit_ber if self.fec_limit_ber is not None else chosen.fec_ber_limit
        osnr = self.osnr_required_db if self.osnr_required_db is not None else chosen.required_osnr_db
        return fec, osnr


def _field(level: Level) -> Any:
    return (
        float,
        Field(default=level.default, ge=level.lowest, le=level.highest, description=level.description),
    )


if TYPE_CHECKING:
    Thresholds = SharedThresholds
else:
    Thresholds = create_model(
        "Thresholds",
        __base__=SharedThresholds,
        __doc__="Every tunable level: the shared ones and each event kind's (``analyzer.kinds``).",
        **{level.name: _field(level) for kind in KINDS.values() for level in kind.levels},
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
