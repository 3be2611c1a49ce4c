"""nccl-tests results as an analysis table: bus bandwidth per collective and message size.

nccl-tests prints, per message size, the mean time, the algorithm bandwidth (bytes / time) and the bus
bandwidth (algbw times the collective's bus factor, e.g. 2(n-1)/n for all-reduce: what each rank's link
carried, comparable across rank counts and with a link's line rate). Out-of-place and in-place runs are
kept side by side; several files or runs of the same collective stay apart by ``source_file``. bigscience's
``all_reduce_bench.py`` output gives one out-of-place row per rank and trial, averaged the same way.
"""

from __future__ import annotations

import polars as pl

from analyzer import schemas
from analyzer.ingest import allreduce_bench, nccl_tests

BENCHMARKS = (nccl_tests.NAME, allreduce_bench.NAME)


def bus_bandwidth(collectives: pl.DataFrame, ranks: pl.DataFrame) -> pl.DataFrame:
    """One row per (file, collective, dtype, size) of nccl-tests (or ``all_reduce_bench.py``) output.

    Args:
        collectives: the parsed ``collectives`` table (other formats' rows are ignored).
        ranks: the parsed ``nccl_ranks`` table (nccl-tests' device list gives the rank count, else NCCL's
            own ``nranks`` in the same file's NCCL_DEBUG=INFO lines).

    Returns:
        ``schemas.BUS_BANDWIDTH`` rows, sorted by file, collective and size.
    """
    rows = collectives.filter(pl.col("format").is_in(BENCHMARKS))
    if rows.height == 0:
        return pl.DataFrame(schema=schemas.BUS_BANDWIDTH)
    in_place = pl.col("in_place").fill_null(False)
    keys = ["source_file", pl.col("collective").fill_null("unknown"), pl.col("dtype"), "size_bytes"]
    table = rows.group_by(keys, maintain_order=True).agg(
        time_seconds=pl.col("duration_seconds").filter(~in_place).mean(),
        algbw_gbps=pl.col("algbw_gbps").filter(~in_place).mean(),
        busbw_gbps=pl.col("busbw_gbps").filter(~in_place).mean(),
        busbw_in_place_gbps=pl.col("busbw_gbps").filter(in_place).mean(),
        wrong=pl.col("wrong").sum(),
        runs=pl.len().cast(pl.Int64()),
    )
    listed = pl.col("rank").filter(pl.col("format") == nccl_tests.NAME).n_unique()
    per_file = ranks.group_by("source_file").agg(
        ranks=pl.when(listed > 0).then(listed).otherwise(pl.col("nranks").max()).cast(pl.Int64())
    )
    table = table.join(per_file, on="source_file", how="left")
    return (
        schemas.conform_lazy(schemas.BUS_BANDWIDTH, table.lazy())
        .sort("source_file", "collective", "size_bytes")
        .collect()
    )
