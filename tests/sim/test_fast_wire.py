"""The fast path's SNMP side against the live one's: its rows (``fast_feeds.WIRE``) against the agent's pysnmp
rows read as the wire would, its walker against ``MapWalker``."""

from __future__ import annotations

import asyncio
import random

import pytest
from pyasn1.error import PyAsn1Error

from collector.sources.snmp.ber import TAG_COUNTER64
from collector.sources.snmp.walk import MapWalker
from spanwatch.fast_feeds import WIRE, SimClock, SnapshotWalker, varbind_value
from spanwatch.sim import scenario as scenarios
from spanwatch.sim import snapshot, snmp_mib
from spanwatch.sim.fabric import Fabric


@pytest.mark.parametrize("name, seconds", [("wave-down-reroute", 9.0), ("optical-per-wave", 12.0)])
def test_wire_rows_are_the_pysnmp_rows_decoded(name: str, seconds: float) -> None:
    path = scenarios.shipped_named(name)
    assert path is not None
    f = Fabric(scenarios.load(path))
    f.advance(seconds)  # a wave down (no optics rows) or degraded, counters well past zero
    snap = snapshot.take(f, 1_790_000_000 * 10**9, f.t)
    rows = 0
    for d, device in enumerate(f.lay.devices):
        oids, values = snmp_mib.build(snap, d, device.name)
        wire_oids, wire_values = snmp_mib.build(snap, d, device.name, WIRE)
        assert wire_oids == oids
        assert wire_values == [varbind_value(v) for v in values]
        rows += len(oids)
    assert rows > 100 * len(f.lay.devices)


@pytest.mark.parametrize(
    "kind, value",
    [("Counter32", 2**32), ("Counter64", -1), ("Integer", 2**31), ("Gauge32", -1), ("TimeTicks", -1)],
)
def test_wire_refuses_what_pysnmp_refuses(kind: str, value: int) -> None:
    with pytest.raises(PyAsn1Error):
        getattr(snmp_mib.PYSNMP, kind)(value)
    with pytest.raises(ValueError, match="out of range"):
        getattr(WIRE, kind)(value)


def test_snapshot_walker_bulk_answers_as_map_walker() -> None:
    """The fast path's GETBULK (each cursor placed once) answers what ``MapWalker`` answers, to the end of
    the MIB, from cursors inside, between and past the keys."""
    rng = random.Random(29)
    keys = sorted({(1, 3, 6, 1, rng.randrange(4), rng.randrange(50), rng.randrange(3)) for _ in range(300)})
    values = [(TAG_COUNTER64, k) for k in range(len(keys))]
    reference = MapWalker(dict(zip(keys, values, strict=True)))
    fast = SnapshotWalker(SimClock(0.0))
    fast.load((keys, values), 0.05)
    for _ in range(200):
        cursors = [
            rng.choice(keys) if rng.random() < 0.5 else (1, 3, 6, 1, rng.randrange(5)) for _ in range(3)
        ]
        reps = rng.randrange(1, 40)
        assert asyncio.run(fast.bulk(cursors, reps)) == asyncio.run(reference.bulk(cursors, reps))
    assert fast.requests == reference.requests == 200
    assert fast.clock.now == 0.05  # the poll's time, spent on its first request
