"""A set of Kineto traces is analysed one trace at a time: the analysis's peak memory does not grow with the
number of traces beyond what each rank yields (issue 31: thousands of ranks). Each set is one small trace
cut from a real one (HolisticTraceAnalysis' ``sampled_rank-0``: its profiler steps, its NCCL kernels, every
tenth other kernel and their launches) linked once per rank, its rank taken from the link's name, and
analysed whole (parse, blame, measures, outputs written) in its own process so its peak RSS is its own."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

ANALYSE = """
import json, resource, sys
from pathlib import Path
from analyzer.analysis import Analysis, AnalysisInputs
paths = tuple(sorted(Path(sys.argv[1]).glob("*.json.gz")))
result = Analysis(AnalysisInputs(logs=paths)).run()
result.write(Path(sys.argv[2]))
print(json.dumps({"peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "files": len(result.summary["inputs"]["files"]), "steps": result.steps.height}))
"""


def _analyse(folder: Path) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", ANALYSE, str(folder), str(folder.with_suffix(".out"))],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


def _small_trace(training_data: Path, path: Path) -> Path:
    """The real trace cut to about 300 events, so that hundreds of ranks parse in seconds."""
    trace = json.loads(gzip.decompress((training_data / "hta" / "sampled_rank-0.json.gz").read_bytes()))
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    kept = [e for i, e in enumerate(kernels) if "nccl" in e["name"].lower() or i % 10 == 0]
    launches = {e["args"].get("correlation") for e in kept}

    def keep(event: dict[str, object]) -> bool:
        category, name = event.get("cat"), str(event.get("name", ""))
        if category == "cuda_runtime":
            return event.get("args", {}).get("correlation") in launches  # type: ignore[union-attr]
        return category in (None, "Trace") or (category == "user_annotation" and "ProfilerStep" in name)

    trace["traceEvents"] = [e for e in trace["traceEvents"] if keep(e)] + kept
    trace.get("distributedInfo", {}).pop("rank", None)  # each link's rank is then its file name's
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    return path


def _set(trace: Path, folder: Path, ranks: int) -> Path:
    folder.mkdir()
    for rank in range(ranks):
        (folder / f"rank{rank:05d}.json.gz").symlink_to(trace)
    return folder


@pytest.mark.timeout(900)
def test_peak_memory_grows_only_by_what_each_trace_yields(training_data: Path, tmp_path: Path) -> None:
    trace = _small_trace(training_data, tmp_path / "small.json.gz")
    few = _analyse(_set(trace, tmp_path / "few", 96))
    many = _analyse(_set(trace, tmp_path / "many", 1536))
    assert few["files"] == 96 and many["files"] == 1536
    assert many["steps"] == 16 * few["steps"] > 0  # every trace was read
    # What a rank costs the analysis: its rows (2 steps, 2 profiler steps), its 0.36 kB record of what its
    # file gave, its rows in the blame's per-rank tables. Measured 13.3-15.3 kB a trace on main, before the
    # analysis let go of the kernels no stage reads (``analysis.ROWS_READ``), shared alike records
    # (``inputs``) and wrote summary.json piece by piece; 7.8-9.5 kB after (96 against 768 or 1,536 ranks).
    per_trace = (many["peak"] - few["peak"]) / (1536 - 96)
    assert per_trace <= 11_000, (few, many)
