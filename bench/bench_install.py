"""The runtime install: how big ``pip install .`` makes a fresh venv, and how long the commands take to load.

Builds a venv under a temporary folder as a user would (``python -m venv``: its own pip, which is counted),
installs the project into it with that pip and the locked versions (``requirements.lock``), and prints the
venv's size, its largest packages, and the import time of ``spanwatch collect`` and ``spanwatch analyze``'s
stacks. The goal is at most 450 MB, pip included (625 MB when pyarrow and polars were both runtime
dependencies).

    .venv/bin/python bench/bench_install.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_MB = 450


# Without the checkout on the path: pip would take its metadata for an installed spanwatch, and the import
# times would load the checkout's code instead of the venv's.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def size_mb(path: Path) -> float:
    """Bytes on disk under ``path``, in MB (10^6), as ``du`` counts apparent file sizes."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def largest(site: Path, n: int = 8) -> list[tuple[str, float]]:
    """The ``n`` biggest top-level entries of site-packages."""
    sizes = [(p.name, size_mb(p) if p.is_dir() else p.stat().st_size / 1e6) for p in site.iterdir()]
    return sorted(sizes, key=lambda kv: -kv[1])[:n]


def import_seconds(python: Path, statement: str) -> float:
    """Wall time of a fresh interpreter running ``statement`` (best of three)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([str(python), "-c", statement], check=True, cwd=tempfile.gettempdir(), env=CLEAN_ENV)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="build the venv here and keep it")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="spanwatch-install-"))
    venv = work / "venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=CLEAN_ENV)
        python = venv / "bin" / "python"
        started = time.perf_counter()
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "-c", str(ROOT / "requirements.lock"), str(ROOT)],
            check=True,
            env=CLEAN_ENV,
        )
        install = time.perf_counter() - started
        site = next((venv / "lib").glob("python3*/site-packages"))
        total = size_mb(venv)
        print(
            f"runtime venv: {total:.0f} MB, pip included (goal <= {GOAL_MB} MB), installed in {install:.0f} s"
        )
        for name, mb in largest(site):
            print(f"  {mb:7.1f} MB  {name}")
        collect = "from collector.commands import collect; import collector.daemon"
        analyze = "import analyzer.cli, analyzer.analysis, analyzer.report.html"
        print(f"import, collect stack: {import_seconds(python, collect):.2f} s")
        print(f"import, analyze stack: {import_seconds(python, analyze):.2f} s")
        return 0 if total <= GOAL_MB else 1
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
