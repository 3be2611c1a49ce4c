"""A gNMI worker's ingest path fed interface names, reporting its peak memory (issue 34 point 4).

Run as ``python tests/collector/series_flood.py NAMES CAP`` in a fresh process: a ``GnmiSource`` built as
the daemon builds it (series cap ``CAP``) and a worker's store decode two rounds of two counters of the
first ``CAP / 2`` interface names (the device at its cap), then one update for each of the other names up
to ``NAMES`` (a device announcing ``NAMES`` interfaces). Prints one JSON line: the process' peak RSS
(``VmHWM``, MB), the series the store holds and the series-cap drops it counted.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pygnmi.spec.v080 import gnmi_pb2

from collector import daemon, mapping_files
from collector.clock import FakeClock
from collector.shedding import Shedder
from collector.sources.gnmi.client import make_path
from collector.store import Store, TargetLabels

BATCH = 500  # updates per notification
LEAVES = ("in-octets", "out-octets")
DEVICE = "flood"


def responses(names: range, leaves: tuple[str, ...], value: int) -> Iterator[Any]:
    """SubscribeResponses updating ``leaves`` of each interface in ``names``, ``BATCH`` updates each."""
    prefix = make_path("/interfaces")
    updates: list[Any] = []
    for i in names:
        for leaf in leaves:
            elems = [
                gnmi_pb2.PathElem(name="interface", key={"name": f"Ethernet{i}"}),
                *(gnmi_pb2.PathElem(name=name) for name in ("state", "counters", leaf)),
            ]
            val = gnmi_pb2.TypedValue(uint_val=value)
            updates.append(gnmi_pb2.Update(path=gnmi_pb2.Path(elem=elems), val=val))
        if len(updates) >= BATCH:
            yield _response(prefix, updates)
            updates = []
    if updates:
        yield _response(prefix, updates)


def _response(prefix: Any, updates: list[Any]) -> Any:
    n = gnmi_pb2.Notification(prefix=prefix, update=updates)  # no timestamp: no clock-offset warning
    return gnmi_pb2.SubscribeResponse(update=n)


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def run(names: int, cap: int, folder: Path) -> dict[str, float]:
    config_path = folder / "flood.yaml"
    config_path.write_text(
        json.dumps(
            {
                "collector": {"listen": "127.0.0.1:9", "archive": None},
                "defaults": {"max_series_per_target": cap},
                "targets": [{"name": DEVICE, "gnmi": {"address": "127.0.0.1:1", "insecure": True}}],
            }
        )
    )
    config, mappings = mapping_files.load(config_path)
    clock = FakeClock()
    store = Store(clock, rendered=False)  # a worker's store, as in ``collector.worker``
    store.set_target(DEVICE, TargetLabels(max_series=config.defaults.max_series_per_target))
    source = daemon._gnmi(config.targets[0], config, mappings, clock, Shedder())  # as the daemon builds it
    held = range(min(names, cap // len(LEAVES)))  # these fill the cap
    for value in (1, 2):  # two rounds: counters start, then advance
        for resp in responses(held, LEAVES, value):
            source.handle(store, resp)
    for resp in responses(range(held.stop, names), LEAVES[:1], 1):  # the rest: one update each
        source.handle(store, resp)
    dropped = store.value("spanwatch_series_dropped_total", (("device", DEVICE),))
    return {
        "peak_rss_mb": peak_rss_mb(),
        "series": sum(len(store.items(name)) for name in store.metrics() if name.startswith("dci_")),
        "dropped": float(dropped) if isinstance(dropped, int | float) else 0.0,
    }


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(run(int(sys.argv[1]), int(sys.argv[2]), Path(tmp))))
