"""``spanwatch collect`` and ``spanwatch check-config``: the collector's own commands.

Imported only when one of them runs, so the daemon never loads the analyzer's stack (polars, jinja2).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

from collector import mapping_files, shard
from collector.shard import Shard

log = logging.getLogger(__name__)


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
    p.add_argument(
        "--workers",
        type=_workers,
        default=None,
        metavar="W",
        help="worker processes sharing the targets (default: by the targets' estimated load, see "
        "collector/workload.py; 1: a single process)",
    )


def _workers(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"not a worker count: {value!r} (use 1 or more)")
    return n


def collect(args: argparse.Namespace) -> int:
    """Run the collector daemon until SIGTERM or SIGINT: with several workers, as a supervisor of worker
    processes (``collector.supervisor``), else in this process."""
    from collector.supervisor import Supervisor

    workers = args.workers or _default_workers(Path(args.config), args.shard)
    if workers > 1:
        supervisor = Supervisor(Path(args.config), workers, shard=args.shard)
        asyncio.run(supervisor.run())
        return 1 if supervisor.failed else 0
    from collector.daemon import Daemon

    daemon = Daemon(Path(args.config), shard=args.shard)
    asyncio.run(daemon.run())
    # Rows that never reached the archive are data lost: a service manager (and the operator) must see it.
    return 1 if daemon.rows_lost else 0


def _default_workers(config_path: Path, replica: Shard | None) -> int:
    """The worker count by load (``collector.workload``), logged with its reason."""
    from collector import config as configuration
    from collector import workload

    config = shard.select(configuration.load(config_path), replica)
    choice = workload.choose(config)
    log.info("processes: %d (%s; --workers N overrides)", choice.workers, choice.reason)
    return choice.workers
