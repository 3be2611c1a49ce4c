"""Every shipped scenario end to end: ``spanwatch demo --scenario FILE`` at the file's (short) duration,
in parallel (``SPANWATCH_SCENARIO_JOBS``, default 2: the demo runs in real time, mostly waiting), then
truth.json, the job's log, the collector config and the analysis outputs are checked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from analyzer import compare
from analyzer.analysis import Analysis, AnalysisInputs, AnalysisResult
from analyzer.distributed import RayAnalysis
from analyzer.report.command import write_report
from spanwatch.demo import analysis_inputs
from spanwatch.sim import scenario as sc
from spanwatch.sim.truth import Truth
from tests.ray_support import ray_session  # noqa: F401 (a fixture)
from tests.sim.scenario_runs import Run, run_all, terminal_line

pytestmark = pytest.mark.integration

JOBS = int(os.environ.get("SPANWATCH_SCENARIO_JOBS", "2"))
ANALYSIS = ("attribution.parquet", "events.parquet", "steps.parquet", "summary.json", "report.html")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> dict[str, Run]:
    """Every scenario's demo, each announced on the terminal as it ends (the set takes minutes)."""
    return run_all(sc.shipped(), tmp_path_factory.mktemp("scenarios"), JOBS, terminal_line(pytestconfig))


@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", sc.shipped(), ids=lambda p: p.stem)
def test_scenario_end_to_end(path: Path, runs: dict[str, Run]) -> None:
    run = runs[path.stem]
    assert run.returncode == 0, run.stderr
    s = sc.load(path)
    truth = Truth.model_validate_json((run.out / "truth.json").read_text())
    assert truth.scenario == s.name and set(truth.links) == {lk.name for lk in s.links}
    assert len(truth.episodes) == len(s.episodes)
    assert truth.steps and {r.rank for r in truth.steps} == set(range(s.ranks))
    log = run.out / truth.job.log_file
    assert log.is_file() and log.stat().st_size > 0
    config = yaml.safe_load((run.out / "config.yaml").read_text())
    assert len(config["targets"]) == 2 * len(s.links) and len(config["links"]) == len(s.links)
    metrics = (run.out / "metrics.txt").read_text()
    for lk in s.links:
        assert f'link="{lk.name}"' in metrics, lk.name
    assert list((run.out / "archive").rglob("*.parquet"))
    for name in ANALYSIS:
        assert (run.out / name).is_file(), name
    harmful = [e for e in truth.episodes if e.affects_job and e.link is not None]
    if harmful:
        assert sum(r.network_seconds.total for r in truth.steps) > 0
        # Scored against its truth, with the control whose broken timing must fail (the figures themselves
        # are the matrix bench's: bench/bench_scenarios.py).
        score = json.loads((run.out / "score.json").read_text())
        assert score["control"]["fails_timing_goal"], score["control"]


def _report(analysis: AnalysisResult, folder: Path, inputs: AnalysisInputs) -> dict[str, str]:
    analysis.write(folder)
    written = write_report(folder, inputs.config, inputs.claims)
    return {p.name: p.read_text().replace(str(folder), "OUT") for p in written}


@pytest.mark.timeout(900)
@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("path", sc.shipped(), ids=lambda p: p.stem)
def test_the_ray_engine_gives_the_same_analysis_and_report(
    path: Path, runs: dict[str, Run], tmp_path: Path
) -> None:
    run = runs[path.stem]
    assert run.returncode == 0, run.stderr
    truth = Truth.model_validate_json((run.out / "truth.json").read_text())
    inputs = analysis_inputs(run.out, run.out / truth.job.log_file)
    local, distributed = Analysis(inputs).run(), RayAnalysis(inputs).run()
    assert local.steps.height > 0
    assert compare.differences(local, distributed) == []
    # The same folder name: the report names the analysis folder it was rendered from.
    # The same figures to report.json's digits (``analyzer.report.model.SIGNIFICANT_DIGITS``): the reports
    # of 8 of 14 scenarios differed in a float's last digit (2026-12-03), the order a group-by summed in.
    assert _report(local, tmp_path / "local" / "analysis", inputs) == _report(
        distributed, tmp_path / "ray" / "analysis", inputs
    )
