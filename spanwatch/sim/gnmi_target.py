"""The gNMI target of one simulated switch, on the shared ``GnmiServer`` base (``gnmi_server.py``).

Capabilities lists the models served; Get answers the requested paths from the latest snapshot;
Subscribe serves ONCE, POLL and STREAM, with per-subscription SAMPLE (``sample_interval``, default 1 s,
TARGET_DEFINED treated as SAMPLE) and ON_CHANGE (sent when a leaf's value changes, checked every 100 ms),
``updates_only`` honoured, and a ``sync_response`` after the first complete round.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pygnmi.spec.v080 import gnmi_pb2

from spanwatch.sim import gnmi_tree as tree
from spanwatch.sim.gnmi_server import GNMI_VERSION, GnmiServer
from spanwatch.sim.snapshot import Snapshot

MODELS = (
    ("openconfig-interfaces", "OpenConfig", "3.8.1"),
    ("openconfig-if-ethernet", "OpenConfig", "2.18.0"),
    ("openconfig-qos", "OpenConfig", "2.2.0"),
    ("openconfig-platform", "OpenConfig", "0.32.0"),
    ("openconfig-platform-transceiver", "OpenConfig", "1.0.0"),
    ("openconfig-terminal-device", "OpenConfig", "1.12.0"),
    ("arista-intf-augments", "Arista Networks", "EOS-4.36.1F"),
)
ON_CHANGE_CHECK_S = 0.1
MIN_INTERVAL_S = 0.1
PLAN_LIMIT = 1000


class Subscription:
    """One subscription of a STREAM: its path, mode and next due time."""

    def __init__(self, want: list[tree.Elem], mode: int, interval_s: float) -> None:
        self.want = want
        self.on_change = mode == gnmi_pb2.ON_CHANGE
        self.interval_s = ON_CHANGE_CHECK_S if self.on_change else interval_s
        self.due = 0.0
        self.last: dict[bytes, bytes] = {}


class SimTarget(GnmiServer):
    """A simulated switch's gNMI target.

    Streams sample on the wall clock, or with ``published`` on the data's own clock: a switch samples on
    its own clock, so a model that fell behind the wall clock and catches up still gives one sample per
    interval of its time, never a gap where the wall clock skipped ahead.

    Args:
        snapshot: returns the latest fabric snapshot.
        device: the device index (the fabric layout's).
        epoch_ns: the counters' last-clear (fabric start).
        published: waits for the next snapshot.
    """

    def __init__(
        self,
        snapshot: Callable[[], Snapshot],
        device: int,
        epoch_ns: int,
        published: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.device = device
        self.epoch_ns = epoch_ns
        self.published = published
        self._cache: tuple[Snapshot | None, list[tree.Group]] = (None, [])
        # Each path's ``tree.plan`` (by the path list's id, the list held so the id stays its own), valid
        # while the groups' prefixes stay the same (they do from one snapshot to the next).
        self._plans: dict[int, tuple[list[tree.Elem], tree.Plan]] = {}
        self._prefixes: list[list[tree.Elem]] = []
        self._planned_for: list[tree.Group] | None = None

    def groups(self) -> tuple[Snapshot, list[tree.Group]]:
        """The latest snapshot and its groups (built once per snapshot)."""
        snap = self.snapshot()
        if self._cache[0] is not snap:
            self._cache = (snap, tree.groups(snap, self.device, self.epoch_ns))
        return snap, self._cache[1]

    def _plan(self, every: list[tree.Group], want: list[tree.Elem]) -> tree.Plan:
        if every is not self._planned_for:  # new groups (a new snapshot): same prefixes, same plans?
            self._planned_for = every
            prefixes = [g.prefix for g in every]
            if prefixes != self._prefixes:  # (the same objects, usually: compared by identity first)
                self._plans.clear()
                self._prefixes = prefixes
        known = self._plans.get(id(want))
        if known is not None and known[0] is want:
            return known[1]
        if len(self._plans) >= PLAN_LIMIT:  # one-off paths (Get requests) must not pile up
            self._plans.clear()
        chosen = tree.plan(every, want)
        self._plans[id(want)] = (want, chosen)
        return chosen

    def current(self) -> tuple[int, list[tree.Group]]:
        """The time of the data served now (ns) and its groups (another data source overrides this)."""
        snap, every = self.groups()
        return snap.time_ns, every

    def select(self, wants: list[list[tree.Elem]]) -> tuple[int, list[tree.Group]]:
        """Groups under any of ``wants`` (each group once), with the data's time."""
        time_ns, every = self.current()
        seen: set[int] = set()
        out: list[tree.Group] = []
        for want in wants:
            for g in tree.planned(every, want, self._plan(every, want)):
                key = id(g)
                if key not in seen:
                    seen.add(key)
                    out.append(g)
        return time_ns, out

    def notifications(self) -> list[Any]:
        """Every group as a ``SubscribeResponse`` (the base class's ONCE/POLL rounds use this)."""
        ts, gs = self.select([[]])
        return [gnmi_pb2.SubscribeResponse(update=tree.notification(g, ts)) for g in gs]

    async def Capabilities(self, request: Any, context: Any) -> Any:
        """The models and encodings served."""
        return gnmi_pb2.CapabilityResponse(
            supported_models=[gnmi_pb2.ModelData(name=n, organization=o, version=v) for n, o, v in MODELS],
            supported_encodings=[gnmi_pb2.JSON, gnmi_pb2.JSON_IETF, gnmi_pb2.PROTO],
            gNMI_version=GNMI_VERSION,
        )

    async def Get(self, request: Any, context: Any) -> Any:
        """The requested paths (everything when none is given)."""
        wants = [tree.elems(request.prefix, p) for p in request.path] or [[]]
        ts, gs = self.select(wants)
        return gnmi_pb2.GetResponse(notification=[tree.notification(g, ts) for g in gs])

    async def Subscribe(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        """Serve one Subscribe RPC in the mode its first request asks for."""
        self.subscribes += 1
        first = await anext(aiter(request_iterator))
        self.requests = [*self.requests[-99:], first]
        sl = first.subscribe
        subs = [
            Subscription(
                tree.elems(sl.prefix, s.path), s.mode, max(MIN_INTERVAL_S, s.sample_interval / 1e9 or 1.0)
            )
            for s in sl.subscription
        ]
        subs = subs or [Subscription([], gnmi_pb2.SAMPLE, 1.0)]
        if sl.mode in (gnmi_pb2.SubscriptionList.ONCE, gnmi_pb2.SubscriptionList.POLL):
            for r in self._sim_round(subs):
                yield r
            if sl.mode == gnmi_pb2.SubscriptionList.POLL:
                async for req in request_iterator:
                    if req.HasField("poll"):
                        for r in self._sim_round(subs):
                            yield r
            return
        async for r in self._sim_stream(subs, sl.updates_only):
            yield r

    def _sim_round(self, subs: list[Subscription]) -> list[Any]:
        ts, gs = self.select([s.want for s in subs])
        out = [gnmi_pb2.SubscribeResponse(update=tree.notification(g, ts)) for g in gs]
        return [*out, gnmi_pb2.SubscribeResponse(sync_response=True)]

    def _now(self) -> float:
        """Seconds on the stream's clock: the data's time with ``published``, else the wall clock. (The
        snapshot's own time: a stream wakes at every snapshot, and building its groups waits until one is
        due.)"""
        return self.snapshot().time_ns / 1e9 if self.published is not None else time.monotonic()

    async def _until(self, due: float) -> None:
        if self.published is not None:
            await self.published()
        else:
            await asyncio.sleep(max(0.0, due - time.monotonic()))

    async def _sim_stream(self, subs: list[Subscription], updates_only: bool) -> AsyncIterator[Any]:
        now = self._now()
        for s in subs:
            s.due = now
        synced = False
        while True:
            now = self._now()
            for s in subs:
                if now < s.due:
                    continue
                s.due = max(s.due + s.interval_s, now)
                for r in self._due(s, skip=updates_only and not synced):
                    yield r
            if not synced:
                synced = True
                yield gnmi_pb2.SubscribeResponse(sync_response=True)
            await self._until(min(s.due for s in subs))

    def _due(self, s: Subscription, skip: bool) -> list[Any]:
        ts, gs = self.select([s.want])
        out = []
        for g in gs:
            note = tree.notification(g, ts)
            if s.on_change:
                key = note.prefix.SerializeToString()
                body = b"".join(u.SerializeToString() for u in note.update)
                if s.last.get(key) == body:
                    continue
                s.last[key] = body
            if not skip:
                out.append(gnmi_pb2.SubscribeResponse(update=note))
        return out
