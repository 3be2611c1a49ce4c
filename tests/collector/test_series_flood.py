"""A device announcing a million interface names costs a worker what it costs at its series cap (issue 34).

Each case runs ``series_flood.py`` in its own process, so the peak RSS is that of one worker's ingest
path (decoder, source and store) and nothing else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HELPER = Path(__file__).with_name("series_flood.py")
ROOT = Path(__file__).resolve().parents[2]
CAP = 50_000  # the default max_series_per_target
FLOOD = 1_000_000


def _run(names: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(HELPER), str(names), str(CAP)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_million_names_cost_within_ten_percent_of_the_cap() -> None:
    at_cap = _run(CAP // 2)  # CAP / 2 interfaces x 2 counters: exactly the cap
    flood = _run(FLOOD)
    assert at_cap["series"] == flood["series"] == CAP
    assert at_cap["dropped"] == 0
    assert flood["dropped"] == FLOOD - CAP // 2  # every name beyond the cap counted, once per reading
    assert flood["peak_rss_mb"] <= 1.10 * at_cap["peak_rss_mb"], (flood, at_cap)
