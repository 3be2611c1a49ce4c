"""A small synthetic fabric for analyzer tests: readings written with the collector's real archive writer.

Two links (``l1``: a1/Ethernet1 <-> b1/Ethernet1, ``l2``: a2/Ethernet1 <-> b2/Ethernet1), one reading per
second per series. ``Episode`` injects a condition on one device's interface for ``[start, end)`` seconds
after ``T0``; ``steps_jsonl`` writes a plain step log whose steps are slowed by the episodes they overlap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from collector.exporters.archive import Archive

T0 = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)
T0_NS = int(T0.timestamp() * 1e9)
SPEED = 100e9 / 8  # a 100G interface, bytes per second
LINKS = {"l1": ("a1", "b1"), "l2": ("a2", "b2")}
DEVICE_LINK = {d: link for link, ds in LINKS.items() for d in ds}
IFACE = "Ethernet1"


@dataclass(frozen=True)
class Episode:
    """An injected condition: ``kind`` in drops, ecn, pfc, queue, ber, osnr, fcs, wave_down."""

    kind: str
    device: str
    start: int
    end: int


@dataclass
class Counter:
    total: int = 0


def _active(episodes: list[Episode], device: str, kind: str, t: int) -> bool:
    return any(e.device == device and e.kind == kind and e.start <= t < e.end for e in episodes)


def write_archive(
    root: Path,
    seconds: int,
    episodes: list[Episode],
    resets: dict[str, int] | None = None,
    every: int = 1,
) -> None:
    """Write ``seconds`` of readings for every device.

    Args:
        root: the archive directory.
        seconds: how long the run is.
        episodes: injected conditions.
        resets: device -> second at which every counter of the device restarts from 0 (a reboot).
        every: write a reading every this many seconds (counters still count every second; a watermark
            reading is the peak since the previous one).
    """
    archive = Archive(root, writer="test")
    resets = resets or {}
    lbl = (("interface", IFACE),)
    q = (("interface", IFACE), ("queue", "3"))
    pfc = (("direction", "rx"), ("interface", IFACE), ("priority", "3"))
    for device, link in DEVICE_LINK.items():
        totals = {name: Counter() for name in ("tx", "rx", "drop", "ecn", "tx_pkts", "fcs", "pfc")}
        for t in range(seconds + 1):
            if resets.get(device) == t:
                totals = {name: Counter() for name in totals}
            on = {k: _active(episodes, device, k, t - 1) for k in ("drops", "ecn", "pfc", "queue", "fcs")}
            totals["tx"].total += int(SPEED * 0.5)
            totals["rx"].total += int(SPEED * 0.5)
            totals["tx_pkts"].total += 100_000
            totals["drop"].total += 500 if on["drops"] else 0
            totals["ecn"].total += 5_000 if on["ecn"] else 0
            totals["fcs"].total += 50 if on["fcs"] else 0
            totals["pfc"].total += 200_000 if on["pfc"] else 0  # microseconds paused this second
            if t % every:
                continue
            ns = T0_NS + t * 10**9

            def add(
                metric: str, labels: tuple[tuple[str, str], ...], value: float, counter: int | None
            ) -> None:
                archive.add((ns, ns, device, "gnmi", metric, labels, link, value, counter))  # noqa: B023

            for metric, name in (
                ("dci_interface_transmit_bytes_total", "tx"),
                ("dci_interface_receive_bytes_total", "rx"),
                ("dci_interface_receive_fcs_errors_total", "fcs"),
            ):
                add(metric, lbl, float(totals[name].total), totals[name].total)
            for metric, name in (
                ("dci_queue_dropped_packets_total", "drop"),
                ("dci_queue_ecn_marked_packets_total", "ecn"),
                ("dci_queue_transmit_packets_total", "tx_pkts"),
            ):
                add(metric, q, float(totals[name].total), totals[name].total)
            add("dci_pfc_pause_duration_seconds_total", pfc, totals["pfc"].total / 1e6, None)
            # The queue reading at t is the peak over (t - every, t].
            peak = any(_active(episodes, device, "queue", t - k) for k in range(1, every + 1))
            add("dci_queue_watermark_bytes", q, 9e6 if peak else 2e4, None)
            add("dci_interface_speed_bytes_per_second", lbl, SPEED, None)
            add("dci_interface_oper_up", lbl, 0.0 if _active(episodes, device, "wave_down", t) else 1.0, None)
            ber = 5e-3 if _active(episodes, device, "ber", t) else 1e-7
            add("dci_optics_pre_fec_ber", lbl, ber, None)
            osnr = 25.0 if _active(episodes, device, "osnr", t) else 33.0
            add("dci_optics_osnr_db", lbl, osnr, None)
    archive.flush()


def config_yaml(path: Path) -> Path:
    """A collector config naming the four devices (vendor labels) and the two links (100 km)."""
    vendors = {"a1": "vendor-a", "b1": "vendor-a", "a2": "vendor-b", "b2": "vendor-b"}
    lines = ["targets:"]
    for device, vendor in vendors.items():
        lines += [
            f"  - name: {device}",
            f"    labels: {{vendor: {vendor}, site: {device[0]}}}",
            "    gnmi: {address: 127.0.0.1:9339, insecure: true}",
        ]
    lines.append("links:")
    for link, (a, b) in LINKS.items():
        lines += [
            f"  - {{name: {link}, site_a: a, site_b: b, distance_km: 100, members: "
            f"[{{device: {a}, interface: {IFACE}}}, {{device: {b}, interface: {IFACE}}}]}}"
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def step_rows(
    seconds: int, episodes: list[Episode], ranks: int = 2, step_seconds: float = 1.0, penalty: float = 0.3
) -> list[dict[str, object]]:
    """Steps back to back from ``T0``; a step overlapping a congestion episode takes ``penalty`` longer.

    Returns:
        Rows ``step``, ``rank``, ``start``, ``end`` (RFC 3339) and ``true_link`` (the slowing link or None).
    """
    rng = np.random.default_rng(5)
    rows: list[dict[str, object]] = []
    for rank in range(ranks):
        clock = 0.5
        step = 0
        while clock + step_seconds < seconds - 1:
            duration = step_seconds + float(rng.normal(0, 0.005))
            hit = [
                e
                for e in episodes
                if e.kind in ("drops", "pfc", "wave_down") and e.start < clock + duration and e.end > clock
            ]
            if hit:
                duration += penalty
            start = T0 + timedelta(seconds=clock)
            end = start + timedelta(seconds=duration)
            rows.append(
                {
                    "step": step,
                    "rank": rank,
                    "start": start.isoformat().replace("+00:00", "Z"),
                    "end": end.isoformat().replace("+00:00", "Z"),
                    "true_link": DEVICE_LINK[hit[0].device] if hit else None,
                    "penalty": penalty if hit else 0.0,
                }
            )
            clock += duration
            step += 1
    return rows


def steps_jsonl(path: Path, rows: list[dict[str, object]], bad_lines: int = 0) -> Path:
    """Write rows as a plain step log, with ``bad_lines`` malformed lines at the end."""
    keys = ("step", "rank", "start", "end")
    text = "".join(json.dumps({k: r[k] for k in keys}) + "\n" for r in rows)
    text += "".join('{"step": "x", "start": 12\n' for _ in range(bad_lines))
    path.write_text(text)
    return path
