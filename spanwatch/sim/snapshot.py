"""A consistent, read-only picture of the fabric for the protocol servers.

The model's float totals become exact Python ints here (floor, and never below the previous snapshot's,
so a counter cannot step back by a rounding hair); packet counts follow from bytes per traffic class.
The servers only ever read a ``Snapshot``; the model replaces it whole, so a reader never sees half an
update. Values are per device (``[d]``, the fabric layout's device order) and per its waves (``[d][w]``);
devices of different links have different numbers of waves. ``queue_*`` rows are the job's class (queue
``queue``), ``bg_*`` the background class (queue ``other_queue``), ``ingress_*`` the job's class in the
port's ingress queue (the fabric's receive stage). An optics value is NaN where a wave is
down (no signal): the servers leave it out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spanwatch.sim import fabric as fab
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
    "bg_tx_pkts",
    "bg_tx_bytes",
    "bg_drop_pkts",
    "bg_drop_bytes",
    "bg_ecn_pkts",
)


@dataclass(frozen=True)
class Snapshot:
    """Values per device and wave: ``counters[name][d][w]`` (int), ``gauges[name][d][w]`` (float).

    Attributes:
        time_ns: wall-clock time of the snapshot (the gNMI notification timestamp).
        uptime_ticks: hundredths of a second since the fabric started (sysUpTime).
        counters: monotonic integer totals.
        gauges: instant values (optics, occupancy, watermark, ingress_occupancy, ingress_watermark,
            oper_up, speed).
        stats: optics ``{name: (min, max, avg)}`` over the last second, each ``[d][w]``.
        pool: per device ``(occupancy, watermark)`` bytes of its shared buffer.
        frequency_hz: carrier frequency per device and wave.
        speed_gbps: each device's wave rate.
        queue / other_queue: the job's class and the background class (queue names and PFC priority).
    """

    time_ns: int
    uptime_ticks: int
    counters: dict[str, list[list[int]]]
    gauges: dict[str, list[list[float]]]
    stats: dict[str, tuple[list[list[float]], list[list[float]], list[list[float]]]]
    pool: list[tuple[int, int]]
    frequency_hz: list[list[float]]
    speed_gbps: list[float]
    queue: int = 3
    other_queue: int = 0
    # ``counters`` as one array (rows in ``counters``' order, the fabric's flat order): the next snapshot's
    # floor, without rebuilding it from the lists.
    floors: np.ndarray | None = field(default=None, repr=False, compare=False)


def _split(x: np.ndarray, starts: list[int], sizes: list[int]) -> list[list[Any]]:
    values = x.tolist()  # once, then sliced: the same Python numbers as each slice's ``tolist``
    return [values[a : a + n] for a, n in zip(starts, sizes, strict=True)]


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
    a, lay = f.acc, f.lay
    peer = lay.peer
    starts = [d.start for d in lay.devices]
    sizes = [d.waves for d in lay.devices]
    ifb, ibg = 1 / fab.FRAME_BYTES, 1 / fab.BACKGROUND_FRAME_BYTES
    zero = np.zeros(lay.size)
    host_pause_s = a[fab.PAUSE_HOST] * f.dt
    rx_pause_s = a[fab.PAUSE_RX] * f.dt  # this end was paused by the far end
    tx_pause_s = host_pause_s + rx_pause_s[peer]  # pauses this end sent: to its hosts, and over the wave
    raw = {
        "in_octets": a[fab.RX_T] + a[fab.RX_X] + a[fab.RX_O],
        "in_pkts": (a[fab.RX_T] + a[fab.RX_X]) * ifb + a[fab.RX_O] * ibg,
        "out_octets": a[fab.TX_T] + a[fab.TX_X] + a[fab.TX_O],
        "out_pkts": (a[fab.TX_T] + a[fab.TX_X]) * ifb + a[fab.TX_O] * ibg,
        "in_discards": (a[fab.DROP_RX_T] + a[fab.DROP_RX_X]) * ifb,
        "out_discards": (a[fab.DROP_T] + a[fab.DROP_X] + a[fab.FLUSH_T] + a[fab.FLUSH_X]) * ifb
        + (a[fab.DROP_O] + a[fab.FLUSH_O]) * ibg,
        "in_errors": (a[fab.LOST_T] + a[fab.LOST_X]) * ifb + a[fab.LOST_O] * ibg,
        "in_fcs_errors": (a[fab.LOST_T] + a[fab.LOST_X]) * ifb + a[fab.LOST_O] * ibg,
        "fec_corrected": a[fab.FEC_CORR],
        "fec_uncorrectable": a[fab.FEC_UNCORR],
        "queue_tx_pkts": (a[fab.TX_T] + a[fab.TX_X]) * ifb,
        "queue_tx_bytes": a[fab.TX_T] + a[fab.TX_X],
        "queue_drop_pkts": (a[fab.DROP_T] + a[fab.DROP_X]) * ifb,
        "queue_drop_bytes": a[fab.DROP_T] + a[fab.DROP_X],
        "queue_ecn_pkts": (a[fab.ECN_T] + a[fab.ECN_X]) * ifb,
        "pfc_tx_frames": tx_pause_s / f.pause_refresh_s,
        "pfc_rx_frames": rx_pause_s / f.pause_refresh_s,
        "pfc_tx_pause_us": tx_pause_s * 1e6,
        "pfc_rx_pause_us": rx_pause_s * 1e6,
        "pfc_storms": a[fab.STORMS],
        "pause_rx": zero,
        "pause_tx": zero,
        "bg_tx_pkts": a[fab.TX_O] * ibg,
        "bg_tx_bytes": a[fab.TX_O],
        "bg_drop_pkts": a[fab.DROP_O] * ibg,
        "bg_drop_bytes": a[fab.DROP_O],
        "bg_ecn_pkts": a[fab.ECN_O] * ibg,
    }
    # Every counter at once (the same elementwise floor and maximum as one at a time).
    names = list(raw)
    floors = np.floor(np.maximum(np.stack([raw[name] for name in names]), 0.0)).astype(np.int64)
    if prev is not None:
        before = prev.floors
        if before is None or list(prev.counters) != names:
            before = np.stack(
                [np.concatenate([np.asarray(r, dtype=np.int64) for r in prev.counters[n]]) for n in names]
            )
        floors = np.maximum(floors, before)
    counters = {
        name: [row[a : a + n] for a, n in zip(starts, sizes, strict=True)]
        for name, row in zip(names, floors.tolist(), strict=True)
    }
    o = f.optics
    gauges = {name: _split(o.values[i], starts, sizes) for name, i in INDEX.items()}
    gauges["temperature"] = _split(o.temperature, starts, sizes)
    gauges["occupancy"] = _split(f.occupancy(), starts, sizes)
    gauges["watermark"] = _split(f.watermark(), starts, sizes)
    gauges["bg_occupancy"] = _split(f.occupancy_other(), starts, sizes)
    gauges["bg_watermark"] = _split(f.watermark_other(), starts, sizes)
    gauges["ingress_occupancy"] = _split(f.ingress_occupancy(), starts, sizes)
    gauges["ingress_watermark"] = _split(f.ingress_watermark(), starts, sizes)
    gauges["oper_up"] = _split(f.up.astype(float), starts, sizes)
    lo, hi, avg = o.stats()
    stats = {
        name: (_split(lo[i], starts, sizes), _split(hi[i], starts, sizes), _split(avg[i], starts, sizes))
        for name, i in INDEX.items()
    }
    occ, wm = f.pool_occupancy(), f.pool_watermark()
    pool = [(int(occ[d]), int(max(occ[d], wm[d]))) for d in range(len(lay.devices))]
    return Snapshot(
        time_ns,
        int(uptime_s * 100),
        counters,
        gauges,
        stats,
        pool,
        _split(o.freq_hz, starts, sizes),
        [d.spec.wave_gbps for d in lay.devices],
        f.s.job.traffic_class,
        f.s.background_class,
        floors,
    )
