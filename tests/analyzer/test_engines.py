"""``--engine ray`` gives the local engine's analysis: the synthetic fabric's archive (sharded), step logs
of several ranks, a real Kineto trace and an unusable file, on one local Ray (2 CPUs, one session for the
module, shut down after it)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from synthetic_fabric import Episode, config_yaml, step_rows, steps_jsonl, write_archive

from analyzer import compare, distributed
from analyzer.analysis import Analysis, AnalysisInputs
from analyzer.errors import InputError
from tests.ray_support import ray_session  # noqa: F401 (a fixture)


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fabric")
    episodes = [Episode("drops", "a1", 60, 90), Episode("pfc", "b2", 150, 170), Episode("ber", "a2", 40, 70)]
    write_archive(root / "archive", 240, episodes)
    # Half the files moved under shard=1/: two collectors writing side by side.
    for number, file in enumerate(sorted((root / "archive").rglob("*.parquet"))):
        if number % 2:
            target = root / "archive" / "shard=1" / file.relative_to(root / "archive")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(file, target)
    rows = step_rows(240, episodes, ranks=4)
    for rank in range(4):
        steps_jsonl(root / f"rank{rank}.jsonl", [r for r in rows if r["rank"] == rank])
    (root / "broken.jsonl").write_text("not a log\n")
    config_yaml(root / "config.yaml")
    return root


@pytest.mark.usefixtures("ray_session")
def test_both_engines_give_the_same_analysis(fabric: Path, training_data: Path) -> None:
    logs = (*sorted(fabric.glob("*.jsonl")), training_data / "hta" / "sampled_rank-1.json.gz")
    inputs = AnalysisInputs(
        archive=fabric / "archive", logs=logs, config=fabric / "config.yaml", batch_rows=2_000
    )
    local = Analysis(inputs).run()
    engine = distributed.RayAnalysis(inputs)
    remote = engine.run()
    assert engine.stats.telemetry_tasks > 1 and engine.stats.log_tasks == len(logs)
    assert local.events.height > 0 and local.steps["rank"].n_unique() >= 4
    assert any("broken.jsonl" in w["input"] for w in local.summary["warnings"])
    assert compare.differences(local, remote) == []


@pytest.mark.usefixtures("ray_session")
def test_a_missing_archive_is_an_input_error_on_ray(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        distributed.analyse(AnalysisInputs(archive=tmp_path / "nothing"))


class _InProcess:
    """Ray's API as used by ``analyzer.distributed``, run in this process: the engine's own orchestration
    (files read per device batch, logs per file, merged by the local code) checked where Ray cannot start."""

    @staticmethod
    def remote(function: Any) -> Any:
        return SimpleNamespace(remote=lambda *args: function(*args))

    @staticmethod
    def get(values: Any) -> Any:
        return values

    @staticmethod
    def put(value: Any) -> Any:
        return value


def test_the_engines_orchestration_gives_the_local_analysis(
    fabric: Path, training_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(distributed, "_ray", lambda: _InProcess)
    logs = (*sorted(fabric.glob("*.jsonl")), training_data / "hta" / "sampled_rank-1.json.gz")
    inputs = AnalysisInputs(
        archive=fabric / "archive", logs=logs, config=fabric / "config.yaml", batch_rows=2_000
    )
    local = Analysis(inputs).run()
    engine = distributed.RayAnalysis(inputs)
    remote = engine.run()
    assert engine.stats.telemetry_tasks > 1 and engine.stats.log_tasks == len(logs)
    assert local.events.height > 0 and local.steps["rank"].n_unique() >= 4
    assert compare.differences(local, remote) == []
