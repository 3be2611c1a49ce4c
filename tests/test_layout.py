"""The shape of the code base: which package may import which, and what ``spanwatch collect`` loads.

Layers, bottom up: ``collector.contracts`` (the catalogue, archive layout, fibre and optics: no
dataframe library) < ``collector`` < ``analyzer`` < ``spanwatch.sim`` < ``spanwatch`` (the command shell,
which nothing imports). The analyzer reaches the collector only through the contracts, the config model
and the errors it shares.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("collector", "analyzer", "spanwatch", "bench", "dashboards")
# What the analyzer may use of the collector: the contracts, the config model (with its errors, its
# duration syntax and the one bounded YAML reader), and the object-store client the archive's writer and
# its readers share (issue 31).
ANALYZER_MAY_IMPORT = (
    "collector.contracts",
    "collector.storage",
    "collector.config",
    "collector.errors",
    "collector.yaml_input",
    "collector.durations",
)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


def _imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The project modules ``name`` imports (bench scripts import their neighbours by bare name)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
            targets = submodules or [base]
        else:
            continue
        for target in targets:
            if name.startswith("bench.") and f"bench.{target}" in known:
                target = f"bench.{target}"
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: set(_imported(name, path, known)) for name, path in known.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_layers() -> None:
    wrong = []
    for module, targets in _graph().items():
        for target in targets:
            top = target.split(".")[0]
            if (
                (module.startswith("collector.contracts") and not target.startswith("collector.contracts"))
                or (module.startswith("collector") and top != "collector")
                or (
                    module.startswith("analyzer")
                    and top == "collector"
                    and not target.startswith(ANALYZER_MAY_IMPORT)
                )
                or (module.startswith("analyzer") and top == "spanwatch")
                or (
                    module.startswith("spanwatch.sim")
                    and target.startswith(("analyzer", "collector.sources"))
                )
            ):
                wrong.append((module, target))
            elif (
                top == "spanwatch"
                and not module.startswith("spanwatch")
                and not target.startswith("spanwatch.sim")
            ):
                wrong.append((module, target))  # nothing imports the shell (benches may drive the simulator)
    assert wrong == []


def test_collect_loads_no_analyzer(tmp_path: Path) -> None:
    """``spanwatch collect`` imports the daemon's stack only: no analyzer, dataframe library, jinja2 or
    matplotlib, not even once it has written its archive (``collector.exporters.parquet``)."""
    probe = (
        "import sys\n"
        "from spanwatch.cli import parser\n"
        "argv = ['collect', '--config', 'x.yaml']\n"
        "parser(argv).parse_args(argv)\n"
        "import collector.daemon\n"
        "from collector.exporters.archive import Archive\n"
        f"archive = Archive({str(tmp_path)!r}, writer='w')\n"
        "archive.add((10**18, 10**18, 'sw', 'snmp', 'm', (('interface', 'e1'),), None, 1.0, 1))\n"
        "assert archive.flush()\n"
        "print(len(sys.modules), *sorted({m.split('.')[0] for m in sys.modules}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    count, *tops = out.stdout.split()
    assert not {"analyzer", "polars", "pyarrow", "numpy", "jinja2", "matplotlib", "pysmi"} & set(tops)
    assert int(count) < 600, f"spanwatch collect loads {count} modules (525 when this test was written)"
