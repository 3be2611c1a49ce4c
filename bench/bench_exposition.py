"""Exposition benchmark: our ``render`` against prometheus-client's stock classes on the same series.

Builds ``--series`` series (100k by default) with realistic label sets (device, site, vendor, interface,
queue, lane) in a ``Store`` and, separately, in stock ``Gauge``/``Counter`` objects of their own
``CollectorRegistry``; times ``--renders`` renders of each in ``--repeats`` repetitions with
``time.process_time`` and prints the median milliseconds per render and the ratio. Memory per series set is
measured in fresh subprocesses (tracemalloc, and the RSS delta via psutil) so one build does not skew the
other.

Run: ``.venv/bin/python bench/bench_exposition.py`` (add ``--series 10000`` for a quick look).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics
from prometheus_client.exposition import generate_latest

from collector import model
from collector.contracts.catalog import CATALOG
from collector.exporters.prometheus import render
from collector.store import Store, TargetLabels

INTERFACE_METRICS = [name for name in CATALOG if name.startswith("dci_interface_") and "pause" not in name]
QUEUE_METRICS = [name for name in CATALOG if name.startswith("dci_queue_")]
OPTICS_METRICS = [
    "dci_optics_rx_power_dbm",
    "dci_optics_tx_power_dbm",
    "dci_optics_laser_bias_current_amperes",
]

Row = tuple[str, str, tuple[tuple[str, str], ...], int | float]
"""(metric, device, series labels, value)."""


def device_labels(d: int) -> tuple[tuple[str, str], ...]:
    """The static labels of device ``d``: a site, a vendor, a model."""
    vendors = (("arista", "7280R3"), ("juniper", "PTX10001"), ("sonic", "SN4700"), ("cisco", "8201"))
    vendor, hw = vendors[d % len(vendors)]
    return (("site", f"site-{'abcdefgh'[d % 8]}"), ("vendor", vendor), ("model", hw))


def rows(n: int) -> Iterator[Row]:
    """``n`` series: per device and interface the interface, queue and per-lane optics metrics."""
    made, d = 0, 0
    while True:
        device = f"dci{d // 8 + 1}.site-{'abcdefgh'[d % 8]}"
        for port in range(1, 65):
            interface = f"Ethernet{port // 17 + 1}/{port % 17 + 1}"
            for metric in INTERFACE_METRICS:
                yield metric, device, model.labels(interface=interface), _value(metric, made)
                made += 1
                if made == n:
                    return
            for metric in QUEUE_METRICS:
                for queue in range(8):
                    yield metric, device, model.labels(interface=interface, queue=queue), _value(metric, made)
                    made += 1
                    if made == n:
                        return
            for metric in OPTICS_METRICS:
                for lane in range(1, 5):
                    yield metric, device, model.labels(interface=interface, lane=lane), -2.5 - made % 7 / 10
                    made += 1
                    if made == n:
                        return
        d += 1


def _value(metric: str, i: int) -> int | float:
    # Counters are large exact integers (an 800G port passes 2^53 bytes within a day); gauges are floats.
    return 9_007_199_254_740_993 + i * 7919 if CATALOG[metric].is_counter else 1234.5 + i % 97


def build_ours(n: int) -> Store:
    """A store holding the ``n`` series, ingested the way the sources do it."""
    store = Store()
    seen: set[str] = set()
    for metric, device, lbls, value in rows(n):
        if device not in seen:
            seen.add(device)
            store.set_target(device, TargetLabels(static=device_labels(int(device[3:].split(".")[0]))))
        if isinstance(value, int):
            sample = model.counter(metric, lbls, value)
        else:
            sample = model.gauge(metric, lbls, value)
        store.ingest(device, "snmp", [sample], 0)
    return store


def build_client(n: int) -> CollectorRegistry:
    """A registry of stock prometheus-client ``Counter``/``Gauge`` objects holding the same series."""
    disable_created_metrics()  # fairer: otherwise every counter also renders a ``_created`` line
    registry = CollectorRegistry()
    metrics: dict[str, Counter | Gauge] = {}
    for metric, device, lbls, value in rows(n):
        static = device_labels(int(device[3:].split(".")[0]))
        names = ("device", *(k for k, _ in static), *(k for k, _ in lbls))
        values = (device, *(v for _, v in static), *(v for _, v in lbls))
        key = f"{metric}/{len(names)}"
        m = metrics.get(key)
        if m is None:
            spec = CATALOG[metric]
            cls = Counter if spec.is_counter else Gauge
            m = metrics[key] = cls(metric, spec.help, names, registry=registry)
        child = m.labels(*values)
        if isinstance(m, Counter):
            child.inc(value)
        else:
            child.set(value)
    return registry


def time_renders(fn: Callable[[], object], renders: int, repeats: int) -> float:
    """Median CPU milliseconds per call of ``fn`` over ``repeats`` repetitions of ``renders`` calls."""
    results = []
    for _ in range(repeats):
        gc.collect()
        start = time.process_time()
        for _ in range(renders):
            fn()
        results.append((time.process_time() - start) / renders * 1000)
    return statistics.median(results)


def measure_memory(spec: str, n: int) -> None:
    """(In a subprocess) print the bytes that building ``n`` series of ``kind:method`` took.

    ``method`` is ``traced`` (tracemalloc: Python allocations only) or ``rss`` (resident set growth,
    without tracemalloc's own overhead).
    """
    kind, method = spec.split(":")
    build = build_ours if kind == "ours" else build_client
    list(rows(10))  # warm imports and caches outside the measurement
    gc.collect()
    rss0 = psutil.Process().memory_info().rss
    if method == "traced":
        tracemalloc.start()
    held = build(n)
    gc.collect()
    if method == "traced":
        print(tracemalloc.get_traced_memory()[0])
    else:
        print(psutil.Process().memory_info().rss - rss0)
    del held


def memory(kind: str, method: str, n: int) -> float:
    """MiB per 100k series of ``kind`` by ``method``, measured in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, __file__, "--memory", f"{kind}:{method}", "--series", str(n)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return int(out) * 100_000 / n / 2**20


def main() -> None:
    """Parse arguments, run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=100_000)
    parser.add_argument("--renders", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory:
        measure_memory(args.memory, args.series)
        return
    store, registry = build_ours(args.series), build_client(args.series)
    ours_text, client_text = render(store), generate_latest(registry)
    print(
        f"series: {args.series}  output: ours {len(ours_text) / 2**20:.1f} MiB, "
        f"prometheus-client {len(client_text) / 2**20:.1f} MiB"
    )
    ours = time_renders(lambda: render(store).encode(), args.renders, args.repeats)
    client = time_renders(lambda: generate_latest(registry), args.renders, args.repeats)
    print(
        f"render ms (median of {args.repeats} x {args.renders}): ours {ours:.1f}, "
        f"prometheus-client {client:.1f}, ratio {client / ours:.1f}x"
    )
    for kind in ("ours", "client"):
        traced, rss = memory(kind, "traced", args.series), memory(kind, "rss", args.series)
        print(f"memory per 100k series, {kind}: tracemalloc {traced:.1f} MiB, RSS delta {rss:.1f} MiB")


if __name__ == "__main__":
    main()
