"""A consistent, read-only picture of the fabric for the protocol servers.

The model's float totals become exact Python ints here (floor, and never below the previous snapshot's,
so a counter cannot step back by a rounding hair); packet counts follow from bytes per traffic class.
The servers only ever read a ``Snapshot``; the model replaces it whole, so a reader never sees half an
update.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spanwatch.sim import fabric as fab
from spanwatch.sim.fabric import PAUSE_REFRESH_S as REFRESH
from spanwatch.sim.fabric import Fabric
from spanwatch.sim.optics import INDEX

COUNTERS = (
    "in_octets",
    "in_pkts",
    "out_octets",
    "out_pkts",
    "in_discards",
    "out_discards",
    "in_errors",
    "in_fcs_errors",
    "fec_corrected",
    "fec_uncorrectable",
    "queue_tx_pkts",
    "queue_tx_bytes",
    "queue_drop_pkts",
    "queue_drop_bytes",
    "queue_ecn_pkts",
    "pfc_tx_frames",
    "pfc_rx_frames",
    "pfc_tx_pause_us",
    "pfc_rx_pause_us",
    "pfc_storms",
    "pause_rx",
    "pause_tx",
)


@dataclass(frozen=True)
class Snapshot:
    """Values per device and wave: ``counters[name][d][w]`` (int), ``gauges[name][d][w]`` (float).

    Attributes:
        time_ns: wall-clock time of the snapshot (the gNMI notification timestamp).
        uptime_ticks: hundredths of a second since the fabric started (sysUpTime).
        counters: monotonic integer totals.
        gauges: instant values (optics, occupancy, watermark, oper_up, speed).
        stats: optics ``{name: (min, max, avg)}`` over the last second, each ``[d][w]``.
        pool: per device ``(occupancy, watermark)`` bytes of its shared buffer.
        frequency_hz: carrier frequency per wave.
    """

    time_ns: int
    uptime_ticks: int
    counters: dict[str, list[list[int]]]
    gauges: dict[str, list[list[float]]]
    stats: dict[str, tuple[list[list[float]], list[list[float]], list[list[float]]]]
    pool: list[tuple[int, int]]
    frequency_hz: list[float]


def _ints(x: np.ndarray, n: int) -> np.ndarray:
    return np.asarray(np.floor(np.maximum(x, 0.0)).astype(np.int64).reshape(2, n))


def take(f: Fabric, time_ns: int, uptime_s: float, prev: Snapshot | None = None) -> Snapshot:
    """Snapshot ``f`` now.

    Args:
        f: the model.
        time_ns: wall-clock time to stamp it with.
        uptime_s: seconds since the devices "booted".
        prev: the previous snapshot (counters never go below it).

    Returns:
        the snapshot.
    """
    n, a = f.n, f.acc
    ifb, ibg = 1 / f.p.training.frame_bytes, 1 / f.p.background_frame_bytes
    zero = np.zeros(2 * n)
    pause_s = a[fab.PAUSE_S] * f.dt
    raw = {
        "in_octets": a[fab.RX_T] + a[fab.RX_O],
        "in_pkts": a[fab.RX_T] * ifb + a[fab.RX_O] * ibg,
        "out_octets": a[fab.TX_T] + a[fab.TX_O],
        "out_pkts": a[fab.TX_T] * ifb + a[fab.TX_O] * ibg,
        "in_discards": zero,
        "out_discards": (a[fab.DROP_T] + a[fab.FLUSH_T]) * ifb + (a[fab.DROP_O] + a[fab.FLUSH_O]) * ibg,
        "in_errors": a[fab.LOST_T] * ifb + a[fab.LOST_O] * ibg,
        "in_fcs_errors": a[fab.LOST_T] * ifb + a[fab.LOST_O] * ibg,
        "fec_corrected": a[fab.FEC_CORR],
        "fec_uncorrectable": a[fab.FEC_UNCORR],
        "queue_tx_pkts": a[fab.TX_T] * ifb + a[fab.TX_O] * ibg,
        "queue_tx_bytes": a[fab.TX_T] + a[fab.TX_O],
        "queue_drop_pkts": a[fab.DROP_T] * ifb + a[fab.DROP_O] * ibg,
        "queue_drop_bytes": a[fab.DROP_T] + a[fab.DROP_O],
        "queue_ecn_pkts": a[fab.ECN_T] * ifb + a[fab.ECN_O] * ibg,
        "pfc_tx_frames": pause_s / REFRESH,
        "pfc_rx_frames": zero,
        "pfc_tx_pause_us": pause_s * 1e6,
        "pfc_rx_pause_us": zero,
        "pfc_storms": a[fab.STORMS],
        "pause_rx": zero,
        "pause_tx": zero,
    }
    counters: dict[str, list[list[int]]] = {}
    for name, x in raw.items():
        ints = _ints(x, n)
        if prev is not None:
            ints = np.maximum(ints, np.asarray(prev.counters[name], dtype=np.int64))
        counters[name] = ints.tolist()
    o = f.optics
    gauges = {name: o.values[i].reshape(2, n).tolist() for name, i in INDEX.items()}
    gauges["temperature"] = o.temperature.reshape(2, n).tolist()
    gauges["occupancy"] = f.occupancy().reshape(2, n).tolist()
    gauges["watermark"] = f.watermark().reshape(2, n).tolist()
    gauges["oper_up"] = f.up2.astype(float).reshape(2, n).tolist()
    lo, hi, avg = o.stats()
    stats = {
        name: (lo[i].reshape(2, n).tolist(), hi[i].reshape(2, n).tolist(), avg[i].reshape(2, n).tolist())
        for name, i in INDEX.items()
    }
    occ, wm = f.pool_occupancy(), f.pool_watermark()
    pool = [(int(occ[d]), int(max(occ[d], wm[d]))) for d in (0, 1)]
    return Snapshot(time_ns, int(uptime_s * 100), counters, gauges, stats, pool, o.freq_hz.tolist())
