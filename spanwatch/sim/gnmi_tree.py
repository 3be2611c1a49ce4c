"""The gNMI data of one simulated switch, built from a fabric snapshot, and path filtering.

Served paths (what ``collector/mappings/gnmi`` maps, in wire units):

- OpenConfig interfaces: ``/interfaces/interface[name]/state/counters`` (octets, packets, discards,
  errors, in-fcs-errors, last-clear), ``.../state/oper-status``, ``.../ethernet/state/counters`` (802.3x
  pause, FEC blocks), ``.../ethernet/state`` (negotiated-port-speed, pre/post-FEC BER stat containers);
- Arista flavour for PFC: ``.../ethernet/pfc/priorities/priority[index]/state/{in,out}-frames`` and
  ``.../ethernet/pfc/watchdog/tx-queues/tx-queue[index][queue-type]/state/stuck-count``;
- OpenConfig QoS: ``/qos/interfaces/interface[interface-id]/output/queues/queue[name]/state`` (transmit /
  dropped / ECN counters, max-queue-len watermark, and Cumulus' instant-queue-len), the job's class
  ingress queue ``.../input/queues/queue[name]/state`` (the same two lengths: what the receive stage
  holds), Cumulus' per switch-priority pause durations (us) and shared-buffer pool occupancy;
- platform: ``/components/component[name=OpticalChannel1/N]/optical-channel/state`` (frequency MHz, power
  dBm, bias mA, CD ps/nm, PMD ps, PDL, OSNR, ESNR, Q, CFO MHz, BER; stat containers with
  instant/min/max/avg) and ``/components/component[name=Transceiver1/N]/transceiver/state``.

A group is a prefix and its leaves; a subscription path selects whole groups under it, or the leaves of a
group that lie under it (a path deeper than a prefix).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pygnmi.spec.v080 import gnmi_pb2

from spanwatch.sim.snapshot import Snapshot
from spanwatch.sim.snmp_mib import interface_name

Elem = tuple[str, dict[str, str]]
Leaf = tuple[list[Elem], Any]


@dataclass
class Group:
    """One notification's worth: a prefix and leaves (relative paths and TypedValues)."""

    prefix: list[Elem]
    leaves: list[Leaf]


# Parsed paths and their protobuf form, by text and by the parsed list's id: a switch serves the same few
# hundred paths on every sample, and parsing and building them again was most of a notification's cost.
# The parsed lists are shared, so nothing may modify them; the id cache holds each list, so an id is never
# reused while it is a key.
_PARSED: dict[str, list[Elem]] = {}
_PROTO: dict[int, tuple[list[Elem], Any]] = {}
CACHE_LIMIT = 100_000


def _p(text: str) -> list[Elem]:
    """Elements of a path ``a/b[k=v]/c`` (parsed once; do not modify the list)."""
    parsed = _PARSED.get(text)
    if parsed is None:
        if len(_PARSED) >= CACHE_LIMIT:
            _PARSED.clear()
        parsed = _PARSED[text] = _parse(text)
    return parsed


def _parse(text: str) -> list[Elem]:
    """Elements of a path ``a/b[k=v]/c``; a key value may hold ``/`` (``name=Ethernet1/1``)."""
    parts, depth, cur = [], 0, ""
    for ch in text.strip("/"):
        depth += (ch == "[") - (ch == "]")
        if ch == "/" and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out: list[Elem] = []
    for part in parts:
        name, _, rest = part.partition("[")
        keys = dict(kv.split("=", 1) for kv in rest[:-1].split("][")) if rest else {}
        out.append((name, keys))
    return out


def _u(value: int) -> Any:
    return gnmi_pb2.TypedValue(uint_val=max(0, int(value)))


def _f(value: float) -> Any:
    return gnmi_pb2.TypedValue(double_val=float(value))


def _s(value: str) -> Any:
    return gnmi_pb2.TypedValue(string_val=value)


_STAT_PARTS = ("instant", "min", "max", "avg")
_STAT_PATHS: dict[str, list[list[Elem]]] = {}  # a stat container's four leaf paths, by its name


def _stat(name: str, s: Snapshot, key: str, d: int, w: int, scale: float = 1.0) -> list[Leaf]:
    lo, hi, avg = s.stats[key]
    values = (s.gauges[key][d][w], lo[d][w], hi[d][w], avg[d][w])
    paths = _STAT_PATHS.get(name)
    if paths is None:
        paths = _STAT_PATHS[name] = [_p(f"{name}/{part}") for part in _STAT_PARTS]
    typed = gnmi_pb2.TypedValue  # ``_f`` inline: the values are floats already (a snapshot's gauges)
    return [
        (path, typed(double_val=v * scale))
        for path, v in zip(paths, values, strict=True)
        if not math.isnan(v)  # a wave down has no signal: the leaf is absent, not a made-up 0
    ]


_PFC_PATHS: list[tuple[list[Elem], list[Elem], list[Elem]]] = []


def _pfc_paths() -> list[tuple[list[Elem], list[Elem], list[Elem]]]:
    """Per priority, the in-frames, out-frames and stuck-count leaf paths (made once)."""
    if not _PFC_PATHS:
        _PFC_PATHS.extend(
            (
                _p(f"priorities/priority[index={prio}]/state/in-frames"),
                _p(f"priorities/priority[index={prio}]/state/out-frames"),
                _p(f"watchdog/tx-queues/tx-queue[index={prio}][queue-type=UNICAST]/state/stuck-count"),
            )
            for prio in range(8)
        )
    return _PFC_PATHS


def groups(s: Snapshot, d: int, epoch_ns: int) -> list[Group]:
    """Every group of device ``d``; ``epoch_ns`` is the counters' last-clear."""
    out: list[Group] = []
    for w in range(len(s.frequency_hz[d])):
        out += _interface(s, d, w, epoch_ns) + _qos(s, d, w) + _platform(s, d, w)
    return out


def _interface(s: Snapshot, d: int, w: int, epoch_ns: int) -> list[Group]:
    c, name = s.counters, interface_name(w)
    base = f"interfaces/interface[name={name}]"
    counters = [
        (_p(leaf), _u(c[key][d][w]))
        for leaf, key in (
            ("in-octets", "in_octets"),
            ("in-pkts", "in_pkts"),
            ("out-octets", "out_octets"),
            ("out-pkts", "out_pkts"),
            ("in-discards", "in_discards"),
            ("out-discards", "out_discards"),
            ("in-errors", "in_errors"),
            ("in-fcs-errors", "in_fcs_errors"),
        )
    ]
    counters += [(_p("out-errors"), _u(0)), (_p("last-clear"), _u(epoch_ns))]
    up = s.gauges["oper_up"][d][w] > 0
    eth = [
        (_p(leaf), _u(c[key][d][w]))
        for leaf, key in (
            ("in-mac-pause-frames", "pause_rx"),
            ("out-mac-pause-frames", "pause_tx"),
            ("fec-corrected-blocks", "fec_corrected"),
            ("fec-uncorrectable-blocks", "fec_uncorrectable"),
        )
    ]
    pfc: list[Leaf] = []
    rx, tx, storms = c["pfc_rx_frames"][d][w], c["pfc_tx_frames"][d][w], c["pfc_storms"][d][w]
    for prio, (in_frames, out_frames, stuck) in enumerate(_pfc_paths()):
        ours = prio == s.queue
        pfc += [(in_frames, _u(rx * ours)), (out_frames, _u(tx * ours)), (stuck, _u(storms * ours))]
    return [
        Group(_p(f"{base}/state/counters"), counters),
        Group(_p(f"{base}/state"), [(_p("oper-status"), _s("UP" if up else "DOWN"))]),
        Group(_p(f"{base}/ethernet/state/counters"), eth),
        Group(
            _p(f"{base}/ethernet/state"),
            [
                (_p("negotiated-port-speed"), _s(f"SPEED_{round(s.speed_gbps[d])}GB")),
                *_stat("pre-fec-ber", s, "pre_fec_ber", d, w),
                *_stat("post-fec-ber", s, "post_fec_ber", d, w),
            ],
        ),
        Group(_p(f"{base}/ethernet/pfc"), pfc),
    ]


def _qos(s: Snapshot, d: int, w: int) -> list[Group]:
    c, g, name = s.counters, s.gauges, interface_name(w)
    base = f"qos/interfaces/interface[interface-id={name}]"
    queue = [
        (_p(leaf), _u(c[key][d][w]))
        for leaf, key in (
            ("transmit-pkts", "queue_tx_pkts"),
            ("transmit-octets", "queue_tx_bytes"),
            ("dropped-pkts", "queue_drop_pkts"),
            ("dropped-octets", "queue_drop_bytes"),
            ("ecn-marked-pkts", "queue_ecn_pkts"),
        )
    ]
    queue += [
        (_p("max-queue-len"), _u(int(g["watermark"][d][w]))),
        (_p("instant-queue-len"), _u(int(g["occupancy"][d][w]))),
    ]
    background = [
        (_p(leaf), _u(c[key][d][w]))
        for leaf, key in (
            ("transmit-pkts", "bg_tx_pkts"),
            ("transmit-octets", "bg_tx_bytes"),
            ("dropped-pkts", "bg_drop_pkts"),
            ("dropped-octets", "bg_drop_bytes"),
            ("ecn-marked-pkts", "bg_ecn_pkts"),
        )
    ]
    background += [
        (_p("max-queue-len"), _u(int(g["bg_watermark"][d][w]))),
        (_p("instant-queue-len"), _u(int(g["bg_occupancy"][d][w]))),
    ]
    ingress = [
        (_p("max-queue-len"), _u(int(g["ingress_watermark"][d][w]))),
        (_p("instant-queue-len"), _u(int(g["ingress_occupancy"][d][w]))),
    ]
    occupancy, watermark = s.pool[d]
    return [
        Group(_p(f"{base}/output/queues/queue[name={s.queue}]/state"), queue),
        Group(_p(f"{base}/input/queues/queue[name={s.queue}]/state"), ingress),
        Group(_p(f"{base}/output/queues/queue[name={s.other_queue}]/state"), background),
        Group(
            _p(f"{base}/switch-priority[priority={s.queue}]/state"),
            [
                (_p("in-pause-duration"), _u(c["pfc_rx_pause_us"][d][w])),
                (_p("out-pause-duration"), _u(c["pfc_tx_pause_us"][d][w])),
            ],
        ),
        Group(
            _p(f"{base}/output/pools/pool[id=0]/state/shared-buffer/data"),
            [
                (_p("instant-occupancy"), _u(occupancy)),
                (_p("max-occupancy-since-last-sample"), _u(watermark)),
            ],
        ),
    ]


def _platform(s: Snapshot, d: int, w: int) -> list[Group]:
    g = s.gauges
    och = [(_p("frequency"), _u(round(s.frequency_hz[d][w] / 1e6)))]
    for leaf, key, scale in (
        ("input-power", "rx_power", 1.0),
        ("output-power", "tx_power", 1.0),
        ("laser-bias-current", "bias", 1e3),
        ("chromatic-dispersion", "cd", 1.0),
        ("polarization-mode-dispersion", "pmd", 1.0),
        ("polarization-dependent-loss", "pdl", 1.0),
        ("osnr", "osnr", 1.0),
        ("esnr", "esnr", 1.0),
        ("q-value", "q", 1.0),
        ("carrier-frequency-offset", "cfo", 1e-6),
        ("pre-fec-ber", "pre_fec_ber", 1.0),
        ("post-fec-ber", "post_fec_ber", 1.0),
    ):
        och += _stat(leaf, s, key, d, w, scale)
    xcvr = (
        _stat("input-power", s, "rx_power", d, w)
        + _stat("output-power", s, "tx_power", d, w)
        + _stat("laser-bias-current", s, "bias", d, w, 1e3)
        + [
            (_p(f"supply-voltage/{part}"), _f(3.3 + 0.001 * g["temperature"][d][w] * (i - 1)))
            for i, part in enumerate(("instant", "min", "max", "avg"))
        ]
    )
    return [
        Group(_p(f"components/component[name=OpticalChannel1/{w + 1}]/optical-channel/state"), och),
        Group(_p(f"components/component[name=Transceiver1/{w + 1}]/transceiver/state"), xcvr),
    ]


# -- paths and filtering -------------------------------------------------------------------------------
def elems(prefix: Any, path: Any) -> list[Elem]:
    """A request path (prefix joined, module prefixes stripped) as elements."""
    out: list[Elem] = []
    for p in (prefix, path):
        if p is None:
            continue
        out += [(e.name.split(":")[-1], dict(e.key)) for e in p.elem]
    return out


def _match(want: list[Elem], have: list[Elem]) -> bool:
    """Whether ``have`` matches ``want`` element by element over their common length."""
    for (wn, wk), (hn, hk) in zip(want, have, strict=False):
        if wn not in (hn, "*", "..."):
            return False
        if any(v != "*" and hk.get(k, v) != v for k, v in wk.items()):
            return False
    return True


Plan = list[tuple[int, bool]]


def plan(all_groups: list[Group], want: list[Elem]) -> Plan:
    """Which groups the path ``want`` reaches, by index, and whether whole (else some of their leaves).

    It depends on the groups' prefixes only, which are the same from one snapshot to the next.
    """
    return [(i, len(want) <= len(g.prefix)) for i, g in enumerate(all_groups) if _match(want, g.prefix)]


def planned(all_groups: list[Group], want: list[Elem], chosen: Plan) -> list[Group]:
    """The groups (or parts of groups) under ``want`` that ``chosen`` (its ``plan``) names."""
    out = []
    for i, whole in chosen:
        g = all_groups[i]
        if whole:
            out.append(g)
            continue
        rest = want[len(g.prefix) :]
        leaves = [leaf for leaf in g.leaves if _match(rest, leaf[0])]
        if leaves:
            out.append(Group(g.prefix, leaves))
    return out


def select(all_groups: list[Group], want: list[Elem]) -> list[Group]:
    """The groups (or parts of groups) under the path ``want`` (empty: everything)."""
    return planned(all_groups, want, plan(all_groups, want))


def _path(e: list[Elem]) -> Any:
    cached = _PROTO.get(id(e))
    if cached is None or cached[0] is not e:
        if len(_PROTO) >= CACHE_LIMIT:
            _PROTO.clear()
        cached = _PROTO[id(e)] = (e, gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=n, key=k) for n, k in e]))
    return cached[1]


def notification(g: Group, time_ns: int) -> Any:
    """A ``gnmi_pb2.Notification`` of one group."""
    return gnmi_pb2.Notification(
        timestamp=time_ns,
        prefix=_path(g.prefix),
        update=[gnmi_pb2.Update(path=_path(rel), val=val) for rel, val in g.leaves],
    )
