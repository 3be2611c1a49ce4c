"""``spanwatch collect`` and ``spanwatch check-config``: the collector's own commands.

Imported only when one of them runs, so the daemon never loads the analyzer's stack (polars, jinja2).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from collector import mapping_files, shard
from collector.shard import Shard


def config_arguments(p: argparse.ArgumentParser) -> None:
    """``check-config`` options."""
    p.add_argument("--config", required=True, type=Path, help="the YAML config file")


def check_config(args: argparse.Namespace) -> int:
    """Validate a config file: 0 when valid, else every problem with its location and 1."""
    cfg, mappings = mapping_files.load(args.config)
    user = len(mappings.digests)
    print(
        f"{args.config}: ok ({len(cfg.targets)} targets, {len(cfg.links)} links"
        + (f", {user} user mapping files" if user else "")
        + ")"
    )
    return 0


def _shard(value: str) -> Shard:
    try:
        return shard.parse(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def collect_arguments(p: argparse.ArgumentParser) -> None:
    """``collect`` options."""
    config_arguments(p)
    p.add_argument(
        "--shard",
        type=_shard,
        default=None,
        metavar="i/N",
        help="poll only the targets of replica i of N (Prometheus hashmod of the target name)",
    )


def collect(args: argparse.Namespace) -> int:
    """Run the collector daemon until SIGTERM or SIGINT."""
    from collector.daemon import Daemon

    daemon = Daemon(Path(args.config), shard=args.shard)
    asyncio.run(daemon.run())
    # Rows that never reached the archive are data lost: a service manager (and the operator) must see it.
    return 1 if daemon.rows_lost else 0
