"""Planned versus measured: ``spanwatch plan``'s figures for the run's distance and links beside the run's.

The plan is derived from the collector config (the longest link's distance, its waves, their speed as the
archive reports it, the config's fibre delay) unless one is given, for the *job's* bytes per step and
direction (``analyze --job-bytes-per-step``), as a per-step crossing (``crossing="activations"``: every step,
no overlap) with the measured steady time's round trips (``STEADY_ROUND_TRIPS``). Never for all the bytes the link carried: a shared link's background traffic is
not the job's to budget. Each planned figure sits beside the measured figure of the same quantity (the
round trip and serialization per link as the analysis measured them, the exposed time per step), or beside
"-" when the run did not measure it; the link's optics profile is checked for reach.
"""

from __future__ import annotations

from collections.abc import Mapping

from analyzer.plan import STEADY_ROUND_TRIPS, PlanInput, PlanResult, plan
from analyzer.report.model import PlanComparison, PlanRow
from collector.config import Config

DEFAULT_LINK_GBPS = 800.0


def plan_input(
    config: Config, link_speed_bytes: float | None, bytes_per_step: float | None
) -> PlanInput | None:
    """The plan of the config's longest link: its distance, member waves per side and speed.

    Args:
        config: the collector config.
        link_speed_bytes: the member interfaces' reported speed, or None (800 Gb/s is assumed).
        bytes_per_step: the job's bytes crossing per step and direction, or None when unknown.

    Returns:
        The plan's input, or None when the config has no links or the job's bytes are unknown.
    """
    if not config.links or not bytes_per_step:
        return None
    link = max(config.links, key=lambda item: item.distance_km)
    # Each wave has one member interface at each end: the wave count is the members of one end.
    ends = [m.device for m in link.members]
    waves = max(ends.count(d) for d in set(ends)) if len(set(ends)) > 1 else len(ends)
    gbps = link_speed_bytes * 8 / 1e9 if link_speed_bytes else DEFAULT_LINK_GBPS
    us_per_km = link.fibre_delay_us_per_km or config.defaults.fibre_delay_us_per_km
    return PlanInput(
        link.distance_km,
        links=max(waves, 1),
        link_gbps=gbps,
        fibre_delay_us_per_km=us_per_km,
        crossing="activations",
        activation_bytes=bytes_per_step,
        # The measured steady time's formula, so planned and measured are the same quantity.
        round_trips=STEADY_ROUND_TRIPS,
        optics=link.optics,
    )


def compare(planned: PlanInput, run: Mapping[str, float | None]) -> PlanComparison:
    """The plan's figures beside the run's.

    Args:
        planned: the plan's input.
        run: the run-scope measures by name (``measures.parquet``), plus ``round_trip_seconds`` and
            ``serialization_seconds`` (mean over links, measured), ``steady_seconds_per_step`` and
            ``exposed_seconds_per_step`` (means over steps).

    Returns:
        The comparison rows.
    """
    p = plan(planned)
    return PlanComparison(
        planned.distance_km, planned.links, planned.link_gbps, p.bytes_per_sync, _rows(p, run)
    )


def _rows(p: PlanResult, run: Mapping[str, float | None]) -> list[PlanRow]:
    o = p.optics
    reach = (
        f"{o.distance_km:g} km route: within reach and CD tolerance"
        if o.ok
        else "; ".join(w.removeprefix("optics: ") for w in p.warnings if w.startswith("optics: "))
    )
    not_measured = "not measured in this run"
    return [
        PlanRow(f"Optic reach ({o.profile})", "km", o.reach_km, None, reach),
        PlanRow(
            "Job bytes per step and direction",
            "bytes",
            p.bytes_per_sync,
            run.get("job_bytes_per_step"),
            "the job's, not all the link carried (analyze --job-bytes-per-step)",
        ),
        PlanRow(
            "Round trip",
            "s",
            p.round_trip_seconds,
            run.get("round_trip_seconds"),
            "planned from the fibre distance; measured per link, mean",
        ),
        PlanRow(
            "Serialization of the job's bytes per step",
            "s",
            p.serialization_seconds,
            run.get("serialization_seconds"),
            "bytes / goodput; measured per link, mean" if run.get("serialization_seconds") else not_measured,
        ),
        PlanRow(
            "Steady network time per step (no episode)",
            "s",
            p.transfer_seconds,
            run.get("steady_seconds_per_step"),
            f"serialization + {p.inputs.effective_round_trips} round trips, planned and measured"
            if run.get("steady_seconds_per_step")
            else not_measured,
        ),
        PlanRow(
            "Network time exposed per step (mean)",
            "s",
            p.exposed_seconds_per_step,
            run.get("exposed_seconds_per_step"),
            "planned: no overlap with compute; measured: steady part (when estimated) + episodes",
        ),
        PlanRow(
            "Bandwidth-delay product per wave", "bytes", p.bandwidth_delay_product_bytes, None, "in flight"
        ),
        PlanRow(
            "Lossless buffer per wave",
            "bytes",
            p.buffer_bytes_per_link,
            run.get("queue_watermark_p99_bytes"),
            "measured: p99 queue watermark on the link's interfaces",
        ),
    ]
