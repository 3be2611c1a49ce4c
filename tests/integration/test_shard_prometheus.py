"""A real Prometheus's ``hashmod`` relabelling puts every device in the shard collector.shard computes.

Prometheus gets one static target per device name, with a relabel rule ``hashmod`` over ``device``; its
``/api/v1/targets`` then shows the shard it computed for each. Skipped when Prometheus is not installed.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from collector import shard
from tests.integration.prometheus_support import PROMETHEUS, SKIP_REASON, launch

pytestmark = pytest.mark.integration
DEVICES = [f"dci{i}.site-{'ab'[i % 2]}" for i in range(40)] + ["ü-unicode", "a;b", "x"]


def _targets(url: str) -> list[dict[str, object]]:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=2) as r:
            return list(json.loads(r.read())["data"]["activeTargets"])
    except OSError:
        return []


@pytest.mark.skipif(PROMETHEUS is None, reason=SKIP_REASON)
@pytest.mark.parametrize("modulus", [1, 3, 7])
def test_prometheus_hashmod_agrees(tmp_path: Path, modulus: int) -> None:
    config = {
        "scrape_configs": [{
            "job_name": "shards",
            "scrape_interval": "1h",
            "static_configs": [{"targets": ["127.0.0.1:9"], "labels": {"device": d}} for d in DEVICES],
            "relabel_configs": [{"source_labels": ["device"], "modulus": modulus, "action": "hashmod",
                                 "target_label": "shard"}],
        }],
    }  # fmt: skip
    with launch(tmp_path, config) as url:
        deadline, targets = time.monotonic() + 30, []
        while time.monotonic() < deadline and len(targets) < len(DEVICES):
            time.sleep(0.25)
            targets = _targets(url)
        assert len(targets) == len(DEVICES)
        theirs = {t["labels"]["device"]: int(t["labels"]["shard"]) for t in targets}  # type: ignore[index]
        ours = {d: shard.hashmod([d], modulus) for d in DEVICES}
        assert theirs == ours
        if modulus > 1:
            assert len(set(ours.values())) > 1
