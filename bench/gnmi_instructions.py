"""Instructions per gNMI update, counted by cachegrind: the ingest's cost in a figure the machine's load does
not move, beside a baseline checkout's, as ratios.

CPU time per update moved by up to x1.8 from one hour to the next on this machine (a VM whose host is
shared), more than a change worth making (bench/README.md, stop 62). An instruction count is not time (a
cache miss costs more than an add), but it counts the same work the same way in any hour, so it shows what
a change did to the path. Stages, on ``gnmi_stages``' streams of 16 updates a notification (steady state:
every path decided, every series in the store, each counter only rising):

- ``ingest_batch``: ``GnmiSource.ingest_batch``, the whole of a batch's ingest;
- ``decode``: the response's parse and ``Decoder.notification``;
- ``store``: ``Store.ingest_runs`` of readings decoded beforehand;
- ``protobuf``: the parse, iterating the updates and reading ``path`` and ``val.uint_val``: what any
  decoder on protobuf's Python API pays.

Each figure is one process run under ``valgrind --tool=cachegrind --cache-sim=no`` for 1 and for 3 passes
over fresh rounds of the stream after the same warm-up: the difference, divided by the updates of the two
extra passes, is the stage alone (start-up, imports and stream building cancel).

Needs valgrind (``apt-get install valgrind``). Run:
``.venv/bin/python bench/gnmi_instructions.py --baseline ../main`` (about 20 s of valgrind a process).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
STAGES = ("ingest_batch", "decode", "store", "protobuf")
PASSES = (1, 3)  # the difference of two runs: the stage alone
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def child(stage: str, passes: int, shape: str, rounds: int, interfaces: int) -> None:
    """Run ``stage`` over ``passes`` chunks of fresh rounds after a warm-up chunk (in the tree on sys.path)."""
    from pygnmi.spec.v080 import gnmi_pb2

    from bench.gnmi_stages import rounds_of, source_for, stream
    from collector.sources.gnmi import shallow
    from collector.store import Store

    blobs = stream(shape, rounds * (1 + PASSES[-1]), interfaces)
    batches = rounds_of(blobs, interfaces, 16)
    never = time.monotonic() + 1e9
    queued = [
        [(b, never, gnmi_pb2.SubscribeResponse.FromString(b).update.timestamp + 1_000_000) for b in batch]
        for batch in batches
    ]
    chunk = len(queued) // (1 + PASSES[-1])
    chunks = [queued[i * chunk : (i + 1) * chunk] for i in range(1 + PASSES[-1])]
    store = Store(rendered=False)
    source = source_for(store)
    decoder = source.decoder
    for batch in chunks[0]:
        source.ingest_batch(store, batch)
    # decoded beforehand for the store stage, in every run alike (the warm-up's decisions, no store yet)
    decoded = [
        [
            (decoder.notification(shallow.parse_response(raw).update)[0], received)
            for raw, _, received in batch
        ]
        for chunk_ in chunks[1:]
        for batch in chunk_
    ]
    per_chunk = len(decoded) // PASSES[-1]
    for k in range(1, passes + 1):
        if stage == "ingest_batch":
            for batch in chunks[k]:
                source.ingest_batch(store, batch)
        elif stage == "decode":
            for batch in chunks[k]:
                for raw, _, _ in batch:
                    decoder.notification(shallow.parse_response(raw).update)
        elif stage == "store":
            for runs in decoded[(k - 1) * per_chunk : k * per_chunk]:
                store.ingest_runs("bench", "gnmi", runs)
        else:
            for batch in chunks[k]:
                for raw, _, _ in batch:
                    for u in shallow.parse_response(raw).update.update:
                        path = u.path  # noqa: F841 (read, as a decoder reads it)
                        raw_value = u.val.uint_val  # noqa: F841


def instructions(tree: Path, stage: str, passes: int, args: argparse.Namespace) -> int:
    """The instructions of one child process run in ``tree``."""
    cmd = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        stage,
        str(passes),
        "--tree",
        str(tree),
        "--shape",
        args.shape,
        "--rounds",
        str(args.rounds),
        "--interfaces",
        str(args.interfaces),
    ]
    # one hash seed for every run: string hashes move dict probes, about 2 % of a count from run to run
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=1800, check=False)
    found = _REFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{stage} in {tree}: valgrind exited {done.returncode}: {done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def per_update(tree: Path, stage: str, args: argparse.Namespace) -> float:
    """Instructions per update of ``stage`` in ``tree``."""
    one, three = (instructions(tree, stage, n, args) for n in PASSES)
    updates = (PASSES[1] - PASSES[0]) * args.rounds * args.interfaces * 16
    return (three - one) / updates


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--baseline", type=Path, help="the checkout to compare with (its bench/ and collector/)"
    )
    parser.add_argument("--shape", default="scale16", choices=("scale16", "subtree16"))
    parser.add_argument("--rounds", type=int, default=25, help="rounds a pass")
    parser.add_argument("--interfaces", type=int, default=64)
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    parser.add_argument("--jobs", type=int, default=2, help="valgrind processes at once (counts do not mind)")
    parser.add_argument("--child", nargs=2, metavar=("STAGE", "PASSES"), help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, default=HERE, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(args.tree.resolve()))
        child(args.child[0], int(args.child[1]), args.shape, args.rounds, args.interfaces)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind not found: apt-get install valgrind")
    trees = {"this tree": HERE}
    if args.baseline is not None:
        trees = {"baseline": args.baseline.resolve(), **trees}
    jobs = [(name, stage) for stage in args.stages for name in trees]
    with ThreadPoolExecutor(args.jobs) as pool:
        counts = dict(zip(jobs, pool.map(lambda j: per_update(trees[j[0]], j[1], args), jobs), strict=True))
    updates = args.rounds * args.interfaces * 16
    print(f"{args.shape}: instructions per update, {PASSES[1] - PASSES[0]} passes of {updates:,} updates")
    print(
        f"  {'stage':14s}"
        + "".join(f"{name:>14s}" for name in trees)
        + ("   ratio" if len(trees) > 1 else "")
    )
    out: dict[str, Any] = {}
    for stage in args.stages:
        row = [counts[name, stage] for name in trees]
        ratio = row[-1] / row[0] if len(row) > 1 else None
        print(f"  {stage:14s}" + "".join(f"{v:14,.0f}" for v in row) + (f"   x{ratio:.3f}" if ratio else ""))
        out[stage] = {name: round(v) for name, v in zip(trees, row, strict=True)} | {"ratio": ratio}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
