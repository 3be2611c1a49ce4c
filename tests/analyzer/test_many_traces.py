"""A set of Kineto traces is parsed one trace at a time: the analysis's peak memory does not grow with the
number of traces (issue 31: thousands of ranks). Each set is a real trace (HolisticTraceAnalysis'
``sampled_rank-0``) linked once per rank, parsed in its own process so its peak RSS is its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PARSE = """
import json, resource, sys
from pathlib import Path
from analyzer.inputs import parse_logs
logs = parse_logs(sorted(Path(sys.argv[1]).glob("*.json.gz")))
steps = logs.result.table("kineto_steps")
print(json.dumps({"peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "files": len(logs.files), "kineto_steps": steps.height}))
"""


def _parse(folder: Path) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", PARSE, str(folder)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


def _set(training_data: Path, folder: Path, ranks: int) -> Path:
    folder.mkdir()
    trace = training_data / "hta" / "sampled_rank-0.json.gz"
    for rank in range(ranks):
        (folder / f"rank{rank:05d}.json.gz").symlink_to(trace)
    return folder


@pytest.mark.timeout(900)
def test_peak_memory_does_not_grow_with_the_number_of_traces(training_data: Path, tmp_path: Path) -> None:
    few = _parse(_set(training_data, tmp_path / "few", 8))
    many = _parse(_set(training_data, tmp_path / "many", 64))
    assert few["files"] == 8 and many["files"] == 64
    assert many["kineto_steps"] == 8 * few["kineto_steps"] > 0  # every trace was read
    # 8 times the traces: the same peak, within what the per-rank summary rows and allocator noise cost.
    assert many["peak"] <= few["peak"] * 1.15 + 32 * 2**20, (few, many)
