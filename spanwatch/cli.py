"""The ``spanwatch`` command and its subcommands (spec: interfaces.md, "Commands").

A user error prints what is wrong and where, and exits non-zero; it never shows a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable
from importlib.metadata import version
from typing import NamedTuple

from collector.errors import ConfigError, SpanwatchError
from collector.logfmt import LogfmtFormatter

log = logging.getLogger("spanwatch")


def setup_logging(level: str) -> None:
    """Short readable lines on a terminal, logfmt lines otherwise."""
    handler = logging.StreamHandler()
    if sys.stderr.isatty():
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")
        )
    else:
        handler.setFormatter(LogfmtFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


class Command(NamedTuple):
    """One subcommand: its help line, and the module with the functions that declare its arguments and
    run it (imported only when that subcommand runs, so ``collect`` never loads the analyzer)."""

    help: str
    module: str
    run: str = "run"
    arguments: str = "arguments"

    def load(self) -> tuple[Callable[[argparse.Namespace], int], Callable[[argparse.ArgumentParser], None]]:
        """The run and arguments functions."""
        module = importlib.import_module(self.module)
        return getattr(module, self.run), getattr(module, self.arguments)


# The subcommand registry: one entry per subcommand, in the order `spanwatch --help` lists them.
COMMANDS: dict[str, Command] = {
    "collect": Command("run the collector daemon", "collector.commands", "collect", "collect_arguments"),
    "check-config": Command(
        "validate a config file and exit", "collector.commands", "check_config", "config_arguments"
    ),
    "poll": Command(
        "poll one target once: print its samples and what was skipped",
        "collector.oneshot",
        "poll",
        "poll_arguments",
    ),
    "gnmi": Command(
        "one gNMI RPC: capabilities, get, subscribe", "collector.oneshot", "gnmi", "gnmi_arguments"
    ),
    "mib-module": Command("a mapping module skeleton from a MIB module and choices", "collector.mib_module"),
    "reflect": Command("answer TWAMP-light round-trip probes (a link's far end)", "collector.probes.command"),
    "plan": Command("latency and traffic budget of a planned run", "analyzer.plan_render"),
    "analyze": Command("post-run analysis: steps x network events", "spanwatch.analyze"),
    "follow": Command(
        "live step cost: tail training logs and the archive, export the network's cost per link",
        "spanwatch.follow",
    ),
    "score": Command("score an analysis against a simulated fabric's truth", "spanwatch.score"),
    "report": Command("re-render the vendor report from an analysis folder", "analyzer.report.command"),
    "sim": Command("run the simulated fabric", "spanwatch.sim.commands"),
    "demo": Command("fabric + collector + training job + analysis", "spanwatch.demo"),
    "scenarios": Command("random scenario files drawn from the spec's whole space", "spanwatch.sim.families"),
    "lab": Command(
        "real namespaces, qdiscs, agents and a PyTorch job, measured end to end (root)",
        "spanwatch.lab.command",
        "run_command",
    ),
}


def _chosen(argv: list[str]) -> str | None:
    """The subcommand named on the command line, if any (the first word that is one)."""
    return next((word for word in argv if word in COMMANDS), None)


def parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line; only the subcommand named in ``argv`` (all of them when None) is imported."""
    chosen = _chosen(argv) if argv is not None else None
    top = argparse.ArgumentParser(
        prog="spanwatch", description="Measure what the network between data centres costs a training run."
    )
    top.add_argument("--version", action="version", version=f"spanwatch {version('spanwatch')}")
    top.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.help, description=command.help)
        if argv is None or name == chosen:
            run, arguments = command.load()
            p.set_defaults(func=run)
            arguments(p)
    return top


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``spanwatch`` console script."""
    argv = sys.argv[1:] if argv is None else argv
    args = parser(argv).parse_args(argv)
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
