"""The Kubernetes manifests: they render with kustomize and validate against the Kubernetes schemas offline.

Rendering uses ``kubectl kustomize`` (or a standalone ``kustomize``); validation uses kubernetes-validate,
a pip package that ships the API schemas, so no network is needed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

KUSTOMIZATION = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def _render() -> str:
    if (kubectl := shutil.which("kubectl")) is not None:
        command = [kubectl, "kustomize", str(KUSTOMIZATION)]
    elif (kustomize := shutil.which("kustomize")) is not None:
        command = [kustomize, "build", str(KUSTOMIZATION)]
    else:
        pytest.skip("neither kubectl nor kustomize is installed (apt-get install kubernetes-client)")
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(_render()) if d]


def test_manifests_validate_offline(rendered: list[dict[str, object]], tmp_path: Path) -> None:
    validate = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate")
    version = validate.latest_version()
    for doc in rendered:
        validate.validate(doc, version, strict=True)  # raises ValidationError on a bad field


def test_replicas_match_the_shard_count(rendered: list[dict[str, object]]) -> None:
    (sts,) = [d for d in rendered if d["kind"] == "StatefulSet"]
    spec = sts["spec"]
    assert isinstance(spec, dict)
    (container,) = spec["template"]["spec"]["containers"]
    args = container["args"]
    shard = args[args.index("--shard") + 1]
    m = re.fullmatch(r"\$\(POD_INDEX\)/(\d+)", shard)
    assert m is not None and int(m[1]) == spec["replicas"]
    env = {e["name"]: e for e in container["env"]}
    assert (
        env["POD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
        == "metadata.labels['apps.kubernetes.io/pod-index']"
    )


def test_pods_run_unprivileged(rendered: list[dict[str, object]]) -> None:
    (sts,) = [d for d in rendered if d["kind"] == "StatefulSet"]
    pod = sts["spec"]["template"]["spec"]  # type: ignore[index]
    assert pod["securityContext"]["runAsNonRoot"] is True
    for c in pod["containers"]:
        ctx = c["securityContext"]
        assert ctx["allowPrivilegeEscalation"] is False and ctx["readOnlyRootFilesystem"] is True
        assert ctx["capabilities"]["drop"] == ["ALL"]
