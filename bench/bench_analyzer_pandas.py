"""The benchmark's vectorised pandas baseline: whole-frame pandas + numpy, no per-row or per-group Python.

(``bench_analyzer_pandas_hta`` is the same analysis in HolisticTraceAnalysis's own idioms, much slower.)

Same stages and rules as spanwatch for the metrics the benchmark archive holds: reset-aware counter rates,
hysteresis (drops, PFC pause share, queue watermark, oper-status), runs, merging within a gap, the
steps x events overlap, clean-step baselines, inflation, attribution weighted by kind, per-link totals.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
from analyzer_levels import DROP_ENTER, DROP_EXIT, GAP_S, PFC_ENTER, PFC_EXIT, QUEUE_ENTER, QUEUE_EXIT

RULES = {  # metric -> (kind, enter, exit, low_is_bad, interval semantics)
    "dci_queue_dropped_packets_total": ("drops", DROP_ENTER, DROP_EXIT, False, True),
    "dci_pfc_pause_duration_seconds_total": ("pfc", PFC_ENTER, PFC_EXIT, False, True),
    "dci_queue_watermark_bytes": ("queue", QUEUE_ENTER, QUEUE_EXIT, False, True),
    "dci_interface_oper_up": ("wave_down", 0.5, 0.5, True, False),
}
COUNTERS = {
    "dci_interface_transmit_bytes_total",
    "dci_queue_dropped_packets_total",
    "dci_pfc_pause_duration_seconds_total",
}
WEIGHTS = {"drops": 1.0, "pfc": 1.0, "wave_down": 1.0, "queue": 0.5}
KEYS = ["device", "interface", "queue", "priority", "direction", "link", "metric"]


def signals(df: pd.DataFrame) -> pd.DataFrame:
    df = df.sort_values([*KEYS, "time"], kind="stable").reset_index(drop=True)
    g = df.groupby(KEYS, sort=False, dropna=False)
    df["prev_time"] = g["time"].shift(1)
    df["next_time"] = g["time"].shift(-1)
    exact = df["counter"].astype("float64")
    prev_exact = g["counter"].shift(1).astype("float64")
    prev_value = g["value"].shift(1)
    inc_exact = np.where(exact >= prev_exact, exact - prev_exact, exact)
    inc_value = np.where(df["value"] >= prev_value, df["value"] - prev_value, df["value"])
    increase = np.where(exact.notna(), inc_exact, inc_value)
    seconds = (df["time"] - df["prev_time"]).dt.total_seconds()
    is_counter = df["metric"].isin(COUNTERS)
    df["increase"] = np.where(is_counter & df["prev_time"].notna(), increase, np.nan)
    df["value"] = np.where(is_counter, df["increase"] / seconds, df["value"])
    return df


def events(sig: pd.DataFrame) -> pd.DataFrame:
    parts = []
    for metric, (kind, enter, leave, low, interval) in RULES.items():
        s = sig[sig["metric"] == metric].copy()
        if s.empty:
            continue
        v = s["value"]
        on, off = (v < enter, v >= leave) if low else (v >= enter, v < leave)
        state = pd.Series(
            np.where(v.isna(), np.nan, np.where(on, 1.0, np.where(off, 0.0, np.nan))), index=s.index
        )
        s["on"] = state.groupby([s[k] for k in KEYS], sort=False, dropna=False).ffill().fillna(0).astype(bool)
        if interval:
            s["start"] = s["prev_time"].fillna(s["time"])
            s["end"] = s["time"]
        else:
            s["start"] = (s["prev_time"] + (s["time"] - s["prev_time"]) / 2).fillna(s["time"])
            s["end"] = (s["time"] + (s["next_time"] - s["time"]) / 2).fillna(s["time"])
        s["run"] = (s["on"] != s["on"].shift(1)).cumsum()
        runs = (
            s[s["on"]]
            .groupby([*KEYS, "run"], sort=False, dropna=False)
            .agg(start=("start", "min"), end=("end", "max"))
            .reset_index()
        )
        runs["kind"] = kind
        parts.append(runs[["kind", "link", "device", "interface", "start", "end"]])
    raw = pd.concat(parts, ignore_index=True)
    group = ["kind", "link", "device", "interface"]
    raw = raw.sort_values([*group, "start"]).reset_index(drop=True)
    reach = raw.groupby(group, sort=False, dropna=False)["end"].transform(lambda x: x.cummax().shift(1))
    raw["block"] = ((raw["start"] > reach + pd.Timedelta(seconds=GAP_S)) | reach.isna()).astype(int)
    raw["block"] = raw.groupby(group, sort=False, dropna=False)["block"].cumsum()
    merged = raw.groupby([*group, "block"], sort=False, dropna=False).agg(
        start=("start", "min"), end=("end", "max")
    )
    return merged.reset_index().drop(columns="block").sort_values("start").reset_index(drop=True)


def overlaps(steps: pd.DataFrame, ev: pd.DataFrame) -> pd.DataFrame:
    """Per rank, steps are sorted and disjoint: two searchsorted calls find each event's steps."""
    out = []
    ev_start = ev["start"].to_numpy("datetime64[ns]")
    ev_end = ev["end"].to_numpy("datetime64[ns]")
    for rank, s in steps.groupby("rank", sort=False):
        s = s.sort_values("start_time")
        starts = s["start_time"].to_numpy("datetime64[ns]")
        ends = s["end_time"].to_numpy("datetime64[ns]")
        lo = np.searchsorted(ends, ev_start, side="left")
        hi = np.searchsorted(starts, ev_end, side="right")
        counts = np.clip(hi - lo, 0, None)
        ev_index = np.repeat(np.arange(len(ev)), counts)
        step_index = np.concatenate(
            [np.arange(a, b) for a, b in zip(lo, hi, strict=True) if b > a] or [np.array([], int)]
        )
        pair = pd.DataFrame({"step": s["step"].to_numpy()[step_index], "rank": rank})
        o_end = np.minimum(ends[step_index], ev_end[ev_index])
        o_start = np.maximum(starts[step_index], ev_start[ev_index])
        pair["overlap"] = np.clip((o_end - o_start).astype("int64") / 1e9, 1e-9, None)
        pair["kind"] = ev["kind"].to_numpy()[ev_index]
        pair["link"] = ev["link"].to_numpy()[ev_index]
        out.append(pair)
    return pd.concat(out, ignore_index=True)


def correlate(steps: pd.DataFrame, pairs: pd.DataFrame) -> float:
    touched = pairs[["step", "rank"]].drop_duplicates().assign(touched=True)
    s = steps.merge(touched, on=["step", "rank"], how="left")
    s["touched"] = s["touched"].fillna(False).astype(bool)
    base = s[~s["touched"]].groupby("rank")["duration_seconds"].median().rename("baseline")
    s = s.join(base, on="rank")
    s["dev"] = (s["duration_seconds"] - s["baseline"]).abs()
    mad = s[~s["touched"]].groupby("rank")["dev"].median().rename("mad")
    s = s.join(mad, on="rank")
    s["inflation"] = (s["duration_seconds"] - s["baseline"]).clip(lower=0)
    floor = np.maximum(s["baseline"] * 0.05, s["mad"] * 1.4826 * 3)
    s["inflated"] = s["inflation"] > floor
    s["given"] = s["inflation"]  # every overlapping step gives its inflation (as spanwatch does)
    pairs = pairs.copy()
    pairs["w"] = pairs["overlap"] * pairs["kind"].map(WEIGHTS).fillna(0.5)
    pairs["share"] = pairs["w"] / pairs.groupby(["step", "rank"])["w"].transform("sum")
    pairs = pairs.merge(s[["step", "rank", "given"]], on=["step", "rank"])
    pairs["attributed"] = pairs["share"] * pairs["given"]
    ranks = steps.groupby("step").size().rename("ranks")
    per = pairs.groupby(["step", "link"])["attributed"].sum().reset_index().join(ranks, on="step")
    per["exposed"] = per["attributed"] / per["ranks"]
    return float(per.groupby("link")["exposed"].sum().sum())


def analyse(archive: Path, steps_path: Path) -> dict[str, float]:
    metrics = [*list(RULES), "dci_interface_transmit_bytes_total"]
    table = ds.dataset(archive, format="parquet", partitioning="hive").to_table(
        columns=[
            "time",
            "device",
            "metric",
            "interface",
            "queue",
            "priority",
            "direction",
            "link",
            "value",
            "counter",
        ],
        filter=ds.field("metric").isin(metrics),
    )
    df = table.to_pandas()
    sig = signals(df)
    totals = sig.groupby(["device", "interface", "link", "metric"], dropna=False).agg(
        increase=("increase", "sum"), max=("value", "max"), min=("value", "min")
    )
    ev = events(sig)
    steps = pd.read_parquet(steps_path)
    pairs = overlaps(steps, ev)
    exposed = correlate(steps, pairs)
    return {"events": len(ev), "exposed": exposed, "series": len(totals)}
