"""The OID table of one simulated switch, built from a fabric snapshot.

It serves what the collector's mapping modules read (``collector/mappings/snmp``), with their indexes and
wire units, so the collector maps it with no special case:

- SNMPv2-MIB system group (sysDescr, sysUpTime, sysName); IF-MIB ifTable / ifXTable (ifName
  ``Ethernet1/<wave+1>``, ifIndex ``wave+1``, HC counters, ifHighSpeed 800000, ifOperStatus,
  ifCounterDiscontinuityTime 0); EtherLike-MIB FCS errors and 802.3x pause;
- JUNIPER-IFOPTICS-MIB jnxOpticsPMCurrentTable (coherent CD ps/nm, DGD ps, PDL / Q / SNR 0.1 dB, power
  0.01 dBm with min/max/avg, bias 0.1 mA, temperature 0.1 C, CFO MHz) and JNX-OPT-IF-EXT-MIB FEC table
  (near end: corrected / uncorrected, pre-FEC BER as mantissa x 10^-exponent);
- ARISTA-QUEUE-MIB egress queue counters (the job's queue, unicast rows), ARISTA-QOS-MIB ECN marks,
  ARISTA-PFC-MIB per-priority PFC frames and watchdog, JUNIPER-COS-MIB queue depth (current / peak).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pysnmp.proto.rfc1902 import Counter32, Counter64, Gauge32, Integer, OctetString, TimeTicks

from spanwatch.sim.snapshot import Snapshot
from spanwatch.sim.snmp_agent import Oid, Table, Value

IF_TABLE = (1, 3, 6, 1, 2, 1, 2, 2, 1)
IF_X = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1)
DOT3_STATS = (1, 3, 6, 1, 2, 1, 10, 7, 2, 1)
DOT3_PAUSE = (1, 3, 6, 1, 2, 1, 10, 7, 10, 1)
JNX_OPTICS = (1, 3, 6, 1, 4, 1, 2636, 3, 71, 1, 2, 1, 1)
JNX_FEC = (1, 3, 6, 1, 4, 1, 2636, 3, 73, 1, 3, 3, 8, 1)
JNX_COS = (1, 3, 6, 1, 4, 1, 2636, 3, 15, 4, 1)
ARISTA_QUEUE = (1, 3, 6, 1, 4, 1, 30065, 3, 6, 1, 2, 1)
ARISTA_ECN = (1, 3, 6, 1, 4, 1, 30065, 3, 13, 1, 9, 1)
ARISTA_PFC = (1, 3, 6, 1, 4, 1, 30065, 3, 11, 1, 1, 1)
ARISTA_PFC_WD = (1, 3, 6, 1, 4, 1, 30065, 3, 11, 1, 2, 1)
Row = tuple[Oid, Value]


@dataclass(frozen=True)
class Kinds:
    """What a row's value is made with: pysnmp's types for the agent (``PYSNMP``); the fast recording path
    passes constructors of the wire's ``(tag, value)`` pairs instead (``spanwatch.fast_feeds.WIRE``)."""

    Counter32: Callable[[int], Value]
    Counter64: Callable[[int], Value]
    Gauge32: Callable[[int], Value]
    Integer: Callable[[int], Value]
    OctetString: Callable[[str], Value]
    TimeTicks: Callable[[int], Value]


PYSNMP = Kinds(Counter32, Counter64, Gauge32, Integer, OctetString, TimeTicks)


def interface_name(wave: int) -> str:
    """The name a simulated switch gives the port of ``wave`` (0-based)."""
    return f"Ethernet1/{wave + 1}"


def _int(k: Kinds, value: float) -> Value:
    return k.Integer(round(value))


def _mantissa(ber_value: float) -> tuple[int, int]:
    """BER as a 3-digit mantissa and exponent: value = mantissa x 10^-exponent."""
    if ber_value <= 0:
        return 0, 0
    exponent = math.ceil(-math.log10(ber_value)) + 2
    return round(ber_value * 10**exponent), exponent


# The sorting order of a device's rows, by their OIDs as generated: the same few OID lists come back on
# every poll (a wave down drops some rows), and sorting them again was a third of a table's cost.
_ORDER: dict[tuple[Oid, ...], list[int]] = {}
ORDER_LIMIT = 256


def build(s: Snapshot, d: int, device: str, kinds: Kinds = PYSNMP) -> Table:
    """The sorted table of device ``d`` (the fabric layout's index) named ``device``, its values made by
    ``kinds``."""
    rows = list(_rows(s, d, device, kinds))
    oids = tuple(oid for oid, _ in rows)
    order = _ORDER.get(oids)
    if order is None:
        if len(_ORDER) >= ORDER_LIMIT:
            _ORDER.clear()
        # A stable sort by OID, as sorting the rows was.
        order = _ORDER[oids] = sorted(range(len(oids)), key=oids.__getitem__)
    return [oids[i] for i in order], [rows[i][1] for i in order]


def _rows(s: Snapshot, d: int, device: str, k: Kinds) -> Iterator[Row]:
    n = len(s.frequency_hz[d])
    yield (1, 3, 6, 1, 2, 1, 1, 1, 0), k.OctetString(f"spanwatch simulated DCI switch {device}")
    yield (1, 3, 6, 1, 2, 1, 1, 3, 0), k.TimeTicks(s.uptime_ticks % 2**32)
    yield (1, 3, 6, 1, 2, 1, 1, 5, 0), k.OctetString(device)
    yield (1, 3, 6, 1, 2, 1, 2, 1, 0), k.Integer(n)
    for w in range(n):
        yield from _interface(s, d, w, k)
        yield from _optics(s, d, w, k)
        yield from _queues(s, d, w, k)


def _interface(s: Snapshot, d: int, w: int, k: Kinds) -> Iterator[Row]:
    c, i, name = s.counters, w + 1, interface_name(w)
    up = s.gauges["oper_up"][d][w] > 0
    for col, value in (
        (1, k.Integer(i)),
        (2, k.OctetString(name)),
        (3, k.Integer(6)),
        (5, k.Gauge32(2**32 - 1)),
        (7, k.Integer(1)),
        (8, k.Integer(1 if up else 2)),
        (10, k.Counter32(c["in_octets"][d][w] % 2**32)),
        (11, k.Counter32(c["in_pkts"][d][w] % 2**32)),
        (13, k.Counter32(c["in_discards"][d][w] % 2**32)),
        (14, k.Counter32(c["in_errors"][d][w] % 2**32)),
        (16, k.Counter32(c["out_octets"][d][w] % 2**32)),
        (17, k.Counter32(c["out_pkts"][d][w] % 2**32)),
        (19, k.Counter32(c["out_discards"][d][w] % 2**32)),
        (20, k.Counter32(0)),
    ):
        yield (*IF_TABLE, col, i), value
    for col, value in (
        (1, k.OctetString(name)),
        (6, k.Counter64(c["in_octets"][d][w])),
        (7, k.Counter64(c["in_pkts"][d][w])),
        (8, k.Counter64(0)),
        (9, k.Counter64(0)),
        (10, k.Counter64(c["out_octets"][d][w])),
        (11, k.Counter64(c["out_pkts"][d][w])),
        (12, k.Counter64(0)),
        (13, k.Counter64(0)),
        (15, k.Gauge32(round(s.speed_gbps[d] * 1000))),
        (18, k.OctetString(f"dci wave {w + 1}")),
        (19, k.TimeTicks(0)),
    ):
        yield (*IF_X, col, i), value
    yield (*DOT3_STATS, 3, i), k.Counter32(c["in_fcs_errors"][d][w] % 2**32)
    for col, key in ((3, "pause_rx"), (4, "pause_tx")):
        yield (*DOT3_PAUSE, col, i), k.Counter32(c[key][d][w] % 2**32)
    for col, key in ((5, "pause_rx"), (6, "pause_tx")):
        yield (*DOT3_PAUSE, col, i), k.Counter64(c[key][d][w])


# jnxOpticsPMCurrentTable columns: (instant, min, max, avg) column numbers, quantity, wire scale.
_PM = (
    ((1, 9, 10, 11), "cd", 1.0),
    ((2, 12, 13, 14), "pmd", 1.0),
    ((4, 18, 19, 20), "pdl", 10.0),
    ((5, 21, 22, 23), "q", 10.0),
    ((6, 24, 25, 26), "esnr", 10.0),
    ((7, 27, 28, 29), "tx_power", 100.0),
    ((8, 30, 31, 32), "rx_power", 100.0),
    ((43, 44, 45, 46), "cfo", 1e-6),
)


def _optics(s: Snapshot, d: int, w: int, k: Kinds) -> Iterator[Row]:
    i, g = w + 1, s.gauges
    for cols, name, scale in _PM:
        lo, hi, avg = s.stats[name]
        for col, value in zip(cols, (g[name][d][w], lo[d][w], hi[d][w], avg[d][w]), strict=True):
            if not math.isnan(value):  # a wave down has no signal to measure: no row
                yield (*JNX_OPTICS, col, i), _int(k, value * scale)
    yield (*JNX_OPTICS, 35, i), _int(k, g["bias"][d][w] * 1e4)  # 0.1 mA
    yield (*JNX_OPTICS, 39, i), _int(k, g["temperature"][d][w] * 10)
    c = s.counters
    yield (*JNX_FEC, 3, i, 1), k.Counter64(c["fec_corrected"][d][w])
    yield (*JNX_FEC, 4, i, 1), k.Counter64(c["fec_uncorrectable"][d][w])
    lo, hi, avg = s.stats["pre_fec_ber"]
    for col, value in ((5, g["pre_fec_ber"][d][w]), (7, lo[d][w]), (9, hi[d][w]), (11, avg[d][w])):
        if math.isnan(value):
            continue
        mantissa, exponent = _mantissa(value)
        yield (*JNX_FEC, col, i, 1), k.Integer(mantissa)
        yield (*JNX_FEC, col + 1, i, 1), k.Integer(exponent)


def _queues(s: Snapshot, d: int, w: int, k: Kinds) -> Iterator[Row]:
    i, c, q = w + 1, s.counters, s.queue
    for col, key in (
        (4, "queue_tx_pkts"),
        (5, "queue_tx_bytes"),
        (6, "queue_drop_pkts"),
        (7, "queue_drop_bytes"),
    ):
        yield (*ARISTA_QUEUE, col, i, q, 1), k.Counter64(c[key][d][w])
    yield (*ARISTA_ECN, 4, i, q), k.Counter64(c["queue_ecn_pkts"][d][w])
    for prio in range(8):
        ours = prio == s.queue
        for col, key in ((3, "pfc_tx_frames"), (4, "pfc_rx_frames")):
            yield (*ARISTA_PFC, col, i, prio), k.Counter64(c[key][d][w] if ours else 0)
        yield (*ARISTA_PFC_WD, 4, i, prio), k.Counter64(c["pfc_storms"][d][w] if ours else 0)
    for col, key in (
        (7, "queue_tx_pkts"),
        (9, "queue_tx_bytes"),
        (53, "queue_drop_pkts"),
        (55, "queue_drop_bytes"),
    ):
        yield (*JNX_COS, col, i, q), k.Counter64(c[key][d][w])
    yield (*JNX_COS, 58, i, q), k.Counter64(int(s.gauges["occupancy"][d][w]))
    yield (*JNX_COS, 59, i, q), k.Counter64(int(s.gauges["watermark"][d][w]))
