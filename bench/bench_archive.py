"""Benchmark: the archive's Parquet writer against polars writing the same rows (issue 33).

Each writer runs in a fresh interpreter, so its memory is what a collector that archives pays:
- ``spanwatch``: ``collector.exporters.archive`` as the collector runs it (rows to columns, then
  ``collector.exporters.parquet.encode``);
- ``polars``: the same rows as a polars frame (``pl.Series`` per column, label columns gathered per label
  set, as the collector's writer did up to 2026-12-06), written with ``write_parquet(compression="zstd")``.

Rows are the shape an SNMP collector archives: ``--devices`` devices x ``--interfaces`` interfaces x nine
interface counters, one flush a poll, ``--flushes`` flushes. Printed per writer: RSS after import, peak RSS
(``VmHWM``) after the flushes, CPU per row over the flushes (``time.process_time``: encoding and
compression), bytes a row on disk, and each file read back with polars to check the row count; then
spanwatch / polars ratios. Run: ``.venv/bin/python bench/bench_archive.py``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
from pathlib import Path

sys.path.insert(0, {root!r})

def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

writer, devices, interfaces, flushes, folder = {args!r}
base = rss("VmRSS:")
if writer == "spanwatch":
    from collector.exporters import archive, parquet

    def write(rows, path):
        buffer = archive.Buffer()
        buffer.recent = rows
        Path(path).write_bytes(parquet.encode(archive._columns(buffer)))
else:
    import polars as pl
    from collector.contracts import archive as layout
    from collector.contracts.catalog import SERIES_LABELS

    TYPES = {{"timestamp": pl.Datetime("ns", "UTC"), "string": pl.String(), "float64": pl.Float64(),
              "uint64": pl.UInt64()}}

    def write(rows, path):
        time_, received, device, source, metric, lbls, link, value, counter = zip(*rows, strict=True)
        distinct = {{}}
        ids = pl.Series([distinct.setdefault(p, len(distinct)) for p in lbls], dtype=pl.UInt32())
        spread = [dict(p) for p in distinct]
        data = {{"time": time_, "received_time": received, "device": device, "source": source,
                "metric": metric, "link": link, "value": value, "counter": counter}}
        for name in SERIES_LABELS:
            data[name] = pl.Series(name, [d.get(name) for d in spread], pl.String()).gather(ids)
        cols = []
        for name, kind in layout.COLUMNS:
            if kind == "timestamp":
                cols.append(pl.Series(name, data[name], pl.Int64).cast(TYPES[kind]))
            else:
                cols.append(pl.Series(name, data[name], TYPES[kind]))
        pl.DataFrame(cols).write_parquet(path, compression="zstd")

imported = rss("VmRSS:")
metrics = ["dci_interface_receive_bytes_total", "dci_interface_transmit_bytes_total",
           "dci_interface_receive_packets_total", "dci_interface_transmit_packets_total",
           "dci_interface_receive_discards_total", "dci_interface_transmit_discards_total",
           "dci_interface_receive_errors_total", "dci_interface_transmit_errors_total",
           "dci_interface_receive_fcs_errors_total"]
t0 = 1_780_000_000 * 10**9
cpu = 0.0
rows_total = 0
size = 0
for k in range(flushes):
    rows = []
    for d in range(devices):
        now = t0 + k * 10 * 10**9 + d * 1_000_000
        for i in range(interfaces):
            labels = (("interface", f"Ethernet{{i // 8 + 1}}/{{i % 8 + 1}}"),)
            link = f"dc{{d % 4}}-dc{{(d + 1) % 4}}-{{i}}" if i < 8 else None
            for j, m in enumerate(metrics):
                total = (k + 1) * (d * 7919 + i * 104729 + j * 13) * 1000
                rows.append((now, now + 2_000_000, f"sw{{d:03d}}", "snmp", m, labels, link, float(total), total))
    path = Path(folder) / f"{{writer}}-{{k}}.parquet"
    start = time.process_time()
    write(rows, path)
    cpu += time.process_time() - start
    rows_total += len(rows)
    size += path.stat().st_size
peak = rss("VmHWM:")
print(json.dumps({{"writer": writer, "base": base, "imported": imported, "peak": peak,
                  "cpu_per_row": cpu / rows_total, "bytes_per_row": size / rows_total, "rows": rows_total}}))
"""


def run(writer: str, devices: int, interfaces: int, flushes: int) -> dict[str, float]:
    """One writer in a fresh interpreter; its figures, the files checked with polars."""
    with tempfile.TemporaryDirectory() as folder:
        code = CHILD.format(root=str(ROOT), args=(writer, devices, interfaces, flushes, folder))
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
        figures: dict[str, float] = json.loads(out.stdout)
        import polars as pl

        read = pl.scan_parquet(f"{folder}/*.parquet").select(pl.len()).collect().item()
        if read != figures["rows"]:
            raise SystemExit(f"{writer}: {read} rows read back, {figures['rows']} written")
    return figures


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devices", type=int, default=200)
    p.add_argument("--interfaces", type=int, default=64)
    p.add_argument("--flushes", type=int, default=6)
    p.add_argument("--rounds", type=int, default=3, help="runs of each writer, alternating; medians printed")
    a = p.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"spanwatch": [], "polars": []}
    for _ in range(a.rounds):
        for writer in runs:
            runs[writer].append(run(writer, a.devices, a.interfaces, a.flushes))
    mb = 1024 * 1024

    def median(writer: str, key: str) -> float:
        values = sorted(r[key] for r in runs[writer])
        return values[len(values) // 2]

    rows = runs["spanwatch"][0]["rows"] / a.flushes
    print(
        f"{a.devices} devices x {a.interfaces} interfaces x 9 counters: {rows:,.0f} rows a flush, {a.flushes} flushes"
    )
    print(f"{'figure (median of ' + str(a.rounds) + ')':32} {'spanwatch':>12} {'polars':>12} {'ratio':>8}")
    figures = [
        ("interpreter, MB", lambda w: median(w, "base") / mb),
        ("RSS after import, MB", lambda w: median(w, "imported") / mb),
        ("peak RSS after the flushes, MB", lambda w: median(w, "peak") / mb),
        ("writer's RSS over the interpreter, MB", lambda w: (median(w, "peak") - median(w, "base")) / mb),
        ("CPU per row, us", lambda w: median(w, "cpu_per_row") * 1e6),
        ("bytes a row on disk", lambda w: median(w, "bytes_per_row")),
    ]
    for name, get in figures:
        ours, theirs = get("spanwatch"), get("polars")
        print(f"{name:32} {ours:12.2f} {theirs:12.2f} {ours / theirs:8.2f}")


if __name__ == "__main__":
    main()
