"""Benchmark: the whole telemetry x steps analysis in spanwatch (polars) vs pandas vs DuckDB.

Generates a synthetic hive-partitioned archive in the collector's exact schema (``--rows`` readings:
devices x interfaces x 6 metrics x seconds, written with pyarrow, not the row-at-a-time ``Archive``) and a
steps table (``--steps`` rows over 8 ranks), with congestion episodes that slow the steps they overlap.
Each hour is one file holding every device, time-ordered, as the collector's writer mixes devices per flush.
Then runs, each in a fresh subprocess (so peak RSS is per engine):

* ``spanwatch``: ``analyzer.network.analyse_archive`` (signals, every event rule, hysteresis, merging,
  per-series totals and quantile samples, the job queue's physics, device batches) + the retired overlap
  method (``overlap_method``: overlap join, baselines, inflation, attribution, per-link exposure: what the
  other engines compute too) + ``analyzer.attribution`` (the analysis's blame: physics per step window,
  skew search, reconciliation; timed apart in ``stages``);
* ``pandas``: the same stages in *vectorised* pandas (whole-frame group-by/shift/ffill, numpy
  ``searchsorted`` for the overlap), reading the archive with pyarrow (``bench_analyzer_pandas``);
* ``pandas-hta``: the same stages written the way HolisticTraceAnalysis writes its analyses (per-row
  ``apply``, Python loops over ``groupby`` groups, ``groupby().apply``, per-event ``itertuples``:
  ``bench_analyzer_pandas_hta``); slow, so leave it out (``--engines``) at large sizes;
* ``duckdb``: the same stages in SQL (window functions, an inequality join).

and checks they agree (same event count, total exposed seconds within 1e-6 relative; exit status 1 if not).
Run::

    .venv/bin/python bench/bench_analyzer.py --rows 20_000_000 --steps 1_000_000
    .venv/bin/python bench/bench_analyzer.py --rows 10_000_000 --steps 1_000_000 --keep /tmp/a10m \
        --engines spanwatch duckdb pandas pandas-hta --repeat 3

Peak memory is the child's ``VmHWM`` (``peak_rss_mb``); ``cpu`` is its CPU time, every thread's. Default size runs in a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

T0 = datetime(2026, 11, 30, 0, 0, 0, tzinfo=UTC)
T0_NS = int(T0.timestamp() * 1e9)
INTERFACES = 8
METRICS = (
    ("dci_interface_transmit_bytes_total", True),
    ("dci_queue_dropped_packets_total", True),
    ("dci_pfc_pause_duration_seconds_total", True),
    ("dci_queue_watermark_bytes", False),
    ("dci_interface_oper_up", False),
    ("dci_interface_speed_bytes_per_second", False),
)
RANKS = 8
PENALTY = 0.3


# -- data -------------------------------------------------------------------------------------------------
def shape(rows: int) -> tuple[int, int]:
    """(devices, seconds) giving about ``rows`` readings."""
    per_second_per_device = INTERFACES * len(METRICS)
    devices = max(2, min(64, round((rows / per_second_per_device / 3600) ** 0.5 * 4)))
    seconds = max(60, rows // (devices * per_second_per_device))
    return devices, seconds


def episodes(devices: int, seconds: int, rng: np.random.Generator) -> list[tuple[int, int, int, int]]:
    """(device, interface, start, end) congestion episodes: about one per 5 minutes of run, ~7% of the time."""
    count = max(4, seconds // 300)
    dev = rng.integers(0, devices, count)
    iface = rng.integers(0, INTERFACES, count)
    start = rng.integers(0, max(1, seconds - 60), count)
    return [
        (int(d), int(i), int(s), int(s + rng.integers(5, 40)))
        for d, i, s in zip(dev, iface, start, strict=True)
    ]


def write_archive(root: Path, devices: int, seconds: int, eps: list[tuple[int, int, int, int]]) -> int:
    """Write the archive one hour file at a time, every device in each file (as the collector's writer
    mixes every device in each flush); returns the row count."""
    masks = np.zeros((devices, INTERFACES, seconds + 1), dtype=bool)
    for dev, i, s, e in eps:
        masks[dev, i, s + 1 : e + 1] = True  # the reading at t covers (t-1, t]
    total = 0
    for hour_start in range(0, seconds + 1, 3600):
        t = np.arange(hour_start, min(seconds + 1, hour_start + 3600))
        tables = [_hour_table(d, t, masks[d][:, t]) for d in range(devices)]
        table = pa.concat_tables(tables)
        stamp = datetime.fromtimestamp((T0_NS + int(t[0]) * 10**9) / 1e9, UTC)
        folder = root / f"date={stamp:%Y-%m-%d}" / f"hour={stamp:%H}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.sort_by("time"), folder / "bench-000001.parquet", compression="zstd")
        total += table.num_rows
    return total


def _hour_table(d: int, t: np.ndarray, mask: np.ndarray) -> pa.Table:
    n = len(t)
    columns: dict[str, list[Any]] = {k: [] for k in ("time", "metric", "interface", "value", "counter")}
    for i in range(INTERFACES):
        on = mask[i]
        drops = np.cumsum(np.where(on, 200, 0)) + t[0] * 0
        pfc_us = np.cumsum(np.where(on, 100_000, 0))
        tx = (t.astype(np.uint64) + 1) * np.uint64(6_250_000_000)
        series = {
            "dci_interface_transmit_bytes_total": (tx.astype(np.float64), tx),
            "dci_queue_dropped_packets_total": (drops.astype(np.float64), drops.astype(np.uint64)),
            "dci_pfc_pause_duration_seconds_total": (pfc_us / 1e6, None),
            "dci_queue_watermark_bytes": (np.where(on, 4e6, 2e4), None),
            "dci_interface_oper_up": (np.ones(n), None),
            "dci_interface_speed_bytes_per_second": (np.full(n, 12.5e9), None),
        }
        for metric, (value, counter) in series.items():
            columns["time"].append(T0_NS + t * 10**9)
            columns["metric"].append(np.full(n, metric, dtype=object))
            columns["interface"].append(np.full(n, f"Ethernet{i}", dtype=object))
            columns["value"].append(value)
            columns["counter"].append(counter if counter is not None else np.full(n, None, dtype=object))
    rows = n * INTERFACES * len(METRICS)
    link = np.array([f"link{j % INTERFACES}" for j in range(INTERFACES)], dtype=object)
    times = np.concatenate(columns["time"])
    return pa.table(
        {
            "time": pa.array(times, pa.timestamp("ns", tz="UTC")),
            "received_time": pa.array(times, pa.timestamp("ns", tz="UTC")),
            "device": pa.array(np.full(rows, f"dev{d:03d}", dtype=object), pa.string()),
            "source": pa.array(np.full(rows, "gnmi", dtype=object), pa.string()),
            "metric": pa.array(np.concatenate(columns["metric"]), pa.string()),
            "interface": pa.array(np.concatenate(columns["interface"]), pa.string()),
            **{
                c: pa.nulls(rows, pa.string())
                for c in ("queue", "priority", "lane", "direction", "pool", "component")
            },
            "link": pa.array(np.repeat(link, n * len(METRICS)), pa.string()),
            "value": pa.array(np.concatenate(columns["value"]), pa.float64()),
            "counter": pa.array(np.concatenate(columns["counter"]), pa.uint64()),
        }
    )


def write_steps(path: Path, steps: int, seconds: int, eps: list[tuple[int, int, int, int]]) -> None:
    """``steps`` rows over ``RANKS`` ranks, back to back; a step overlapping an episode is slowed."""
    per_rank = steps // RANKS
    step_s = seconds / per_rank * 0.95
    rng = np.random.default_rng(3)
    ep_start = np.array([e[2] for e in eps], dtype=float)
    ep_end = np.array([e[3] for e in eps], dtype=float)
    frames = []
    for rank in range(RANKS):
        base = np.full(per_rank, step_s) + rng.normal(0, step_s * 0.002, per_rank)
        start = np.concatenate([[0.5], 0.5 + np.cumsum(base)[:-1]])
        # one pass of slowing by episodes (overlap on the un-slowed timeline; enough for a benchmark)
        hit = _overlapping(start, start + base, ep_start, ep_end)
        duration = base + np.where(hit, PENALTY * step_s, 0.0)
        start = np.concatenate([[0.5], 0.5 + np.cumsum(duration)[:-1]])
        frames.append(
            pl.DataFrame(
                {"step": np.arange(per_rank), "rank": rank, "start_s": start, "duration_seconds": duration}
            )
        )
    steps_df = (
        pl.concat(frames)
        .with_columns(
            start_time=(pl.lit(T0_NS) + (pl.col("start_s") * 1e9).cast(pl.Int64)).cast(
                pl.Datetime("ns", "UTC")
            ),
        )
        .with_columns(
            end_time=pl.col("start_time")
            + pl.duration(nanoseconds=(pl.col("duration_seconds") * 1e9).cast(pl.Int64))
        )
    )
    steps_df.drop("start_s").write_parquet(path)


def _overlapping(start: np.ndarray, end: np.ndarray, ep_start: np.ndarray, ep_end: np.ndarray) -> np.ndarray:
    order = np.argsort(ep_start)
    s, e = ep_start[order], np.maximum.accumulate(ep_end[order])
    k = np.searchsorted(s, end, side="right") - 1
    return (k >= 0) & (e[np.clip(k, 0, None)] > start)


# -- engines ------------------------------------------------------------------------------------------------
def run_spanwatch(archive: Path, steps_path: Path) -> dict[str, float]:
    from analyzer_levels import GAP_S
    from overlap_method import overlaps, step_table

    from analyzer import blame, correlate, network
    from analyzer.thresholds import Thresholds

    thresholds = Thresholds(merge_gap_seconds=GAP_S)
    members = pl.DataFrame(
        schema={
            "link": pl.String(),
            "device": pl.String(),
            "interface": pl.String(),
            "rtt_seconds": pl.Float64(),
        }
    )
    begin = time.perf_counter()
    # default batch: the memory budget; the job's class is the bench's queue-less readings' (none)
    net = network.analyse_archive(archive, thresholds, members, job_class="3")
    telemetry_s = time.perf_counter() - begin
    parsed = pl.read_parquet(steps_path).with_columns(
        source_file=pl.lit("bench"), interval_average=pl.lit(False), interval_steps=pl.lit(1, pl.Int64)
    )
    steps = correlate.prepare_steps(parsed)
    pairs = overlaps(steps, net.events.lazy(), 0.0)
    table, attribution = step_table(steps, pairs, thresholds)
    table_df, attribution_df = pl.collect_all([table, attribution])
    links = correlate.link_exposure(attribution_df.lazy(), table_df.lazy(), 64).collect()
    correlate_s = time.perf_counter() - begin - telemetry_s
    # The analysis's blame stages (analyzer.blame, issue 13): physics windows per step, the skew search,
    # reconciliation. The engines' agreement stays on the overlap figures above, which all engines compute.
    blamed = blame.attribute(parsed, net.physics, net.ends, net.round_trips, members, blame.JobFigures())
    blame_s = time.perf_counter() - begin - telemetry_s - correlate_s
    return {
        "events": net.events.height,
        "exposed": float(links["exposed_total_seconds"].sum()),
        "stages": {
            "telemetry_s": round(telemetry_s, 2),
            "overlap_s": round(correlate_s, 2),
            "blame_s": round(blame_s, 2),
            "blamed_rows": blamed.steps.height,
        },
    }


def run_pandas(archive: Path, steps_path: Path) -> dict[str, float]:
    from bench_analyzer_pandas import analyse

    return analyse(archive, steps_path)


def run_pandas_hta(archive: Path, steps_path: Path) -> dict[str, Any]:
    from bench_analyzer_pandas_hta import analyse

    return analyse(archive, steps_path)


def run_duckdb(archive: Path, steps_path: Path) -> dict[str, float]:
    from bench_analyzer_duckdb import analyse

    return analyse(archive, steps_path)


ENGINES: dict[str, Any] = {
    "spanwatch": run_spanwatch,
    "pandas": run_pandas,
    "pandas-hta": run_pandas_hta,
    "duckdb": run_duckdb,
}


def peak_rss_mb() -> float:
    """This process's peak resident memory (``VmHWM``), in MB.

    Not ``ru_maxrss``: Linux carries the pre-``exec`` high-water mark into it, so a child spawned by a parent
    that has just generated 100M rows would report the parent's gigabytes.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def child(engine: str, archive: Path, steps_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    begin, cpu_begin = time.perf_counter(), time.process_time()
    result = ENGINES[engine](archive, steps_path)
    seconds = time.perf_counter() - begin
    # CPU seconds of every thread: steadier than the wall clock on a machine shared with other jobs.
    cpu = time.process_time() - cpu_begin
    peak_mb = peak_rss_mb()
    print(json.dumps({"engine": engine, "seconds": seconds, "cpu_s": cpu, "peak_mb": peak_mb, **result}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=lambda s: int(s.replace("_", "")), default=5_000_000)
    p.add_argument("--steps", type=lambda s: int(s.replace("_", "")), default=200_000)
    p.add_argument("--engines", nargs="+", default=list(ENGINES), choices=list(ENGINES))
    p.add_argument("--repeat", type=int, default=1, help="run every engine this many times (medians)")
    p.add_argument("--keep", type=Path, help="generate into (or reuse) this folder instead of a temp dir")
    p.add_argument(
        "--settle",
        type=float,
        default=15.0,
        help="seconds to wait before each engine: on this VM the pages a 10 GB baseline gives back are "
        "reclaimed for a while after it exits, and the next engine runs 15-30%% slower meanwhile",
    )
    p.add_argument("--child", nargs=3, metavar=("ENGINE", "ARCHIVE", "STEPS"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        archive, steps_path = folder / "archive", folder / "steps.parquet"
        devices, seconds = shape(args.rows)
        if not steps_path.exists():
            begin = time.perf_counter()
            eps = episodes(devices, seconds, np.random.default_rng(1))
            rows = write_archive(archive, devices, seconds, eps)
            write_steps(steps_path, args.steps, seconds, eps)
            print(
                f"generated {rows:,} readings ({devices} devices x {seconds:,} s), {args.steps:,} steps, "
                f"{len(eps)} episodes in {time.perf_counter() - begin:.1f}s",
                flush=True,
            )
        runs: dict[str, list[dict[str, Any]]] = {}
        for _ in range(args.repeat):
            for engine in args.engines:
                time.sleep(args.settle)
                out = subprocess.run(
                    [sys.executable, __file__, "--child", engine, str(archive), str(steps_path)],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if out.returncode:
                    print(f"{engine}: failed\n{out.stderr[-3000:]}", flush=True)
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                runs.setdefault(engine, []).append(r)
                stages = f"  {r['stages']}" if "stages" in r else ""
                print(
                    f"{engine:>10}: {r['seconds']:8.2f} s  cpu {r['cpu_s']:7.2f} s  peak {r['peak_mb']:8.0f} MB  "
                    f"events {r['events']:>6}  exposed {r['exposed']:.6f} s{stages}",
                    flush=True,
                )
        report(runs)


def report(runs: dict[str, list[dict[str, Any]]]) -> None:
    """Medians per engine, ratios against spanwatch, and the agreement check (exit 1 on disagreement)."""
    med = {
        engine: {k: float(np.median([r[k] for r in rs])) for k in ("seconds", "cpu_s", "peak_mb")}
        for engine, rs in runs.items()
    }
    for engine, m in med.items():
        print(
            f"median {engine:>10}: {m['seconds']:8.2f} s  cpu {m['cpu_s']:7.2f} s  peak {m['peak_mb']:8.0f} MB  "
            f"(n={len(runs[engine])})"
        )
    if "spanwatch" in med:
        for other in med:
            if other != "spanwatch":
                ratio = med[other]["seconds"] / med["spanwatch"]["seconds"]
                cpu_ratio = med[other]["cpu_s"] / med["spanwatch"]["cpu_s"]
                print(f"spanwatch vs {other}: {ratio:.2f}x faster ({cpu_ratio:.2f}x less CPU)")
    results = [r for rs in runs.values() for r in rs]
    if results:
        ref = results[0]
        bad = [
            r["engine"]
            for r in results
            if r["events"] != ref["events"]
            or abs(r["exposed"] - ref["exposed"]) > 1e-6 * max(1.0, abs(ref["exposed"]))
        ]
        if bad:
            print(f"DISAGREE with {ref['engine']}: {sorted(set(bad))}", flush=True)
            sys.exit(1)
        print(f"all engines agree: {ref['events']} events, {ref['exposed']:.6f} exposed seconds")


if __name__ == "__main__":
    main()
