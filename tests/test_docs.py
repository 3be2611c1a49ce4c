"""docs/: the generated pages are current, the README's links resolve, and the config reference's example
is a valid config (less its secrets and files)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import yaml

from collector.config import Config

ROOT = Path(__file__).resolve().parents[1]


def _build() -> object:
    spec = importlib.util.spec_from_file_location("docs_build", ROOT / "docs" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_pages_are_current() -> None:
    pages: dict[str, str] = _build().pages()  # type: ignore[attr-defined]
    stale = [p for p, text in pages.items() if (ROOT / "docs" / p).read_text() != text]
    assert stale == [], f"run .venv/bin/python docs/build.py ({stale} differ)"
    for vendor in ("ciena", "infinera", "smartoptics", "arista", "juniper"):
        assert (ROOT / "docs" / "vendors" / f"{vendor}.md").is_file()


def test_links_resolve() -> None:
    for page in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links {target}"
    assert "later releases" not in (ROOT / "README.md").read_text()
    assert "../shared/spec/metrics.md" not in (ROOT / "README.md").read_text()


def test_config_reference_example_validates() -> None:
    text = (ROOT / "docs" / "config.md").read_text()
    example = yaml.safe_load(re.search(r"```yaml\n(.*?)```", text, flags=re.S).group(1))  # type: ignore[union-attr]
    Config.model_validate(example)  # the schema; secrets, files and directories are cross-checks
