"""Optical health for the report: each interface's worst pre-FEC BER and OSNR against the thresholds.

The levels are the analysis's own (``analyzer.thresholds``): the FEC limit (what the FEC can still
correct), the BER event level (a fraction of it), the required OSNR and its event margin. An interface is
"over limit" past the FEC limit or below the required OSNR, a "warning" past the event levels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import polars as pl

from analyzer.measures import OSNR, PRE_FEC
from analyzer.report.model import Optics, OpticsRow, OpticsSeries, Status
from analyzer.thresholds import Thresholds


def optics(
    frame: pl.DataFrame, start: object, thresholds: Thresholds, vendor_of: Mapping[str, str]
) -> Optics:
    """Rows (worst values and margins) and the downsampled series of every optical interface.

    Args:
        frame: ``Readings.optics``.
        start: time zero of the series (an aware datetime), or None for the first reading.
        thresholds: the analysis's thresholds.
        vendor_of: device -> vendor name (devices of no vendor are absent).

    Returns:
        The optics section.
    """
    ber_level = thresholds.fec_limit_ber * thresholds.ber_limit_fraction_enter
    osnr_level = thresholds.osnr_required_db + thresholds.osnr_margin_enter_db
    worst = frame.group_by("device", "interface").agg(
        ber=pl.col("value").filter(pl.col("metric") == PRE_FEC[0]).max(),
        osnr=pl.col("value").filter(pl.col("metric") == OSNR[0]).min(),
    )
    rows = [
        _row(r["device"], r["interface"], r["ber"], r["osnr"], thresholds, vendor_of.get(r["device"]))
        for r in worst.sort("device", "interface").iter_rows(named=True)
    ]
    return Optics(
        thresholds.fec_limit_ber,
        ber_level,
        thresholds.osnr_required_db,
        osnr_level,
        rows,
        _series(frame, start),
    )


def _row(
    device: str, interface: str, ber: float | None, osnr: float | None, t: Thresholds, vendor: str | None
) -> OpticsRow:
    # Margin in decades: how many factors of ten the worst BER stays below the FEC limit.
    ber_margin = math.log10(t.fec_limit_ber / ber) if ber is not None and ber > 0 else None
    osnr_margin = osnr - t.osnr_required_db if osnr is not None else None
    over = (ber is not None and ber >= t.fec_limit_ber) or (osnr_margin is not None and osnr_margin < 0)
    warn = (ber is not None and ber >= t.fec_limit_ber * t.ber_limit_fraction_enter) or (
        osnr_margin is not None and osnr_margin < t.osnr_margin_enter_db
    )
    status: Status = (
        "no data" if ber is None and osnr is None else "over limit" if over else "warning" if warn else "ok"
    )
    return OpticsRow(device, interface, vendor, ber, ber_margin, osnr, osnr_margin, status)


def _series(frame: pl.DataFrame, start: object) -> list[OpticsSeries]:
    if frame.height == 0:
        return []
    zero = start if start is not None else frame["time"].min()
    timed = frame.with_columns(t=(pl.col("time") - pl.lit(zero)).dt.total_nanoseconds() / 1e9)
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
