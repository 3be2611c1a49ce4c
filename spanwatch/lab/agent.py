"""A router's gNMI agent: the kernel's qdisc statistics (netlink) on the OpenConfig QoS queue paths.

Runs inside a router namespace (``python -m spanwatch.lab.agent serve``) on the simulator's gNMI target
(``spanwatch.sim.gnmi_target``: Capabilities, Get, Subscribe ONCE/POLL/STREAM with SAMPLE and ON_CHANGE),
its data read from netlink with pyroute2 every ``SAMPLE_S``. Per egress queue (an htb class and its fifo):

- ``/qos/interfaces/interface[interface-id]/output/queues/queue[name]/state``: ``transmit-pkts``,
  ``transmit-octets`` and ``dropped-pkts`` (the fifo's counters), ``instant-queue-len`` (its backlog,
  bytes), ``max-queue-len`` (the peak backlog over the last ``WATERMARK_S``, sampled: a switch's watermark
  is exact, ours can miss a peak shorter than a sample), and lab leaves a switch would not have there:
  ``instant-queue-len-pkts``, ``overlimits`` and ``requeues`` (the htb class's);
- ``/qos/interfaces/interface[interface-id]/output/state/buffer-allocation-profile`` and
  ``/qos/buffer-allocation-profiles/buffer-allocation-profile[name]/queues/queue[name]/state/dedicated-buffer``:
  the queue's configured depth in bytes.

The kernel keeps no dropped-bytes counter per qdisc, so ``dropped-octets`` is not served.

``python -m spanwatch.lab.agent get`` is the check client: ``tc -s -j qdisc`` of a router, a gNMI Get of
its agent, and ``tc`` again, as one JSON object, so both readings can be set side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pygnmi.spec.v080 import gnmi_pb2

from spanwatch.sim import gnmi_tree as tree
from spanwatch.sim.gnmi_server import GNMI_VERSION, serve
from spanwatch.sim.gnmi_target import SimTarget

SAMPLE_S = 0.05
WATERMARK_S = 1.0
MODELS = (("openconfig-qos", "OpenConfig", "2.2.0"),)


@dataclass(frozen=True)
class QueueSpec:
    """One egress queue: its interface, name (traffic class), kernel handles and configured depth."""

    interface: str
    queue: str
    leaf: int  # the fifo qdisc's handle (major << 16)
    klass: int  # the htb class's handle (1:minor)
    buffer_bytes: int
    profile: str


@dataclass
class Reading:
    """The latest netlink figures of one queue and its recent backlog (for the watermark)."""

    counters: dict[str, int] = field(default_factory=dict)
    recent: deque[tuple[float, int]] = field(default_factory=deque)


def _stats(msg: Any) -> tuple[dict[str, int], dict[str, int]]:
    stats2 = msg.get_attr("TCA_STATS2")
    if stats2 is None:
        return {}, {}
    return dict(stats2.get_attr("TCA_STATS_BASIC") or {}), dict(stats2.get_attr("TCA_STATS_QUEUE") or {})


class Sampler:
    """Reads every queue's qdisc and class statistics over netlink."""

    def __init__(self, queues: list[QueueSpec]) -> None:
        from pyroute2 import IPRoute  # only the agent needs it (the ``lab`` extra)

        self.ipr = IPRoute()
        self.queues = queues
        self.readings = {(q.interface, q.queue): Reading() for q in queues}

    def sample(self) -> None:
        now = time.monotonic()
        index: dict[str, int] = {link.get_attr("IFLA_IFNAME"): link["index"] for link in self.ipr.get_links()}
        leaves: dict[tuple[int, int], Any] = {(m["index"], m["handle"]): m for m in self.ipr.get_qdiscs()}
        classes: dict[tuple[int, int], Any] = {}
        for ifindex in {index[q.interface] for q in self.queues if q.interface in index}:
            classes.update({(ifindex, m["handle"]): m for m in self.ipr.get_classes(index=ifindex)})
        for q in self.queues:
            if q.interface not in index:
                continue
            ifindex = index[q.interface]
            leaf, klass = leaves.get((ifindex, q.leaf)), classes.get((ifindex, q.klass))
            if leaf is None:
                continue
            basic, queue = _stats(leaf)
            _, kq = _stats(klass) if klass is not None else ({}, {})
            r = self.readings[(q.interface, q.queue)]
            r.counters = {
                "bytes": int(basic.get("bytes", 0)),
                "packets": int(basic.get("packets", 0)),
                "drops": int(queue.get("drops", 0)),
                "backlog": int(queue.get("backlog", 0)),
                "qlen": int(queue.get("qlen", 0)),
                "overlimits": int(kq.get("overlimits", 0)),
                "requeues": int(kq.get("requeues", 0)) + int(queue.get("requeues", 0)),
            }
            r.recent.append((now, r.counters["backlog"]))
            while r.recent and r.recent[0][0] < now - WATERMARK_S:
                r.recent.popleft()

    def groups(self) -> list[tree.Group]:
        """The QoS groups of every queue from the latest sample."""
        out: list[tree.Group] = []
        profiles: dict[str, str] = {}
        for q in self.queues:
            r = self.readings[(q.interface, q.queue)]
            if not r.counters:
                continue
            c = r.counters
            peak = max((b for _, b in r.recent), default=c["backlog"])
            base = _elems("qos", ("interfaces", {}), ("interface", {"interface-id": q.interface}), "output")
            leaves = [
                ("transmit-pkts", _u(c["packets"])),
                ("transmit-octets", _u(c["bytes"])),
                ("dropped-pkts", _u(c["drops"])),
                ("instant-queue-len", _u(c["backlog"])),
                ("max-queue-len", _u(peak)),
                ("instant-queue-len-pkts", _u(c["qlen"])),
                ("overlimits", _u(c["overlimits"])),
                ("requeues", _u(c["requeues"])),
            ]
            state = [*base, ("queues", {}), ("queue", {"name": q.queue}), ("state", {})]
            out.append(tree.Group(state, [([(name, {})], value) for name, value in leaves]))
            profile = _elems(
                "qos", "buffer-allocation-profiles", ("buffer-allocation-profile", {"name": q.profile})
            )
            depth = [*profile, ("queues", {}), ("queue", {"name": q.queue}), ("state", {})]
            out.append(tree.Group(depth, [([("dedicated-buffer", {})], _u(q.buffer_bytes))]))
            profiles[q.interface] = q.profile
        for interface, name in profiles.items():
            output = _elems(
                "qos", "interfaces", ("interface", {"interface-id": interface}), "output", "state"
            )
            out.append(tree.Group(output, [([("buffer-allocation-profile", {})], _s(name))]))
        return out


def _elems(*parts: str | tuple[str, dict[str, str]]) -> list[tree.Elem]:
    return [(p, {}) if isinstance(p, str) else p for p in parts]


def _u(value: int) -> Any:
    return gnmi_pb2.TypedValue(uint_val=max(0, int(value)))


def _s(value: str) -> Any:
    return gnmi_pb2.TypedValue(string_val=value)


class LabTarget(SimTarget):
    """The simulator's gNMI target serving netlink's figures instead of a snapshot.

    pyroute2's synchronous socket runs its own event loop, so the sampler lives on a thread of its own and
    publishes each sample's groups by replacing one reference.
    """

    def __init__(self, queues: list[QueueSpec]) -> None:
        super().__init__(_no_snapshot, device=0, epoch_ns=0)
        self.queues = queues
        self.latest: tuple[int, list[tree.Group]] = (time.time_ns(), [])
        self.ready = threading.Event()
        self.stopped = threading.Event()
        self.failed: BaseException | None = None
        self.thread = threading.Thread(target=self._sample, name="netlink", daemon=True)

    def _sample(self) -> None:
        try:
            sampler = Sampler(self.queues)
            while True:
                sampler.sample()
                self.latest = (time.time_ns(), sampler.groups())
                self.ready.set()
                time.sleep(SAMPLE_S)
        except BaseException as e:  # the serving loop reports it and exits
            self.failed = e
            self.ready.set()
            self.stopped.set()

    def current(self) -> tuple[int, list[tree.Group]]:
        return self.latest

    async def Capabilities(self, request: Any, context: Any) -> Any:
        """The models and encodings served."""
        return gnmi_pb2.CapabilityResponse(
            supported_models=[gnmi_pb2.ModelData(name=n, organization=o, version=v) for n, o, v in MODELS],
            supported_encodings=[gnmi_pb2.JSON, gnmi_pb2.JSON_IETF, gnmi_pb2.PROTO],
            gNMI_version=GNMI_VERSION,
        )


def _no_snapshot() -> Any:
    raise RuntimeError("the lab agent serves netlink, not a snapshot")


async def _serve(listen: str, queues: list[QueueSpec]) -> None:
    target = LabTarget(queues)
    target.thread.start()
    await asyncio.to_thread(target.ready.wait)
    host, _, port = listen.rpartition(":")
    server, _ = await serve(target, host, int(port))
    print(f"gnmi agent on {listen}: {len(queues)} queue(s)", flush=True)
    try:
        await asyncio.to_thread(target.stopped.wait)
        raise SystemExit(f"netlink sampler failed: {target.failed!r}")
    finally:
        await server.stop(grace=0.5)


def queue_specs(path: Path) -> list[QueueSpec]:
    return [QueueSpec(**item) for item in json.loads(path.read_text())]


# -- the check client ------------------------------------------------------------------------------------
def tc_queues(ns: str, devs: list[str]) -> dict[str, Any]:
    """``tc -s -j qdisc`` of a namespace and ``tc -s class`` of ``devs``, with the time read."""
    from spanwatch.lab.checks import tc_classes

    text = subprocess.run(
        ["tc", "-n", ns, "-s", "-j", "qdisc", "show"], capture_output=True, text=True, check=True, timeout=10
    ).stdout
    entries = [{"what": "qdisc", **item} for item in json.loads(text or "[]")]
    for dev in devs:
        entries += tc_classes(ns, dev)
    return {"time": time.time(), "entries": entries}


def gnmi_get(address: str) -> list[dict[str, Any]]:
    """Every queue leaf the agent at ``address`` serves, by gNMI Get (plaintext)."""
    import grpc
    from pygnmi.spec.v080 import gnmi_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        stub = gnmi_pb2_grpc.gNMIStub(channel)
        path = gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="qos")])
        reply = stub.Get(gnmi_pb2.GetRequest(path=[path], encoding=gnmi_pb2.JSON), timeout=5)
    rows = []
    for note in reply.notification:
        prefix = "/".join(
            e.name + "".join(f"[{k}={v}]" for k, v in sorted(e.key.items())) for e in note.prefix.elem
        )
        for u in note.update:
            value = u.val.uint_val if u.val.HasField("uint_val") else u.val.string_val
            rows.append(
                {"path": f"/{prefix}/{u.path.elem[0].name}", "value": value, "time_ns": note.timestamp}
            )
    return rows


def _get(args: argparse.Namespace) -> None:
    import grpc  # noqa: F401  (imported before the first tc reading, so the two readings sit close)

    tc_before = tc_queues(args.tc_ns, args.dev)
    gnmi = gnmi_get(args.address)
    tc_after = tc_queues(args.tc_ns, args.dev)
    print(json.dumps({"time": tc_before["time"], "tc_before": tc_before, "gnmi": gnmi, "tc_after": tc_after}))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m spanwatch.lab.agent", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--listen", required=True)
    s.add_argument("--spec", type=Path, required=True, help="JSON list of QueueSpec")
    g = sub.add_parser("get")
    g.add_argument("--address", required=True)
    g.add_argument("--tc-ns", required=True, help="the router namespace whose tc is read around the Get")
    g.add_argument("--dev", action="append", default=[], help="a device whose htb classes are read too")
    args = p.parse_args(argv)
    if args.command == "serve":
        asyncio.run(_serve(args.listen, queue_specs(args.spec)))
    else:
        _get(args)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
