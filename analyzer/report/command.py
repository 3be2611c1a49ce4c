"""``spanwatch report DIR``: re-render the report from an analysis directory, and the writer behind it.

``spanwatch analyze --claims FILE`` and ``spanwatch demo`` call ``write_report`` after the analysis;
``spanwatch report`` calls it on an existing ``--out`` folder without recomputing the analysis. The config,
claims and archive default to the ones the analysis recorded in ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from analyzer import archive_source
from analyzer.claims import load_claims, match_vendors
from analyzer.errors import InputError
from analyzer.report import html, markdown
from analyzer.report.data import build_report, load_analysis
from analyzer.report.model import to_json
from analyzer.topology import load_config

FILES = ("report.html", "report.md", "report.json")
log = logging.getLogger("spanwatch.report")


def check_claims(claims: Path, config: Path | None) -> None:
    """Fail fast, before a long analysis: the claims file is valid and every vendor matches a device.

    Args:
        claims: the claims file.
        config: the collector config, or None.

    Raises:
        InputError: the claims are invalid, there is no config, or a vendor matches nothing.
        ConfigError: the config is invalid.
    """
    match_vendors(load_claims(claims), load_config(config) if config is not None else None)


def write_report(
    analysis_dir: Path,
    config: Path | None = None,
    claims: Path | None = None,
    archive: Path | str | None = None,
    out: Path | None = None,
) -> list[Path]:
    """Build the report from an analysis directory and write it as HTML, Markdown and JSON.

    Args:
        analysis_dir: ``spanwatch analyze``'s output folder.
        config: the collector config; None takes the one the analysis recorded (if it still exists).
        claims: the claims file; None takes the one the analysis recorded (if it still exists).
        archive: the archive; None takes the one the analysis recorded.
        out: where to write; None writes into ``analysis_dir``.

    Returns:
        The files written: report.html, report.md, report.json.

    Raises:
        InputError: the analysis directory, claims or a named file is unusable.
        ConfigError: the config is invalid.
    """
    analysis = load_analysis(analysis_dir)
    config = config or _recorded(analysis.input_path("config"), "config")
    claims = claims or _recorded(analysis.input_path("claims"), "claims")
    if archive is None:
        _recorded(analysis.input_path("archive"), "archive")
    data = build_report(
        analysis,
        load_config(config) if config is not None else None,
        load_claims(claims) if claims is not None else None,
        archive=archive,
    )
    target = out or analysis_dir
    target.mkdir(parents=True, exist_ok=True)
    paths = [target / name for name in FILES]
    paths[0].write_text(html.render(data))
    paths[1].write_text(markdown.render(data))
    paths[2].write_text(json.dumps(to_json(data), indent=1) + "\n")
    return paths


def _recorded(path: Path | None, option: str) -> Path | None:
    """The input the analysis recorded, if it is still there; a warning naming the path tried if not."""
    if path is None:
        return None
    if path.exists():
        return path
    log.warning(
        "the analysis's %s is not at %s: the report goes without it (pass --%s)", option, path, option
    )
    return None


def arguments(p: argparse.ArgumentParser) -> None:
    """Declare the ``report`` options.

    Args:
        p: the subcommand's parser.
    """
    p.add_argument("analysis", type=Path, metavar="DIR", help="the folder spanwatch analyze wrote (--out)")
    p.add_argument("--claims", type=Path, help="a vendor claims file (default: the one analyze was given)")
    p.add_argument("--config", type=Path, help="the collector config (default: the one analyze was given)")
    p.add_argument(
        "--archive",
        type=archive_source.location,
        help="the archive, a directory or s3://bucket/prefix (default: the one analyze read)",
    )
    p.add_argument("--out", type=Path, help="where to write the report (default: DIR)")


def run(args: argparse.Namespace) -> int:
    """Run ``spanwatch report``.

    Args:
        args: the parsed command line.

    Returns:
        The exit status (0).

    Raises:
        InputError: an input is unusable.
        ConfigError: the collector config is invalid.
    """
    for option in ("claims", "config", "archive"):
        path = getattr(args, option)
        if isinstance(path, Path) and not path.exists():
            raise InputError(path, f"--{option}: not found")
    written = write_report(args.analysis, args.config, args.claims, args.archive, args.out)
    print(f"report: {written[0]} (also {written[1].name}, {written[2].name})")
    return 0
