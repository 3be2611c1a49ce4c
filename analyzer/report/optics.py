"""Optical health for the report: each interface's worst pre-FEC BER and OSNR against the thresholds.

The levels are those of each device's link optics profile (``collector.contracts.optics``, with the
analysis's overrides, ``analyzer.thresholds``): the FEC limit (what the FEC can still correct), the BER
event level (a fraction of it), the required OSNR and its event margin. The section's header shows the
default profile's. An interface is
"over limit" past the FEC limit or below the required OSNR, a "warning" past the event levels, and in
"outage" when it was otherwise fine but some readings had no signal (a down wave: ``analyzer.optical_signal``);
those readings are counted, never taken as the worst BER or OSNR.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import polars as pl

from analyzer.measures import OSNR, PRE_FEC
from analyzer.report.model import Optics, OpticsRow, OpticsSeries, Status
from analyzer.thresholds import Thresholds


def optics(
    frame: pl.DataFrame,
    start: object,
    thresholds: Thresholds,
    vendor_of: Mapping[str, str],
    profile_of: Mapping[str, str] | None = None,
) -> Optics:
    """Rows (worst values and margins) and the downsampled series of every optical interface.

    Args:
        frame: ``Readings.optics``.
        start: time zero of the series (an aware datetime), or None for the first reading.
        thresholds: the analysis's thresholds.
        vendor_of: device -> vendor name (devices of no vendor are absent).
        profile_of: device -> the optics profile of its link (devices of no link use the default).

    Returns:
        The optics section.
    """
    profile_of = profile_of or {}
    fec_limit, osnr_required = thresholds.optical_limits()
    ber_level = fec_limit * thresholds.level("ber_limit_fraction_enter")
    osnr_level = osnr_required + thresholds.level("osnr_margin_enter_db")
    worst = frame.group_by("device", "interface").agg(
        ber=pl.col("value").filter(pl.col("metric") == PRE_FEC[0]).max(),
        osnr=pl.col("value").filter(pl.col("metric") == OSNR[0]).min(),
        no_signal=pl.col("no_signal").filter(pl.col("metric") == PRE_FEC[0]).sum(),
        no_signal_osnr=pl.col("no_signal").filter(pl.col("metric") == OSNR[0]).sum(),
    )
    rows = [
        _row(
            r["device"],
            r["interface"],
            r["ber"],
            r["osnr"],
            thresholds,
            vendor_of.get(r["device"]),
            profile_of.get(r["device"]),
            max(int(r["no_signal"] or 0), int(r["no_signal_osnr"] or 0)),
        )
        for r in worst.sort("device", "interface").iter_rows(named=True)
    ]
    return Optics(
        fec_limit,
        ber_level,
        osnr_required,
        osnr_level,
        rows,
        _series(frame, start),
    )


def _row(
    device: str,
    interface: str,
    ber: float | None,
    osnr: float | None,
    t: Thresholds,
    vendor: str | None,
    profile: str | None,
    no_signal: int = 0,
) -> OpticsRow:
    fec_limit, osnr_required = t.optical_limits(profile)
    # Margin in decades: how many factors of ten the worst BER stays below the FEC limit.
    ber_margin = math.log10(fec_limit / ber) if ber is not None and ber > 0 else None
    osnr_margin = osnr - osnr_required if osnr is not None else None
    over = (ber is not None and ber >= fec_limit) or (osnr_margin is not None and osnr_margin < 0)
    warn = (ber is not None and ber >= fec_limit * t.level("ber_limit_fraction_enter")) or (
        osnr_margin is not None and osnr_margin < t.level("osnr_margin_enter_db")
    )
    status: Status = "over limit" if over else "warning" if warn else "outage" if no_signal else "ok"
    if ber is None and osnr is None and not no_signal:
        status = "no data"
    return OpticsRow(device, interface, vendor, ber, ber_margin, osnr, osnr_margin, status, no_signal)


def _series(frame: pl.DataFrame, start: object) -> list[OpticsSeries]:
    if frame.height == 0:
        return []
    zero = start if start is not None else frame["time"].min()
    timed = frame.drop_nulls("value").with_columns(
        t=(pl.col("time") - pl.lit(zero)).dt.total_nanoseconds() / 1e9
    )
    out = []
    for (device, interface, metric), group in timed.group_by(
        ["device", "interface", "metric"], maintain_order=True
    ):
        out.append(
            OpticsSeries(
                str(device), str(interface), str(metric), _rounded(group["t"]), group["value"].to_list()
            )
        )
    return out


def _rounded(column: pl.Series) -> list[float]:
    """Seconds to the millisecond: finer is noise in a chart and bulk in the JSON."""
    return [round(float(v), 3) for v in column.to_list()]
