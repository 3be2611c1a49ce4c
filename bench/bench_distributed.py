"""The analysis beyond one machine: a synthetic archive in the collector's layout (several ``shard=``
writers, on disk and in an S3 server) and the step logs of many ranks, analysed by the local engine and by
Ray with 1 and 2 workers; time, peak memory per process, and whether the results are identical.

Each engine runs in its own process (``--one ENGINE``), so its peak RSS is its own; the Ray tasks report
their workers' peak RSS. The S3 server is moto's standalone server on 127.0.0.1, started here.

    .venv/bin/python bench/bench_distributed.py --readings 3e8 --ranks 4096 --steps 1000 --out /tmp/dist

The issue's size (3e8 readings, 4,096 ranks x 1,000 steps) needs tens of GB of temporary disk and, on a
shared 2-core machine, about an hour; ``--readings`` and ``--ranks`` scale it down.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from collector.contracts import archive as layout
from collector.shard import hashmod

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
INTERFACES = 4
METRICS = (  # counters then gauges: what the analysis reads
    "dci_interface_transmit_bytes_total",
    "dci_interface_receive_bytes_total",
    "dci_queue_dropped_packets_total",
    "dci_queue_occupancy_bytes",
    "dci_interface_speed_bytes_per_second",
)
FILE_SECONDS = 600  # one file per shard per ten minutes (a collector flushes more often; fewer, larger here)
SPEED = 100e9 / 8
TYPES = {
    "timestamp": pl.Datetime("ns", "UTC"),
    "string": pl.String(),
    "float64": pl.Float64(),
    "uint64": pl.UInt64(),
}


def _device(i: int) -> str:
    return f"dci{i:03d}.site-{'abcd'[i % 4]}"


def _chunk(devices: list[str], start_s: int, seconds: int, rng: np.random.Generator) -> pl.DataFrame:
    """Every series of ``devices`` for ``seconds`` seconds from ``start_s``, one reading per second.

    Made in bulk: each row's device, interface, metric and second are arithmetic on its index, and the label
    strings are gathered from their few values (no Python object per reading).
    """
    n_if, n_m = INTERFACES, len(METRICS)
    n = len(devices) * n_if * n_m * seconds
    index = np.arange(n, dtype=np.int64)
    second = start_s + index % seconds
    metric_i = index // seconds % n_m
    interface_i = index // (n_m * seconds) % n_if
    device_i = index // (n_if * n_m * seconds)
    is_total = np.array([m.endswith("_total") for m in METRICS])[metric_i]
    dropped = np.array(["dropped" in m for m in METRICS])[metric_i]
    speed = np.array(["speed" in m for m in METRICS])[metric_i]
    rate = rng.uniform(0.2, 0.6, n) * SPEED
    counter = np.floor((second - int(T0.timestamp())) * rate)
    value = np.where(
        is_total, np.where(dropped, 0.0, counter), np.where(speed, SPEED, rng.uniform(0, 2e6, n))
    )
    ns = pl.Series(second * 1_000_000_000)
    columns: dict[str, pl.Series] = {
        "time": ns.cast(pl.Datetime("ns", "UTC")),
        "received_time": (ns + 2_000_000).cast(pl.Datetime("ns", "UTC")),
        "device": pl.Series(devices).gather(device_i),
        "source": pl.Series(["gnmi"]).gather(np.zeros(n, dtype=np.int64)),
        "metric": pl.Series(METRICS).gather(metric_i),
        "interface": pl.Series([f"Ethernet{k + 1}" for k in range(n_if)]).gather(interface_i),
        "value": pl.Series(value),
        "counter": pl.Series(np.where(is_total, value, 0)).cast(pl.UInt64),
    }
    frame = pl.DataFrame(
        [
            columns[name].alias(name).cast(TYPES[kind])
            if name in columns
            else pl.Series(name, [None], TYPES[kind]).extend_constant(None, n - 1)
            for name, kind in layout.COLUMNS
        ]
    )
    counters = pl.when(pl.Series(is_total)).then(pl.col("counter"))
    link = pl.when(pl.col("interface") == "Ethernet1").then(pl.lit("l-") + pl.col("device").str.slice(3, 3))
    return frame.with_columns(counter=counters, link=link)


def make_archive(root: Path, devices: int, readings: float, shards: int) -> int:
    """Write about ``readings`` readings of ``devices`` devices in the collector's layout; returns rows."""
    per_second = devices * INTERFACES * len(METRICS)
    seconds = max(FILE_SECONDS, int(readings // per_second) // FILE_SECONDS * FILE_SECONDS)
    names = [_device(i) for i in range(devices)]
    by_shard = {s: [d for d in names if hashmod([d], shards) == s] for s in range(shards)}
    rng = np.random.default_rng(31)
    rows, start = 0, int(T0.timestamp())
    for offset in range(0, seconds, FILE_SECONDS):
        stamp = (T0 + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H")
        for shard, members in by_shard.items():
            if not members:
                continue
            folder = root / layout.shard_folder(shard) / layout.folder(stamp)
            folder.mkdir(parents=True, exist_ok=True)
            frame = _chunk(members, start + offset, FILE_SECONDS, rng)
            frame.write_parquet(
                folder / f"bench-{shard}-{offset // FILE_SECONDS:06d}.parquet", compression="zstd"
            )
            rows += frame.height
    return rows


def make_logs(folder: Path, ranks: int, steps: int) -> list[Path]:
    """One plain step log per rank: ``steps`` one-second steps from ``T0``, a few ranks slowed (each file's
    lines written at once by polars)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(4096)
    paths = []
    for rank in range(ranks):
        duration = 1.0 + rng.normal(0, 0.01, steps).clip(-0.05, 0.05) + (0.2 if rank % 997 == 0 else 0.0)
        ends = np.cumsum(duration)
        bounds = pl.DataFrame({"start": np.round((ends - duration) * 1e6), "end": np.round(ends * 1e6)})
        lines = bounds.select(
            step=pl.int_range(steps),
            rank=pl.lit(rank),
            start=_stamp("start"),
            end=_stamp("end"),
        )
        path = folder / f"rank{rank:05d}.jsonl"
        lines.write_ndjson(path)
        paths.append(path)
    return paths


def _stamp(column: str) -> pl.Expr:
    """Microseconds after ``T0`` as the ISO time a step log writes."""
    moment = pl.lit(T0) + pl.duration(microseconds=pl.col(column).cast(pl.Int64))
    return moment.dt.to_string("%Y-%m-%dT%H:%M:%S%.6f%:z")


def run_one(engine: str, archive: str, logs: Path, out: Path, batch_rows: int) -> dict[str, object]:
    """One analysis in this process: ``local``, ``ray1`` or ``ray2`` (Ray with 1 or 2 CPUs)."""
    from analyzer import distributed
    from analyzer.analysis import Analysis, AnalysisInputs

    inputs = AnalysisInputs(archive=archive, logs=tuple(sorted(logs.glob("*.jsonl"))), batch_rows=batch_rows)
    start = time.monotonic()
    task_peak = None
    if engine == "local":
        result = Analysis(inputs).run()
    else:
        import ray

        ray.init(num_cpus=int(engine[-1]), include_dashboard=False, log_to_driver=False)
        try:
            analysis = distributed.RayAnalysis(inputs)
            result = analysis.run()
            task_peak = max(analysis.stats.peak_rss_bytes, default=0)
        finally:
            ray.shutdown()
    seconds = time.monotonic() - start
    result.write(out)
    return {
        "engine": engine,
        "seconds": seconds,
        "driver_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "task_peak_rss_bytes": task_peak,
        "rows": result.summary["telemetry"]["rows"],
        "step_rows": result.steps.height,
    }


def same(a: Path, b: Path) -> list[str]:
    from analyzer import compare
    from analyzer.analysis import FILES

    out = []
    for name in FILES:
        out += compare.table_differences(
            name, pl.read_parquet(a / f"{name}.parquet"), pl.read_parquet(b / f"{name}.parquet")
        )
    left, right = (json.loads((p / "summary.json").read_text()) for p in (a, b))
    for summary in (left, right):
        summary["inputs"].pop("archive")
    return out + compare.value_differences("summary", left, right)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--readings", type=float, default=3e8)
    p.add_argument("--devices", type=int, default=500)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--ranks", type=int, default=4096)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch-rows", type=int, default=4_000_000)
    p.add_argument("--engines", default="local,ray1,ray2")
    p.add_argument(
        "--s3", action="store_true", help="also put the archive in moto's S3 server and read it there"
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--archive", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(
            json.dumps(
                run_one(args.one, args.archive, args.out / "logs", args.out / args.one, args.batch_rows)
            )
        )
        return
    archive = args.out / "archive"
    if not archive.exists():
        start = time.monotonic()
        rows = make_archive(archive, args.devices, args.readings, args.shards)
        print(f"archive: {rows:,} readings in {time.monotonic() - start:.0f} s", file=sys.stderr)
    if not (args.out / "logs").exists():
        start = time.monotonic()
        make_logs(args.out / "logs", args.ranks, args.steps)
        print(
            f"logs: {args.ranks} ranks x {args.steps} steps in {time.monotonic() - start:.0f} s",
            file=sys.stderr,
        )
    location, env = str(archive), dict(os.environ)
    server = None
    if args.s3:
        from moto.server import ThreadedMotoServer

        from collector.storage import Bucket

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        env.update(
            AWS_ENDPOINT_URL=f"http://{host}:{port}",
            AWS_ALLOW_HTTP="true",
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench",
            AWS_REGION="us-east-1",
        )
        os.environ.update(env)
        import boto3

        boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"]).create_bucket(Bucket="bench-archive")
        location = "s3://bench-archive/dci"
        bucket = Bucket(location)
        for path in sorted(archive.rglob("*.parquet")):
            bucket.put(path.relative_to(archive).as_posix(), path.read_bytes())
    rows = []
    try:
        for engine in args.engines.split(","):
            command = [
                sys.executable,
                __file__,
                "--one",
                engine,
                "--archive",
                location,
                "--out",
                str(args.out),
                "--batch-rows",
                str(args.batch_rows),
            ]
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=7200)
            if done.returncode != 0:
                rows.append({"engine": engine, "error": done.stderr.strip().splitlines()[-1:]})
                continue
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        if server is not None:
            server.stop()
    for row in rows:
        if "error" not in row and row["engine"] != "local":
            row["differences"] = same(args.out / "local", args.out / str(row["engine"]))[:5]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
