"""Every archive row and exported value the gNMI ingest path makes of the recorded real-device streams and
of a synthetic counter stream, compared with golden files written by the code before the decode path was
made faster (issue 33): a faster path must produce the same series, values and rows, byte for byte.

Each stream goes through ``GnmiSource.handle`` (one response at a time), then twice more, as batches
through ``GnmiSource.ingest_batch`` (the daemon's path, which folds a batch that is an interval or more
behind: the recordings' timestamps are years old, so the replays fold). Regenerate with
``--update-golden`` only for an intended change, and review the diff.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pygnmi.spec.v080 import gnmi_pb2

from collector.config import GnmiConfig
from collector.exporters.prometheus import render
from collector.mappings import gnmi_subscription_names
from collector.sources.gnmi.paths import load_set
from collector.sources.gnmi.source import GnmiSource
from collector.store import Store
from tests.integration.gnmi_support import load_recording, recording, recording_cases

GOLDEN = Path(__file__).parents[1] / "golden" / "gnmi-rows"
# how late the replay ran is the clock's business, not the decoder's
TIMING_FAMILIES = ("spanwatch_ingest_lag_seconds", "spanwatch_ingest_backlog_seconds")
START_NS = 1_764_000_000 * 10**9


class ManualClock:
    """Time that moves only when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time_ns(self) -> int:
        return START_NS + int(self.now * 1e9)

    async def sleep(self, seconds: float) -> None:  # pragma: no cover - nothing sleeps here
        raise AssertionError("no sleeping in a synthetic replay")


class Rows(list[tuple[Any, ...]]):
    """The archive sink: every row, in order."""

    def add(self, row: tuple[Any, ...]) -> None:
        self.append(row)


def synthetic() -> list[Any]:
    """Counters of two interfaces in both shapes devices send (the interface in the prefix, one leaf per
    update; and a subtree prefix), rising, then one cleared (``last-clear`` changes, the counter falls),
    then a gauge and a string leaf."""
    leaves = ("in-octets", "out-octets", "in-pkts", "in-errors", "carrier-transitions")
    out = []
    for r in range(1, 5):
        ts = START_NS + r * 10**9
        for i, name in enumerate(("Ethernet1/1", "Ethernet1/2")):
            n = gnmi_pb2.Notification(timestamp=ts)
            n.prefix.elem.add(name="interfaces")
            n.prefix.elem.add(name="interface").key["name"] = name
            n.prefix.elem.add(name="state")
            n.prefix.elem.add(name="counters")
            cleared = i == 1 and r >= 3
            for j, leaf in enumerate(leaves):
                u = n.update.add()
                u.path.elem.add(name=leaf)
                u.val.uint_val = (r - 2 if cleared else r) * (1000 + 31 * i + j)
            u = n.update.add()
            u.path.elem.add(name="last-clear")
            u.val.uint_val = 99 if cleared else 7
            out.append(gnmi_pb2.SubscribeResponse(update=n))
        n = gnmi_pb2.Notification(timestamp=ts)
        n.prefix.elem.add(name="interfaces")
        for name in ("Ethernet2/1", "Ethernet2/2"):
            for leaf, value in (("in-octets", 500 * r), ("out-octets", 700 * r)):
                u = n.update.add()
                for elem in ("interface", "state", "counters", leaf):
                    e = u.path.elem.add(name=elem)
                    if elem == "interface":
                        e.key["name"] = name
                u.val.uint_val = value
            u = n.update.add()
            for elem in ("interface", "state", "oper-status"):
                e = u.path.elem.add(name=elem)
                if elem == "interface":
                    e.key["name"] = name
            u.val.string_val = "UP" if r % 2 else "DOWN"
            u = n.update.add()
            for elem in ("interface", "state", "mtu"):
                e = u.path.elem.add(name=elem)
                if elem == "interface":
                    e.key["name"] = name
            u.val.uint_val = 9000 + r
        out.append(gnmi_pb2.SubscribeResponse(update=n))
    return out


def replay(responses: list[Any]) -> str:
    """The rows and the final exposition of ``responses`` through the source (module docstring)."""
    clock = ManualClock()
    rows = Rows()
    store = Store(clock=clock, archive=rows)  # type: ignore[arg-type]
    names = sorted(gnmi_subscription_names())
    cfg = GnmiConfig.model_validate(
        {"address": "127.0.0.1:1", "insecure": True, "sample_interval": "1s", "subscriptions": names}
    )
    source = GnmiSource("replay", cfg, sets=[load_set(n) for n in names], clock=clock)
    for resp in responses:
        source.handle(store, resp)
        clock.now += 0.01
    for _ in range(2):
        clock.now += 1.0
        items = [(resp.SerializeToString(), clock.monotonic(), clock.time_ns()) for resp in responses]
        clock.now += 0.05
        source.ingest_batch(store, items)
    exported = "".join(
        line + "\n" for line in render(store).splitlines() if not any(f in line for f in TIMING_FAMILIES)
    )
    return "".join(repr(row) + "\n" for row in rows) + exported


def check(name: str, text: str, update_golden: bool) -> None:
    golden = GOLDEN / f"{name}.txt"
    if update_golden:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.is_file(), f"no golden file {golden}; run pytest --update-golden once and review it"
    assert text == golden.read_text()


@pytest.mark.parametrize("case", recording_cases() or ["(no recordings)"])
def test_recorded_stream_rows_unchanged(case: str, update_golden: bool) -> None:
    check(case, replay(load_recording(recording(case))), update_golden)


def test_synthetic_counter_rows_unchanged(update_golden: bool) -> None:
    text = replay(synthetic())
    assert "dci_interface_receive_bytes_total" in text  # the stream maps: the comparison means something
    check("synthetic", text, update_golden)
