"""What the fast recording path (``spanwatch.fast``) puts where the sockets were.

Each piece hands the collector's own code what a socket would have delivered, at the time it would have:

- ``SimClock``: the collector's ``Clock`` on simulated wall time (set by the recorder, never waited on);
- ``SnapshotWalker``: the collector's ``MapWalker`` over a simulated switch's OID table (``snmp_mib``),
  so ``SnmpSource`` walks, maps, unwraps Counter32 and reads sysUpTime exactly as over UDP; the first
  request of a poll moves the clock on by the poll's duration, as the round trips would have;
- ``SimStream``: one gNMI Subscribe stream of one switch: the request the collector would send
  (``subscribe_request``) served by the switch's own ``SimTarget`` subscriptions, sampled on the
  snapshots' clock as the live target samples;
- ``Timing``: the live path's delays, measured on its recordings (2 cores, two demos at once): how far
  the model runs behind the wall clock when it publishes a snapshot, how long an SNMP poll takes, how late
  a gNMI notification is ingested, and what loopback adds to a probe's round trip.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from pysnmp.proto.rfc1902 import Counter32, Counter64, Gauge32, Integer, OctetString, TimeTicks

from collector.config import GnmiConfig
from collector.sources.gnmi.client import subscribe_request
from collector.sources.gnmi.paths import SubscriptionSet, SubscriptionSpec
from collector.sources.snmp.ber import (
    TAG_COUNTER32,
    TAG_COUNTER64,
    TAG_END_OF_MIB,
    TAG_GAUGE32,
    TAG_INTEGER,
    TAG_OCTETS,
    TAG_TIMETICKS,
    Oid,
    VarBind,
)
from collector.sources.snmp.walk import MapWalker
from spanwatch.sim import gnmi_tree as tree
from spanwatch.sim.gnmi_target import MIN_INTERVAL_S, SimTarget, Subscription
from spanwatch.sim.snapshot import Snapshot
from spanwatch.sim.snmp_agent import Table
from spanwatch.sim.snmp_mib import Kinds

# pysnmp's types as the SNMP wire tags the collector's decoder yields (``collector.sources.snmp.ber``).
_TAGS = (
    (Counter64, TAG_COUNTER64),
    (Counter32, TAG_COUNTER32),
    (Gauge32, TAG_GAUGE32),
    (TimeTicks, TAG_TIMETICKS),
    (Integer, TAG_INTEGER),
    (OctetString, TAG_OCTETS),
)


class SimClock:
    """The collector's ``Clock`` on simulated time: the recorder sets it; nothing ever waits on it."""

    def __init__(self, epoch_s: float) -> None:
        self.epoch_s = epoch_s
        self.now = 0.0  # seconds since the fabric started, on the wall (switches') clock

    def set(self, now: float) -> None:
        self.now = now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def time_ns(self) -> int:
        return round((self.epoch_s + self.now) * 1e9)

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        # A poll's deadline timer: the walker answers at once, so the poll always wins the race.
        await asyncio.get_running_loop().create_future()


def varbind_value(value: object) -> tuple[int, object]:
    """A pysnmp value as ``(tag, value)``, the way the collector's BER decoder returns it (what ``WIRE``
    makes directly; tests hold the two to each other)."""
    for kind, tag in _TAGS:
        if isinstance(value, kind):
            return tag, bytes(value.asOctets()) if tag == TAG_OCTETS else int(value)
    raise TypeError(f"no SNMP tag for {type(value).__name__}")


def _wire(tag: int, low: int, high: int) -> Callable[[int], tuple[int, int]]:
    """A constructor of ``(tag, value)`` that refuses what pysnmp's type would (its value range)."""

    def make(value: int) -> tuple[int, int]:
        v = int(value)
        if not low <= v <= high:
            raise ValueError(f"SNMP value {v} out of range for tag {tag:#x} [{low}, {high}]")
        return tag, v

    return make


def _octets(text: str) -> tuple[int, bytes]:
    return TAG_OCTETS, text.encode("iso-8859-1")  # pysnmp's OctetString encoding


# ``snmp_mib.build``'s rows as the collector's BER decoder yields them, without building pysnmp objects
# (``varbind_value`` of each of those is the same pair; this skips making and reading them).
WIRE = Kinds(
    Counter32=_wire(TAG_COUNTER32, 0, 2**32 - 1),
    Counter64=_wire(TAG_COUNTER64, 0, 2**64 - 1),
    Gauge32=_wire(TAG_GAUGE32, 0, 2**32 - 1),
    Integer=_wire(TAG_INTEGER, -(2**31), 2**31 - 1),
    OctetString=_octets,
    TimeTicks=_wire(TAG_TIMETICKS, 0, 2**32 - 1),
)


class SnapshotWalker(MapWalker):
    """``MapWalker`` over a switch's current table; the first request of a poll takes the poll's time."""

    def __init__(self, clock: SimClock) -> None:
        super().__init__({})
        self.clock = clock
        self._delay = 0.0

    def load(self, table: Table, poll_seconds: float) -> None:
        """Answer from ``table`` (sorted, as ``snmp_mib.build`` returns it, values made with ``WIRE``) during
        the next poll."""
        oids, values = table
        self.keys = list(oids)
        self.data = dict(zip(oids, values, strict=True))
        self._delay = poll_seconds

    def _spend(self) -> None:
        if self._delay:
            self.clock.advance(self._delay)
            self._delay = 0.0

    async def get(self, oids: Sequence[Oid]) -> list[VarBind]:
        self._spend()
        return await super().get(oids)

    async def bulk(self, oids: Sequence[Oid], max_repetitions: int) -> list[VarBind]:
        """``MapWalker.bulk``'s answer, finding each cursor's place once: the next OID after a key is the
        next key (``MapWalker`` searches for it again at every repetition)."""
        self._spend()
        self.requests += 1
        keys, data, end = self.keys, self.data, len(self.keys)
        cursors = list(oids)
        places = [bisect.bisect_right(keys, cur) for cur in cursors]
        out: list[VarBind] = []
        for _ in range(max_repetitions):
            for i, pos in enumerate(places):
                if pos >= end:
                    out.append((cursors[i], TAG_END_OF_MIB, None))
                    continue
                nxt = cursors[i] = keys[pos]
                places[i] = pos + 1
                out.append((nxt, *data[nxt]))
        return out


class SimStream:
    """One Subscribe stream (one prefix target) of one switch, served by its ``SimTarget``."""

    def __init__(
        self,
        target: SimTarget,
        holder: SnapshotHolder,
        cfg: GnmiConfig,
        prefix: str | None,
        subs: list[SubscriptionSpec],
        connect_s: float,
        heartbeat_s: float,
        split_share: float = 0.0,
    ) -> None:
        self.target = target
        self.holder = holder
        request = subscribe_request(  # as ``GnmiSource._stream`` asks
            subs,
            mode="stream",
            sample_interval_s=cfg.sample_interval,
            heartbeat_s=heartbeat_s,
            encoding=cfg.encoding,
            target=prefix,
        )
        sl = request.subscribe
        # As ``SimTarget.Subscribe`` reads the request.
        self.subs = [
            Subscription(
                tree.elems(sl.prefix, s.path), s.mode, max(MIN_INTERVAL_S, s.sample_interval / 1e9 or 1.0)
            )
            for s in sl.subscription
        ]
        self.connect_s = connect_s
        self.started = False
        self.split_share = split_share
        self.late: list[Subscription] = []

    def sample(self, model_s: float, split: float = 1.0) -> list[object]:
        """The responses the stream sends on the snapshot of ``model_s`` (``SimTarget._sim_stream``).

        Args:
            model_s: the snapshot's model time.
            split: a uniform draw: below ``split_share``, this round's subscriptions after the first are
                sent on the next snapshot.
        """
        if model_s < self.connect_s:
            return []
        if not self.started:
            self.started = True
            for s in self.subs:
                s.due = model_s
        out: list[object] = []
        for s in self.late:  # the rest of the last round, read from this snapshot
            out += self.target._due(s, skip=False)
        self.late = []
        due = [s for s in self.subs if model_s >= s.due]
        for s in due:
            s.due = max(s.due + s.interval_s, model_s)
        if len(due) > 1 and split < self.split_share:
            # Live, the model may publish a snapshot while the target sends a round: the subscriptions
            # after the first then read the newer one.
            due, self.late = due[:1], due[1:]
        for s in due:
            out += self.target._due(s, skip=False)
        return out


class SnapshotHolder:
    """The latest published snapshot (what the live fabric's ``snap`` attribute is)."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    def __call__(self) -> Snapshot:
        return self.snap


def streams_of(sets: Sequence[SubscriptionSet]) -> dict[str | None, list[SubscriptionSpec]]:
    """The subscription sets grouped by prefix target: one stream each (``GnmiSource.run``)."""
    groups: dict[str | None, list[SubscriptionSpec]] = {}
    for s in sets:
        groups.setdefault(s.target, []).extend(s.subscriptions)
    return groups


@dataclass(frozen=True)
class Timing:
    """The live path's delays (seconds), as measured on its recordings; each draw uses the run's rng.

    Attributes:
        snapshot_s: the model publishes a snapshot when this much model time has passed since the last...
        snapshot_slack_s: ...plus up to this much more (the loop turns in 10-15 ms chunks).
        lag_s / lag_mean_s: the model runs behind the wall clock by at least ``lag_s``, ``lag_mean_s`` more
            on average (exponential) when a snapshot is published.
        start_s / start_spread_s: the collector starts this long after the fabric (config load, apply).
        probes_after_s: the link probes start this much later (``Probes.apply`` runs after the targets).
        tail_s: the fabric and the collector run this long past the scenario's duration (the demo counts
            its duration from after its set-up, then stops the collector, then the fabric).
        connect_spread_s / stream_gap_s: the gNMI streams connect within ``connect_spread_s`` after the
            collector starts, each device's first stream at about the same time as every other device's
            (they share the first snapshot, so their samples share timestamps), its second one
            ``stream_gap_s`` later (one snapshot on).
        split_share: the share of rounds whose subscriptions after the first read the next snapshot (the
            live model published one meanwhile: the duplicate queue readings of two sets 0.1-0.3 s apart).
        deliver_s / deliver_spread_s: a notification reaches the store this long after publication.
        poll_s / poll_mean_s: an SNMP poll takes at least ``poll_s``, ``poll_mean_s`` more on average.
        loopback_s / loopback_mean_s: what loopback adds to a probe's round trip, least and mean extra.
    """

    snapshot_s: float = 0.1
    snapshot_slack_s: float = 0.03
    lag_s: float = 0.015
    lag_mean_s: float = 0.045
    start_s: float = 0.1
    start_spread_s: float = 0.08
    probes_after_s: float = 0.15
    tail_s: float = 0.6
    connect_spread_s: float = 0.05
    stream_gap_s: float = 0.1
    split_share: float = 0.07
    deliver_s: float = 0.015
    deliver_spread_s: float = 0.015
    poll_s: float = 0.045
    poll_mean_s: float = 0.05
    loopback_s: float = 6e-6
    loopback_mean_s: float = 45e-6

    def lag(self, rng: np.random.Generator) -> float:
        return self.lag_s + float(rng.exponential(self.lag_mean_s))

    def deliver(self, rng: np.random.Generator) -> float:
        return self.deliver_s + float(rng.uniform(0.0, self.deliver_spread_s))

    def poll(self, rng: np.random.Generator) -> float:
        return self.poll_s + float(rng.exponential(self.poll_mean_s))

    def round_trips(self, rng: np.random.Generator, fibre_rtt_s: float, count: int) -> list[float]:
        return [
            fibre_rtt_s + self.loopback_s + float(x) for x in rng.exponential(self.loopback_mean_s, count)
        ]
