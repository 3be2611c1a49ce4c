"""Planned versus measured: ``spanwatch plan``'s figures for the run's distance and links beside the run's.

The plan is derived from the collector config (the longest link's distance, its waves, their speed as the
archive reports it, the config's fibre delay) unless one is given. The model size is not known after the
fact, so the derived plan budgets the traffic the run actually moved: the bytes the link's interfaces sent
per step, per direction, as a per-step crossing (``crossing="activations"``: every step, one round trip,
no overlap). Its figures (round trip, bandwidth-delay product, lossless buffer, exposed time per step) sit
beside what the run measured for the same quantities, with the link's optics profile checked for reach.
"""

from __future__ import annotations

from collections.abc import Mapping

from analyzer.plan import PlanInput, PlanResult, plan
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
        bytes_per_step: bytes crossing per step and direction, measured.

    Returns:
        The plan's input, or None when the config has no links or no traffic was measured.
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
        optics=link.optics,
    )


def compare(planned: PlanInput, run: Mapping[str, float | None]) -> PlanComparison:
    """The plan's figures beside the run's.

    Args:
        planned: the plan's input.
        run: the run-scope measures by name (``measures.parquet``), plus ``step_median_seconds``.

    Returns:
        The comparison rows.
    """
    p = plan(planned)
    return PlanComparison(
        planned.distance_km, planned.links, planned.link_gbps, p.bytes_per_sync, _rows(p, run)
    )


def _rows(p: PlanResult, run: Mapping[str, float | None]) -> list[PlanRow]:
    per_step = f"planned for {p.bytes_per_sync / 1e6:.3g} MB per step and direction, no overlap"
    o = p.optics
    reach = (
        f"{o.distance_km:g} km route: within reach and CD tolerance"
        if o.ok
        else "; ".join(w.removeprefix("optics: ") for w in p.warnings if w.startswith("optics: "))
    )
    return [
        PlanRow(f"Optic reach ({o.profile})", "km", o.reach_km, None, reach),
        PlanRow("Round-trip fibre delay", "s", p.round_trip_seconds, None, "from the distance; not measured"),
        PlanRow(
            "Latency per sync (round trips x RTT)",
            "s",
            p.latency_seconds,
            None,
            "the floor a sync cannot go under",
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
        PlanRow(
            "Network time exposed per step (p50)",
            "s",
            p.exposed_seconds_per_step,
            run.get("exposed_latency_p50_seconds"),
            per_step,
        ),
        PlanRow(
            "Network time exposed per step (p99)",
            "s",
            None,
            run.get("exposed_latency_p99_seconds"),
            "measured only",
        ),
        PlanRow(
            "Step time inflation",
            "ratio",
            p.slowdown,
            run.get("step_time_inflation_ratio"),
            "planned with compute",
        ),
        PlanRow(
            "Link utilization (p99)",
            "ratio",
            p.inputs.efficiency,
            run.get("link_utilization_p99"),
            "planned: goodput efficiency",
        ),
    ]
