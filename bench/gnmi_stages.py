"""Where a gNMI update's CPU goes: microseconds per update for each stage of the collector's ingest path.

The stages, each timed alone (``time.process_time``, the best of ``--repeat`` passes, caches and series
warm: the steady state of a stream) on the same serialised stream:

- grpc receive: a child process reading the raw response bytes off a loopback Subscribe (``GnmiClient``,
  ``raw=True``) and nothing else, from ``bench_gnmi``'s replay server in another process;
- protobuf parse: ``shallow.parse_response`` (the source's parse: paths left as bytes);
- path -> catalogue mapping: the decoder's per-prefix, per-path decision lookup;
- value decode: the rest of ``Decoder.notification`` (typed values to ``Sample``s);
- source bookkeeping: the rest of ``GnmiSource.ingest_batch`` (backlog, lag, counts, clock offset);
- store ingest: ``Store.ingest`` of the decoded readings (``CounterReading``s through series handles);
- relay: what a worker's change log adds to ingest, its frame and pickling per relay tick, and the
  supervisor's ``Mirror.apply`` of it;
- archive rows: what the archive sink adds to ingest, and the Parquet flush per row.

Shapes (``--shape``): ``subtree16`` and ``subtree256`` are ``bench_gnmi``'s stream at 1 and 16 interfaces
per notification (prefix ``/interfaces``, the interface in each update's path, as Nokia and Junos send);
``scale16`` is what ``bench_scale.py gnmi``'s load servers send (the interface's counters container as
prefix, one leaf per update, as Arista and SONiC send).

Run: ``.venv/bin/python bench/gnmi_stages.py [--shape subtree16 scale16 subtree256] [--rounds 100]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pygnmi.spec.v080 import gnmi_pb2

from bench.bench_gnmi import build, server_process
from collector.config import GnmiConfig
from collector.relay import Mirror, Outbox, encode
from collector.sources.gnmi import shallow
from collector.sources.gnmi.source import GnmiSource
from collector.store import Store

SCALE_LEAVES = (
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
    "carrier-transitions",
)  # bench_scale.py's LEAVES


def build_scale(rounds: int, interfaces: int) -> list[bytes]:
    """``bench_scale.py gnmi``'s load-server stream: one notification per interface, prefix down to its
    counters container, one leaf per update."""
    out = [gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString()]
    t0 = time.time_ns()
    for r in range(1, rounds + 1):
        for i in range(interfaces):
            n = gnmi_pb2.Notification(timestamp=t0 + r * 10**9)
            n.prefix.elem.add(name="interfaces")
            n.prefix.elem.add(name="interface").key["name"] = f"Ethernet{i // 8 + 1}/{i % 8 + 1}"
            n.prefix.elem.add(name="state")
            n.prefix.elem.add(name="counters")
            for j, leaf in enumerate(SCALE_LEAVES):
                u = n.update.add()
                u.path.elem.add(name=leaf)
                u.val.uint_val = r * (1000 + i * 31 + j)
            out.append(gnmi_pb2.SubscribeResponse(update=n).SerializeToString())
    return out


def stream(shape: str, rounds: int, interfaces: int) -> list[bytes]:
    if shape == "scale16":
        return build_scale(rounds, interfaces)
    return build(rounds, interfaces, 16, 1 if shape == "subtree16" else 16)


def best(repeat: int, run: Callable[[], float]) -> float:
    """The least CPU seconds of ``repeat`` calls of ``run`` (each returns its own CPU seconds)."""
    return min(run() for _ in range(repeat))


def cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def source_for(store: Store) -> GnmiSource:
    cfg = GnmiConfig(address="127.0.0.1:1", insecure=True, subscriptions=("interfaces",))
    source = GnmiSource("bench", cfg)
    source._store = store
    return source


def rounds_of(blobs: list[bytes], interfaces: int, per_note: int) -> list[list[bytes]]:
    """The stream cut into one batch per round (what a drain takes at a round a second)."""
    body = blobs[1:]
    step = max(interfaces // per_note, 1)
    return [body[i : i + step] for i in range(0, len(body), step)]


def in_process(blobs: list[bytes], interfaces: int, per_note: int, repeat: int) -> dict[str, float]:
    """CPU seconds per stage over the whole stream (everything but grpc)."""
    batches = rounds_of(blobs, interfaces, per_note)
    msgs = [shallow.parse_response(b) for b in blobs[1:]]
    notes = [m.update for m in msgs]
    now = time.time_ns()
    # received 1 ms after each round's timestamp, and queued "now" whenever the pass runs (never behind:
    # a folded batch skips decoding, which is not the path measured here)
    never_waited = time.monotonic() + 1e9
    queued = [
        [
            (b, never_waited, gnmi_pb2.SubscribeResponse.FromString(b).update.timestamp + 1_000_000)
            for b in batch
        ]
        for batch in batches
    ]

    # warm: every path decided, every series in the store
    plain = Store(rendered=False)
    source = source_for(plain)
    decoder = source.decoder
    for batch in queued:
        source.ingest_batch(plain, batch)
    # The readings: a plain counter's names its series' handle, which remembers one store (and device) at a
    # time, so the first pass into another store below takes the general way; the best of the passes is
    # the steady state, as for every stage.
    samples = [decoder.notification(n)[0] for n in notes]

    def parse() -> None:
        for b in blobs:
            shallow.parse_response(b)

    def mapping() -> None:
        cache = decoder._cache
        for n in notes:
            pkey = n.prefix
            sub = cache[pkey]
            for u in n.update:
                sub.get(u.path)

    def decode() -> None:
        for n in notes:
            decoder.notification(n)

    def ingest_into(store: Store) -> Callable[[], None]:
        def run() -> None:
            for s in samples:
                store.ingest("bench", "gnmi", s, now)

        return run

    def batches_into(store: Store, src: GnmiSource) -> Callable[[], None]:
        def run() -> None:
            for batch in queued:
                src.ingest_batch(store, batch)

        return run

    relayed = Store(rendered=False)
    outbox = Outbox(relayed)
    mirror = Mirror(Store())
    ingest_into(relayed)()
    mirror.apply(0, _frame(outbox))

    def relay_ticks() -> tuple[float, float]:
        """Frame and pickling per tick (one round per tick), and the supervisor's apply."""
        framing = applying = 0.0
        for s in samples_by_round(samples, len(batches)):
            for one in s:
                relayed.ingest("bench", "gnmi", one, now)
            start = time.process_time()
            body = encode(_frame(outbox))
            framing += time.process_time() - start
            start = time.process_time()
            import pickle

            mirror.apply(0, pickle.loads(body[4:]))
            applying += time.process_time() - start
        return framing, applying

    with tempfile.TemporaryDirectory() as tmp:
        from collector.exporters.archive import Archive

        archive = Archive(tmp, writer="bench", max_buffer_bytes=1 << 34)
        archived = Store(rendered=False, archive=archive)
        ingest_into(archived)()
        archive.flush()
        out = {
            "protobuf parse": best(repeat, lambda: cpu(parse)) * len(blobs[1:]) / len(blobs),
            "path -> catalogue mapping": best(repeat, lambda: cpu(mapping)),
            "decoder (mapping + value decode)": best(repeat, lambda: cpu(decode)),
            "store ingest": best(repeat, lambda: cpu(ingest_into(plain))),
            "ingest_batch (parse + decode + ingest + bookkeeping)": best(
                repeat, lambda: cpu(batches_into(plain, source))
            ),
            "store ingest with a relay change log": best(repeat, lambda: cpu(ingest_into(relayed))),
            "store ingest with an archive sink": best(repeat, lambda: cpu(ingest_into(archived))),
        }
        archive.flush()
        ingest_into(archived)()
        out["archive flush"] = cpu(archive.flush)
    framing, applying = min((relay_ticks() for _ in range(repeat)), key=sum)
    out["relay frame + pickle"] = framing
    out["relay Mirror.apply (supervisor)"] = applying
    return out


def samples_by_round(samples: list[Any], rounds: int) -> list[list[Any]]:
    step = max(len(samples) // max(rounds, 1), 1)
    return [samples[i : i + step] for i in range(0, len(samples), step)]


def _frame(outbox: Outbox) -> Any:
    frame = outbox.frame()
    assert frame is not None
    return frame


RECEIVE = """
import asyncio, sys, time
sys.path.insert(0, sys.argv[3])
from collector.config import GnmiConfig
from collector.sources.gnmi.client import GnmiClient, open_channel, subscribe_request
from collector.sources.gnmi.paths import load_set

async def main(port, total):
    cfg = GnmiConfig(address=f"127.0.0.1:{port}", insecure=True, subscriptions=("interfaces",))
    channel = open_channel(cfg)
    client = GnmiClient(channel, ())
    request = subscribe_request(list(load_set("interfaces").subscriptions), mode="stream",
                                sample_interval_s=1.0, heartbeat_s=5.0, encoding="proto")
    start = time.process_time()
    call = await client.subscribe(request, raw=True)
    seen = 0
    async for raw in call:
        seen += 1
        if seen >= total:
            break
    used = time.process_time() - start
    call.cancel()
    await channel.close(grace=None)
    print(used, flush=True)

asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""


def receive(blobs: list[bytes], env: dict[str, str]) -> float:
    """CPU seconds of a child process that only reads the stream's messages off grpc."""
    with tempfile.NamedTemporaryFile("w", suffix=".hex", delete=False) as f:
        f.write("\n".join(b.hex() for b in blobs))
    proc, port = server_process(f.name)
    try:
        tree = str(Path(__file__).resolve().parent.parent)
        out = subprocess.run(
            [sys.executable, "-c", RECEIVE, str(port), str(len(blobs)), tree],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
            env=env,
        )
        return float(out.stdout.strip().splitlines()[-1])
    finally:
        proc.terminate()
        proc.wait()
        Path(f.name).unlink()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", nargs="+", default=["subtree16", "scale16", "subtree256"])
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--interfaces", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-grpc", action="store_true", help="skip the grpc receive stage (no sockets)")
    args = p.parse_args()
    logging.disable(logging.WARNING)  # synthetic timestamps: no clock-skew lines
    results = {}
    for shape in args.shape:
        blobs = stream(shape, args.rounds, args.interfaces)
        per_note = 256 if shape == "subtree256" else 16
        total = sum(len(gnmi_pb2.SubscribeResponse.FromString(b).update.update) for b in blobs)
        stages = in_process(blobs, args.interfaces, per_note, args.repeat)
        if not args.no_grpc:
            plain = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
            stages["grpc receive"] = min(receive(blobs, plain) for _ in range(args.repeat))
            off = {**plain, "GRPC_EXPERIMENTS": "-event_engine_client"}
            stages["grpc receive, -event_engine_client"] = min(
                receive(blobs, off) for _ in range(args.repeat)
            )
        us = {k: round(v / total * 1e6, 3) for k, v in stages.items()}
        print(f"{shape}: {total} updates, {per_note} per notification (us of CPU per update)")
        for name, value in us.items():
            print(f"  {name:55s} {value:8.3f}")
        results[shape] = us
    print(json.dumps(results))


if __name__ == "__main__":
    main()
