"""The ``spanwatch`` command and its subcommands (spec: interfaces.md, "Commands").

A user error prints what is wrong and where, and exits non-zero; it never shows a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import NamedTuple

from analyzer import cli as analyze_cli
from analyzer import plan_render
from analyzer.report import command as report_command
from collector import config as configuration
from collector import shard
from collector.errors import ConfigError, SpanwatchError
from collector.shard import Shard
from collector.sim import commands as sim_commands

log = logging.getLogger("spanwatch")


class LogfmtFormatter(logging.Formatter):
    """One ``key=value`` line per record, for journald and log shippers when not on a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        message = record.getMessage().replace('"', "'")
        line = (
            f"ts={stamp}.{int(record.msecs):03d}Z level={record.levelname.lower()} "
            f'logger={record.name} msg="{message}"'
        )
        if record.exc_info:
            line += f' exc="{self.formatException(record.exc_info)!r}"'
        return line


def setup_logging(level: str) -> None:
    """Rich output on a terminal, logfmt lines otherwise."""
    handler: logging.Handler
    if sys.stderr.isatty():
        from rich.logging import RichHandler

        handler = RichHandler(show_path=False, rich_tracebacks=False)
    else:
        handler = logging.StreamHandler()
        handler.setFormatter(LogfmtFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


def _config_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, type=Path, help="the YAML config file")


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate a config file: 0 when valid, else every problem with its location and 1."""
    cfg = configuration.load(args.config)
    print(f"{args.config}: ok ({len(cfg.targets)} targets, {len(cfg.links)} links)")
    return 0


def _shard(value: str) -> Shard:
    try:
        return shard.parse(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _collect_arguments(p: argparse.ArgumentParser) -> None:
    _config_argument(p)
    p.add_argument(
        "--shard",
        type=_shard,
        default=None,
        metavar="i/N",
        help="poll only the targets of replica i of N (Prometheus hashmod of the target name)",
    )


def cmd_collect(args: argparse.Namespace) -> int:
    """Run the collector daemon until SIGTERM or SIGINT."""
    from collector.daemon import Daemon

    daemon = Daemon(Path(args.config), shard=args.shard)
    asyncio.run(daemon.run())
    # Rows that never reached the archive are data lost: a service manager (and the operator) must see it.
    return 1 if daemon.rows_lost else 0


class Command(NamedTuple):
    """One subcommand: what runs it, its help line, and the arguments it takes."""

    run: Callable[[argparse.Namespace], int]
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]


# The subcommand registry: one entry per subcommand, in the order `spanwatch --help` lists them.
COMMANDS: dict[str, Command] = {
    "collect": Command(cmd_collect, "run the collector daemon", _collect_arguments),
    "check-config": Command(cmd_check_config, "validate a config file and exit", _config_argument),
    "plan": Command(plan_render.run, "latency and traffic budget of a planned run", plan_render.arguments),
    "analyze": Command(analyze_cli.run, "post-run analysis: steps x network events", analyze_cli.arguments),
    "report": Command(
        report_command.run, "re-render the vendor report from an analysis folder", report_command.arguments
    ),
    "sim": Command(sim_commands.cmd_sim, "run the simulated two-site fabric", sim_commands.sim_arguments),
    "demo": Command(sim_commands.cmd_demo, "fabric + collector + training job", sim_commands.demo_arguments),
}


def parser() -> argparse.ArgumentParser:
    """The command line."""
    top = argparse.ArgumentParser(
        prog="spanwatch", description="Measure what the network between data centres costs a training run."
    )
    top.add_argument("--version", action="version", version=f"spanwatch {version('spanwatch')}")
    top.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.help, description=command.help)
        p.set_defaults(func=command.run)
        command.arguments(p)
    return top


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``spanwatch`` console script."""
    args = parser().parse_args(argv)
    setup_logging(args.log_level)
    try:
        return int(args.func(args))
    except ConfigError as e:
        print(f"{getattr(args, 'config', 'config')}: {len(e.problems)} problem(s)", file=sys.stderr)
        for problem in e.problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    except SpanwatchError as e:
        print(f"spanwatch: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
