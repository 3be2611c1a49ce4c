"""Our Kineto figures against HolisticTraceAnalysis's own, run here on the same traces (skipped without HTA).

Compared per rank and per step (HTA's ``iteration`` column, which it derives the same way: a GPU kernel
belongs to the ProfilerStep of the CPU call that launched it), and per rank over HTA's default window (every
step but the last): communication time, compute time, overlap, exposed communication. Tolerance 1%.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from analyzer import gpu_time
from analyzer.ingest import kineto

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    hta_analysis = pytest.importorskip("hta.trace_analysis")
    hta_breakdown = pytest.importorskip("hta.analyzers.breakdown_analysis")
    hta_communication = pytest.importorskip("hta.analyzers.communication_analysis")

TRACES = ["nccl_data.json.gz", "sampled_rank-0.json.gz", "sampled_rank-1.json.gz"]
RELATIVE = 0.01
ABSOLUTE_SECONDS = 2e-6  # HTA works in whole microseconds


def _close(ours: float, theirs: float) -> bool:
    return abs(ours - theirs) <= max(RELATIVE * abs(theirs), ABSOLUTE_SECONDS)


@pytest.fixture
def quiet() -> Iterator[None]:
    """HTA and pandas warn freely; the suite turns warnings into errors, so silence them around HTA calls."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _hta_figures(trace: Any) -> dict[str, float]:
    """Seconds of communication, compute, overlapped and exposed communication from HTA's own analyzers."""
    kinds, _ = hta_breakdown.BreakdownAnalysis.get_gpu_kernel_breakdown(trace, visualize=False)
    microseconds = dict(zip(kinds["kernel_type"], kinds["sum"], strict=True))
    communication = sum(v for k, v in microseconds.items() if "COMMUNICATION" in k)
    overlapped = sum(v for k, v in microseconds.items() if "COMMUNICATION" in k and "COMPUTATION" in k)
    temporal = hta_breakdown.BreakdownAnalysis.get_temporal_breakdown(trace, visualize=False)
    overlap = hta_communication.CommunicationAnalysis.get_comm_comp_overlap(trace, visualize=False)
    return {
        "communication_seconds": communication / 1e6,
        "overlapped_seconds": overlapped / 1e6,
        "exposed_communication_seconds": (communication - overlapped) / 1e6,
        "compute_seconds": float(temporal["compute_time(us)"].iloc[0]) / 1e6,
        "overlap_pctg": float(overlap["comp_comm_overlap_pctg"].iloc[0]),
    }


def _one_step(trace: Any, step: int) -> Any:
    """A shallow copy of HTA's Trace keeping only the events HTA assigned to ``step``."""
    narrowed = copy.copy(trace)
    narrowed.traces = {rank: df[df["iteration"] == step] for rank, df in trace.traces.items()}
    return narrowed


ALL_FIGURES = (
    "communication_seconds",
    "overlapped_seconds",
    "exposed_communication_seconds",
    "compute_seconds",
)


def _assert_agree(
    ours: dict[str, Any], theirs: dict[str, float], where: str, keys: tuple[str, ...] = ALL_FIGURES
) -> None:
    ours_pctg = 100 * ours["overlapped_seconds"] / ours["communication_seconds"]
    # HTA rounds its percentage to 2 decimals.
    assert abs(ours_pctg - theirs["overlap_pctg"]) <= max(RELATIVE * theirs["overlap_pctg"], 0.01), where
    for key in keys:
        assert _close(ours[key], theirs[key]), (where, key, ours[key], theirs[key])


@pytest.mark.parametrize("name", TRACES)
def test_per_step_figures_agree_with_hta(training_data: Path, name: str, quiet: None) -> None:
    path = training_data / "hta" / name
    analysis = hta_analysis.TraceAnalysis(
        trace_files={0: str(path)}, trace_dir=str(path.parent), include_last_profiler_step=True
    )
    ours = kineto.parse(path).table("kineto_steps")
    assert ours.height == len(analysis.t.get_iterations(0))
    for row in ours.iter_rows(named=True):
        theirs = _hta_figures(_one_step(analysis.t, row["step"]))
        _assert_agree(row, theirs, f"{name} step {row['step']}")


@pytest.mark.parametrize("name", TRACES)
def test_default_window_agrees_with_hta(training_data: Path, name: str, quiet: None) -> None:
    path = training_data / "hta" / name
    analysis = hta_analysis.TraceAnalysis(trace_files={0: str(path)}, trace_dir=str(path.parent))
    # HTA's default drops the last profiler step; take the union over the others, as one window.
    events, _ = kineto.events_frame(kineto.read_trace(path), path)
    steps = kineto.profiler_steps(events)
    gpu = kineto.gpu_events(events, steps).filter(pl.col("step") < steps["step"].max())
    ours = gpu_time.breakdown(gpu.with_columns(rank=pl.lit(0)).lazy(), ["rank"]).collect().row(0, named=True)
    _assert_agree(ours, _hta_figures(analysis.t), name)


@pytest.mark.parametrize("name", TRACES)
def test_exact_nanoseconds_agree_with_hta_without_rounding(
    training_data: Path, name: str, quiet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    path = training_data / "hta" / name
    analysis = hta_analysis.TraceAnalysis(
        trace_files={0: str(path)}, trace_dir=str(path.parent), include_last_profiler_step=True
    )
    ours = kineto.parse(path, whole_microseconds=False).table("kineto_steps")
    for row in ours.iter_rows(named=True):
        theirs = _hta_figures(_one_step(analysis.t, row["step"]))
        # HTA's kernel-type breakdown truncates every overlap segment to whole microseconds even with
        # rounding disabled, so only its untruncated figures (overlap %, compute time) are compared here.
        _assert_agree(row, theirs, f"{name} step {row['step']} (ns)", keys=("compute_seconds",))
