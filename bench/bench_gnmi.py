"""gNMI ingest benchmark: updates per CPU second through decode, mapping and store, on a loopback stream.

A replay server in a child process streams ``--rounds`` rounds of ``--interfaces`` per-interface counter
notifications (``--leaves`` updates each, OpenConfig interface counters with moving values). Consumers of the
same serialised stream, each timed with ``time.process_time`` of the consuming process only (all of its
threads, grpc's included), the network consumers each in a fresh child process so both pay the same process
accounting and start-up:

- ours: ``GnmiSource`` (grpc.aio read -> parse -> decode -> table match -> ``Store.ingest``);
- floor: protobuf parsing alone of the same bytes (``SubscribeResponse.FromString``), no network, no work;
- pygnmi: ``gNMIclient.subscribe2`` (STREAM) iterating its decoded dicts;
- ours and pygnmi again with ``GRPC_EXPERIMENTS=-event_engine_client`` (``gnmi_client.RECEIVE_ENV``), which
  changes grpc core's client I/O path for both;
- and, for the breakdown, ours without transport: ``GnmiSource.handle`` on already-parsed messages, and
  where ours spent its CPU per response: ``ingest_batch`` (on the event loop's thread), the rest of that
  thread (grpc.aio's read path in Python), and grpc core's own threads (``Split``).

Run: ``.venv/bin/python bench/bench_gnmi.py`` (``--rounds 50`` for a quick look; ``--batch 16`` for 256
updates per notification).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pygnmi.spec.v080 import gnmi_pb2

from collector.config import GnmiConfig
from collector.sources.gnmi.client import RECEIVE_ENV
from collector.sources.gnmi.source import GnmiSource, Queued
from collector.store import Store
from spanwatch.sim.gnmi_server import GnmiServer, serve

LEAVES = (
    "in-octets",
    "out-octets",
    "in-pkts",
    "out-pkts",
    "in-discards",
    "out-discards",
    "in-errors",
    "out-errors",
    "in-fcs-errors",
    "in-unicast-pkts",
    "out-unicast-pkts",
    "in-multicast-pkts",
    "out-multicast-pkts",
    "in-broadcast-pkts",
    "out-broadcast-pkts",
    "last-clear",
)


def build(rounds: int, interfaces: int, leaves: int, batch: int = 1) -> list[bytes]:
    """The serialised stream: a sync_response first (pygnmi waits for it), then the notifications.

    Args:
        rounds: sample rounds.
        interfaces: interfaces per round.
        leaves: counters per interface.
        batch: interfaces per notification (1: prefix = the interface's counters container, as Arista and
            SONiC send; more: prefix ``/interfaces`` and the interface in each update's path, as Nokia and
            Junos send whole subtrees).
    """
    out = [gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString()]
    t0 = time.time_ns()
    for r in range(rounds):
        for first in range(0, interfaces, batch):
            n = gnmi_pb2.Notification(timestamp=t0 + r * 10**9)
            n.prefix.elem.add(name="interfaces")
            for i in range(first, min(first + batch, interfaces)):
                name = f"Ethernet{i // 8 + 1}/{i % 8 + 1}"
                for j, leaf in enumerate(LEAVES[:leaves]):
                    u = n.update.add()
                    u.path.elem.add(name="interface").key["name"] = name
                    u.path.elem.add(name="state")
                    u.path.elem.add(name="counters")
                    u.path.elem.add(name=leaf)
                    u.val.uint_val = 7 if leaf == "last-clear" else (r + 1) * (1000 + i * 31 + j)
            out.append(gnmi_pb2.SubscribeResponse(update=n).SerializeToString())
    return out


def updates_in(blobs: list[bytes]) -> int:
    return sum(len(gnmi_pb2.SubscribeResponse.FromString(b).update.update) for b in blobs)


def floor(blobs: list[bytes]) -> float:
    """CPU seconds to parse every message once."""
    start = time.process_time()
    for b in blobs:
        gnmi_pb2.SubscribeResponse.FromString(b)
    return time.process_time() - start


def handle_only(blobs: list[bytes]) -> float:
    """CPU seconds for ``GnmiSource.handle`` (decode, mapping, store) on parsed messages, no transport."""
    msgs = [gnmi_pb2.SubscribeResponse.FromString(b) for b in blobs]
    cfg = GnmiConfig(address="127.0.0.1:1", insecure=True, subscriptions=("interfaces",))
    source, store = GnmiSource("bench", cfg), Store()
    start = time.process_time()
    for m in msgs:
        source.handle(store, m)
    return time.process_time() - start


async def _serve(blobs: list[bytes]) -> None:
    servicer = GnmiServer([gnmi_pb2.SubscribeResponse.FromString(b) for b in blobs], sync=False, hold=True)
    server, port = await serve(servicer)
    print(port, flush=True)
    await server.wait_for_termination()


def server_process(path: str) -> tuple[subprocess.Popen[str], int]:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", path], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


async def ours(port: int, total_responses: int) -> Split:
    """CPU seconds for ``GnmiSource`` to take every response into the store, and where they went.

    The replay's rounds are a second apart in device time and arrive as fast as grpc delivers them, so at
    a 1 s sample interval the source would rightly see itself seconds behind and fold its batches,
    skipping the decoding of superseded responses; an hour-long interval keeps every response decoded,
    which is the path measured.
    """
    cfg = GnmiConfig(
        address=f"127.0.0.1:{port}", insecure=True, subscriptions=("interfaces",), sample_interval="3600s"
    )
    source = GnmiSource("bench", cfg, stall_floor=60)
    store = Store()
    done = asyncio.Event()
    ingest_batch = source.ingest_batch
    ingesting = [0.0]

    def counted(store: Store, items: list[Queued]) -> None:  # wake the timer once, not poll it
        start = time.thread_time()
        ingest_batch(store, items)
        ingesting[0] += time.thread_time() - start
        if source.responses >= total_responses:
            done.set()

    source.ingest_batch = counted  # type: ignore[method-assign]
    start, main_start = time.process_time(), time.thread_time()
    task = asyncio.create_task(source.run(store))
    await done.wait()
    split = Split(time.process_time() - start, time.thread_time() - main_start, ingesting[0])
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return split


@dataclass(frozen=True)
class Split:
    """A consumer's CPU seconds: the whole process (every thread), its event loop's thread, and the part
    of that spent in ``ingest_batch`` (parse, decode, store). The loop's thread less the ingest is grpc.aio's
    read path in Python (its futures, the loop's turns, the wake-up socket) and the source's read loop; the
    process less the loop's thread is grpc core's own threads."""

    process: float
    loop_thread: float
    ingest: float


PYGNMI = """
import sys, time
from pygnmi.client import gNMIclient
port, total = int(sys.argv[1]), int(sys.argv[2])
with gNMIclient(target=("127.0.0.1", port), insecure=True) as gc:
    start = time.process_time()
    sub = gc.subscribe2(subscribe={"mode": "stream", "encoding": "proto",
                                   "subscription": [{"path": "/interfaces/interface/state/counters",
                                                     "mode": "sample", "sample_interval": 10**9}]})
    seen = 0
    for msg in sub:
        seen += len(msg.get("update", {}).get("update", []))
        if seen >= total:
            break
    print(time.process_time() - start, flush=True)
    sub.close()
"""


def child(args: list[str], env: dict[str, str]) -> str:
    """Run a consumer in a fresh process; its last output line (what it measured)."""
    out = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=600, check=True, env=env
    )
    return out.stdout.strip().splitlines()[-1]


def pygnmi(port: int, total_updates: int, env: dict[str, str]) -> float:
    """CPU seconds for pygnmi's subscribe path to decode every update (in a child process)."""
    return float(child(["-c", PYGNMI, str(port), str(total_updates)], env))


def ours_child(port: int, total_responses: int, env: dict[str, str]) -> Split:
    """``ours`` in a child process."""
    return Split(**json.loads(child([__file__, "--consume", f"{port}:{total_responses}"], env)))


def main() -> None:
    """Run the three measurements and print updates per CPU second and the ratios."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--interfaces", type=int, default=64)
    p.add_argument("--leaves", type=int, default=16, choices=range(1, len(LEAVES) + 1))
    p.add_argument("--batch", type=int, default=1, help="interfaces per notification")
    p.add_argument("--serve", help=argparse.SUPPRESS)
    p.add_argument("--consume", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        asyncio.run(_serve([bytes.fromhex(line) for line in Path(args.serve).read_text().split()]))
        return
    if args.consume:
        logging.disable(logging.WARNING)
        port, responses = map(int, args.consume.split(":"))
        print(json.dumps(asdict(asyncio.run(ours(port, responses)))), flush=True)
        return
    logging.disable(logging.WARNING)  # synthetic timestamps: no clock-skew lines
    blobs = build(args.rounds, args.interfaces, args.leaves, args.batch)
    total = updates_in(blobs)
    with tempfile.NamedTemporaryFile("w", suffix=".hex", delete=False) as f:
        f.write("\n".join(b.hex() for b in blobs))
    results: dict[str, float] = {
        "floor (protobuf parse only)": total / floor(blobs),
        "ours without transport": total / handle_only(blobs),
    }
    plain = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    fast = {**plain, **RECEIVE_ENV}
    splits: dict[str, Split] = {}
    for name, run in (
        ("ours (GnmiSource -> Store)", lambda port: ours_child(port, len(blobs), plain)),
        ("pygnmi subscribe2", lambda port: pygnmi(port, total, plain)),
        ("ours, -event_engine_client", lambda port: ours_child(port, len(blobs), fast)),
        ("pygnmi, -event_engine_client", lambda port: pygnmi(port, total, fast)),
    ):
        proc, port = server_process(f.name)  # the server always runs with grpc's defaults
        try:
            used = run(port)
            if isinstance(used, Split):
                splits[name], used = used, used.process
            results[name] = total / used
        finally:
            proc.terminate()
            proc.wait()
    Path(f.name).unlink()
    floor_rate = results["floor (protobuf parse only)"]
    print(f"{total} updates in {len(blobs)} responses ({args.leaves * args.batch} updates per notification)")
    for name, rate in results.items():
        print(f"  {name:30s} {rate:12,.0f} updates/CPU-s")
    print("where ours spends it, µs of CPU per response (start-up included):")
    for name, split in splits.items():
        grpc_threads, ingest = split.process - split.loop_thread, split.ingest
        read_path = split.loop_thread - ingest
        per = 1e6 / len(blobs)
        print(
            f"  {name:30s} ingest_batch {ingest * per:5.1f}  grpc.aio read path {read_path * per:5.1f}"
            f"  grpc threads {grpc_threads * per:5.1f}  (whole {split.process * per:5.1f})"
        )
    summary = {}
    for tag, ours_name, py_name in (
        ("default", "ours (GnmiSource -> Store)", "pygnmi subscribe2"),
        ("eec_off", "ours, -event_engine_client", "pygnmi, -event_engine_client"),
    ):
        summary[f"ours_vs_pygnmi_{tag}"] = round(results[ours_name] / results[py_name], 2)
        summary[f"share_of_floor_{tag}"] = round(results[ours_name] / floor_rate, 3)
    summary["ours_eec_off_vs_pygnmi_default"] = round(
        results["ours, -event_engine_client"] / results["pygnmi subscribe2"], 2
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
