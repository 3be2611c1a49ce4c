"""The scenario matrix: every shipped scenario through ``spanwatch demo --scenario``, one table row each.

With the scorer installed (``spanwatch score``, issue 12), each row is every figure it prints for the run
(``spanwatch score --truth OUT/truth.json --analysis OUT``), its control and whether it passed; without
it, the analyzer's own figures beside the truth's totals: network seconds the truth says episodes cost and
the seconds the analysis attributed, and the analyzer's event recall / precision.

Run: ``.venv/bin/python bench/bench_scenarios.py [--full] [--jobs 2] [--only PATTERN] [--out DIR]``.
``--full`` stretches every scenario 4x in time (``--time-scale 4``; the files are short for CI).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from spanwatch.sim import scenario as sc

FULL_SCALE = 4.0


def run(path: Path, out: Path, scale: float) -> dict[str, Any]:
    """One demo run; its wall time and exit status."""
    start = time.monotonic()
    cmd = [sys.executable, "-m", "spanwatch.cli", "demo", "--scenario", str(path), "--out", str(out)]
    done = subprocess.run([*cmd, "--time-scale", str(scale)], capture_output=True, text=True, check=False)
    return {"scenario": path.stem, "wall_s": round(time.monotonic() - start, 1), "rc": done.returncode}


def score(out: Path) -> dict[str, Any]:
    """The figures the demo's scoring wrote (``score.json``; control figures prefixed ``control.``)."""
    try:
        figures = json.loads((out / "score.json").read_text())
    except (OSError, ValueError) as exc:
        return {"score": f"none ({exc})"}
    flat: dict[str, Any] = {}
    for key, value in figures.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items() if not isinstance(v, dict | list)})
        elif not isinstance(value, list):
            flat[key] = value
    return flat


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--full", action="store_true", help=f"stretch every scenario {FULL_SCALE:g}x in time")
    p.add_argument("--jobs", type=int, default=2, help="scenarios run at once (the demo runs in real time)")
    p.add_argument("--only", default="", help="run only scenarios whose name contains this")
    p.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    args = p.parse_args()
    paths = [path for path in sc.shipped() if args.only in path.stem]
    scale = FULL_SCALE if args.full else 1.0
    with tempfile.TemporaryDirectory() as tmp:
        base = args.out or Path(tmp)
        with ThreadPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(lambda path: run(path, base / path.stem, scale), paths))
        for row in rows:
            if row["rc"] == 0:
                row.update(score(base / row["scenario"]))
        columns = list(dict.fromkeys(k for row in rows for k in row))
        print(f"scored by spanwatch score, time scale {scale:g}")
        print(" | ".join(columns))
        print(" | ".join("---" for _ in columns))
        for row in rows:
            print(" | ".join(_cell(row.get(c)) for c in columns))


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return "" if value is None else str(value)


if __name__ == "__main__":
    main()
