"""The collector fleet (issue 31): the Prometheus agent's shard filter agrees with ``--shard``, and the
Kubernetes overlay that writes the archive to a bucket renders and validates offline."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from collector.config import ArchiveConfig

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
AGENT = DEPLOY / "prometheus" / "agent.yml"


def _kustomize(folder: Path) -> list[dict[str, object]]:
    if (kubectl := shutil.which("kubectl")) is None:
        pytest.skip("kubectl is not installed (apt-get install kubernetes-client)")
    result = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def _replicas() -> int:
    (sts,) = [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "statefulset.yaml").read_text())]
    return int(sts["spec"]["replicas"])


def test_the_agent_keeps_its_shards_devices_with_the_collectors_hashmod() -> None:
    config = yaml.safe_load(AGENT.read_text())
    (job,) = config["scrape_configs"]
    rules = job["metric_relabel_configs"]
    (hashmod,) = [r for r in rules if r.get("action") == "hashmod"]
    assert hashmod["source_labels"] == ["device"] and hashmod["modulus"] == _replicas()
    (chosen,) = [r for r in rules if r.get("source_labels") == [hashmod["target_label"]]]
    assert chosen["regex"] == config["global"]["external_labels"]["shard"]
    assert config["remote_write"]


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool is not installed (apt-get install prometheus)"
)
def test_the_agent_config_is_valid() -> None:
    result = subprocess.run(
        ["promtool", "check", "config", "--syntax-only", AGENT.name],
        cwd=AGENT.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_bucket_overlay_renders_validates_and_names_a_bucket(tmp_path: Path) -> None:
    rendered = _kustomize(DEPLOY / "kubernetes-bucket")
    validate = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate")
    version = validate.latest_version()
    for doc in rendered:
        validate.validate(doc, version, strict=True)
    (config_map,) = [d for d in rendered if d["kind"] == "ConfigMap"]
    collector = yaml.safe_load(config_map["data"]["spanwatch.yaml"])["collector"]  # type: ignore[index]
    archive = ArchiveConfig.model_validate(collector["archive"])
    assert archive.url is not None and archive.url.startswith("s3://")
    (sts,) = [d for d in rendered if d["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]  # type: ignore[index]
    assert container["envFrom"] == [{"secretRef": {"name": "spanwatch-archive-credentials"}}]
    assert "--shard" in container["args"]
