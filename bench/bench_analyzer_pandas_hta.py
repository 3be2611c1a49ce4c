"""The benchmark's pandas baseline written the way HolisticTraceAnalysis (HTA) writes its analyses.

``bench_analyzer_pandas`` is the *vectorised* pandas baseline (whole-frame group-by/shift/ffill, numpy
``searchsorted``). This one computes the same thing (same rules, same outputs) with the idioms HTA's own
analyzers use (``hta/analyzers/trace_counters.py``, ``communication_analysis.py``, ``hta/common/trace.py``,
``hta/utils/utils.py``):

* per-row Python functions with ``Series.apply(lambda ...)`` to classify rows (HTA maps every event's name
  and kernel type, and rounds every timestamp, that way);
* a Python loop over ``DataFrame.groupby(...)`` with vectorised work inside each group (HTA's
  ``for stream, stream_df in merged_df.groupby("stream"): stream_df["queue_length"] = ...cumsum()``), the
  per-group results concatenated;
* interval merging as HTA's ``merge_kernel_intervals`` (``ts > end.shift().cummax()`` then a group-by);
* assigning events to steps row by row (HTA's ``_get_profiler_step`` applied per event), here one boolean
  mask over the steps table per event (``itertuples``), which is kinder than HTA's Python loop over steps;
* ``groupby(...).apply(python function)`` for per-step shares and per-link totals, ``merge`` for joins.

It is the slow idiom the issue's "the HolisticTraceAnalysis way" refers to; the vectorised baseline is kept
alongside so both ratios can be reported. ``STAGES`` holds the seconds spent in each stage of the last run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
from analyzer_levels import GAP_S
from bench_analyzer_pandas import COUNTERS, KEYS, RULES, WEIGHTS

STAGES: dict[str, float] = {}
INTERVAL_METRICS = {metric for metric, rule in RULES.items() if rule[4]}


def _stage(name: str, begin: float) -> float:
    now = time.perf_counter()
    STAGES[name] = STAGES.get(name, 0.0) + now - begin
    return now


def load(archive: Path) -> pd.DataFrame:
    metrics = [*list(RULES), "dci_interface_transmit_bytes_total"]
    table = ds.dataset(archive, format="parquet", partitioning="hive").to_table(
        columns=[*KEYS, "time", "value", "counter"], filter=ds.field("metric").isin(metrics)
    )
    return table.to_pandas()


def classify(df: pd.DataFrame) -> pd.DataFrame:
    """Per-row Python classification, as HTA labels each kernel (``df["name"].apply(lambda ...)``)."""
    df["is_counter"] = df["metric"].apply(lambda m: m in COUNTERS)
    df["kind"] = df["metric"].apply(lambda m: RULES[m][0] if m in RULES else None)
    return df


def _series_signals(g: pd.DataFrame) -> pd.DataFrame:
    """One series: reset-aware counter rates, previous/next reading times."""
    g = g.sort_values("time")
    g["prev_time"] = g["time"].shift(1)
    g["next_time"] = g["time"].shift(-1)
    if g["is_counter"].iloc[0]:
        exact = g["counter"].astype("float64")
        prev_exact = exact.shift(1)
        inc_exact = np.where(exact >= prev_exact, exact - prev_exact, exact)
        prev_value = g["value"].shift(1)
        inc_value = np.where(g["value"] >= prev_value, g["value"] - prev_value, g["value"])
        increase = pd.Series(np.where(exact.notna(), inc_exact, inc_value), index=g.index)
        increase[g["prev_time"].isna()] = np.nan
        g["increase"] = increase
        g["value"] = increase / (g["time"] - g["prev_time"]).dt.total_seconds()
    else:
        g["increase"] = np.nan
    return g


def signals(df: pd.DataFrame) -> pd.DataFrame:
    parts = [_series_signals(g) for _, g in df.groupby(KEYS, sort=False, dropna=False)]
    return pd.concat(parts)


def _series_runs(g: pd.DataFrame) -> pd.DataFrame:
    """One series of a rule's metric: hysteresis state, then runs of "on" readings as (start, end)."""
    kind, enter, leave, low, interval = RULES[g["metric"].iloc[0]]
    v = g["value"]
    on, off = (v < enter, v >= leave) if low else (v >= enter, v < leave)
    state = pd.Series(
        np.where(v.isna(), np.nan, np.where(on, 1.0, np.where(off, 0.0, np.nan))), index=g.index
    )
    g = g.assign(on=state.ffill().fillna(0).astype(bool))
    if interval:
        g["start"] = g["prev_time"].fillna(g["time"])
        g["end"] = g["time"]
    else:
        g["start"] = (g["prev_time"] + (g["time"] - g["prev_time"]) / 2).fillna(g["time"])
        g["end"] = (g["time"] + (g["next_time"] - g["time"]) / 2).fillna(g["time"])
    g["run"] = (g["on"] != g["on"].shift(1)).cumsum()
    runs = g[g["on"]].groupby("run").agg(start=("start", "min"), end=("end", "max")).reset_index(drop=True)
    runs["kind"] = kind
    for column in ("link", "device", "interface"):
        runs[column] = g[column].iloc[0]
    return runs


def merge_intervals(group: pd.DataFrame) -> pd.DataFrame:
    """HTA's ``merge_kernel_intervals``, bridging gaps up to ``GAP_S``."""
    group = group.sort_values("start")
    reach = group["end"].shift().cummax()
    group["block"] = ((group["start"] > reach + pd.Timedelta(seconds=GAP_S)) | reach.isna()).cumsum()
    return group.groupby("block", as_index=False).agg({"start": "min", "end": "max"}).drop(columns="block")


def events(sig: pd.DataFrame) -> pd.DataFrame:
    ruled = sig[sig["kind"].notna()]
    runs = [_series_runs(g) for _, g in ruled.groupby(KEYS, sort=False, dropna=False)]
    raw = pd.concat([r for r in runs if len(r)], ignore_index=True)
    merged = []
    for (kind, link, device, interface), group in raw.groupby(
        ["kind", "link", "device", "interface"], sort=False, dropna=False
    ):
        m = merge_intervals(group[["start", "end"]].copy())
        m["kind"], m["link"], m["device"], m["interface"] = kind, link, device, interface
        merged.append(m)
    return pd.concat(merged, ignore_index=True).sort_values("start").reset_index(drop=True)


def overlaps(steps: pd.DataFrame, ev: pd.DataFrame) -> pd.DataFrame:
    """Each event's steps, one event at a time (HTA assigns each event its profiler step row by row)."""
    out = []
    for e in ev.itertuples(index=False):
        hit = steps[(steps["start_time"] <= e.end) & (steps["end_time"] >= e.start)]
        pair = hit[["step", "rank"]].copy()
        o_end = hit["end_time"].where(hit["end_time"] < e.end, e.end)
        o_start = hit["start_time"].where(hit["start_time"] > e.start, e.start)
        pair["overlap"] = ((o_end - o_start).dt.total_seconds()).clip(lower=1e-9)
        pair["kind"] = e.kind
        pair["link"] = e.link
        out.append(pair)
    return pd.concat(out, ignore_index=True)


def _shares(g: pd.DataFrame) -> pd.Series:
    w = g["overlap"] * g["kind"].apply(lambda k: WEIGHTS.get(k, 0.5))
    return w / w.sum()


def correlate(steps: pd.DataFrame, pairs: pd.DataFrame) -> float:
    touched = pairs[["step", "rank"]].drop_duplicates().assign(touched=True)
    s = steps.merge(touched, on=["step", "rank"], how="left")
    s["touched"] = s["touched"].fillna(False).astype(bool)
    per_rank = []
    for _, g in s.groupby("rank", sort=False):  # baseline and MAD of clean steps, rank by rank
        clean = g[~g["touched"]]
        baseline = clean["duration_seconds"].median()
        mad = (clean["duration_seconds"] - baseline).abs().median()
        g = g.assign(baseline=baseline, mad=mad)
        g["inflation"] = (g["duration_seconds"] - baseline).clip(lower=0)
        g["inflated"] = g["inflation"] > max(baseline * 0.05, mad * 1.4826 * 3)
        per_rank.append(g)
    s = pd.concat(per_rank)
    s["given"] = s["inflation"]  # every overlapping step gives its inflation (as spanwatch does)
    pairs = pairs.copy()
    pairs["share"] = pairs.groupby(["step", "rank"], group_keys=False)[["overlap", "kind"]].apply(_shares)
    pairs = pairs.merge(s[["step", "rank", "given"]], on=["step", "rank"])
    pairs["attributed"] = pairs["share"] * pairs["given"]
    ranks = steps.groupby("step").size().rename("ranks")
    pairs = pairs.merge(ranks, left_on="step", right_index=True)
    per_link = pairs.groupby("link")[["attributed", "ranks"]].apply(
        lambda g: float((g["attributed"] / g["ranks"]).sum())
    )
    return float(per_link.sum())


def analyse(archive: Path, steps_path: Path) -> dict[str, Any]:
    STAGES.clear()
    begin = time.perf_counter()
    df = load(archive)
    begin = _stage("load", begin)
    df = classify(df)
    begin = _stage("classify (row apply)", begin)
    sig = signals(df)
    del df
    begin = _stage("signals (loop over series)", begin)
    totals = sig.groupby(["device", "interface", "link", "metric"], dropna=False).agg(
        increase=("increase", "sum"), max=("value", "max"), min=("value", "min")
    )
    begin = _stage("totals", begin)
    ev = events(sig)
    del sig
    begin = _stage("events (loop over series, merge)", begin)
    steps = pd.read_parquet(steps_path)
    pairs = overlaps(steps, ev)
    begin = _stage("overlap (per event)", begin)
    exposed = correlate(steps, pairs)
    _stage("correlate (groupby.apply)", begin)
    return {
        "events": len(ev),
        "exposed": exposed,
        "series": len(totals),
        "stages": {k: round(v, 2) for k, v in STAGES.items()},
    }
