"""``spanwatch sim``: the simulated fabric on its own, on loopback only and free ports, printing the
collector config for it (the demo wiring, with the collector and the analysis, is ``spanwatch.demo``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import signal
import socket
import sys
from pathlib import Path

import yaml

from collector.errors import ConfigError
from spanwatch.sim import scenario as scenarios
from spanwatch.sim.runtime import SimulatedFabric
from spanwatch.sim.scenario import Scenario

log = logging.getLogger("spanwatch.sim")


def fabric_arguments(p: argparse.ArgumentParser) -> None:
    """The options shared by ``sim`` and ``demo``: a scenario file, or the built-in one's link."""
    p.add_argument(
        "--scenario",
        type=Path,
        help="a scenario file, or a shipped scenario's name (--list-scenarios; default: the built-in demo)",
    )
    p.add_argument("--list-scenarios", action="store_true", help="name and describe the shipped scenarios")
    p.add_argument("--distance-km", type=float, default=100.0, help="built-in scenario: fibre route")
    p.add_argument("--waves", type=int, default=4, help="built-in scenario: parallel 800G waves")
    p.add_argument("--buffer", choices=["deep", "shallow"], default="deep", help="built-in: buffer profile")
    p.add_argument("--lossy", action="store_true", help="built-in scenario: no PFC, tail-drop instead")
    p.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    p.add_argument(
        "--time-scale", type=float, default=1.0, help="stretch the scenario in time (the bench's full length)"
    )


def arguments(p: argparse.ArgumentParser) -> None:
    """``spanwatch sim`` options."""
    fabric_arguments(p)
    p.add_argument("--out", type=Path, default=Path("spanwatch-sim"), help="where config.yaml is written")
    p.add_argument("--duration", type=float, default=None, help="seconds to run (default: until Ctrl-C)")
    p.add_argument("--listen", default="127.0.0.1:9464", help="the /metrics address the config gives")


def scenario(args: argparse.Namespace, duration: float | None) -> Scenario:
    """The scenario the options name (``--duration`` overrides a file's).

    Raises:
        ConfigError: the file or an option is invalid (every problem, with its location).
    """
    if args.scenario is not None:
        if not args.scenario.exists() and (named := scenarios.shipped_named(str(args.scenario))) is not None:
            args.scenario = named  # a shipped scenario's name, as --list-scenarios prints it
        args.config = str(args.scenario)  # the command line's error header names the file
        s = scenarios.load(args.scenario)
        if duration is not None:
            s = scenarios.with_duration(s, duration, str(args.scenario))
    else:
        args.config = "options"
        s = scenarios.builtin(
            duration or 60.0,
            distance_km=args.distance_km,
            waves=args.waves,
            buffer=args.buffer,
            lossless=not args.lossy,
        )
    if args.seed is not None:
        s = s.model_copy(update={"seed": args.seed})
    if args.time_scale != 1.0:
        if args.time_scale <= 0:
            raise ConfigError("--time-scale: must be positive")
        s = scenarios.scaled(s, args.time_scale)
    return s


def list_scenarios() -> int:
    """Print the shipped scenarios: name (what ``--scenario`` takes), and the file's description.

    Exits 1 when no scenario file is found (a broken install), rather than listing only the built-in one.
    """
    files = scenarios.shipped()
    print(f"{'builtin':28s} the two-site demo (no --scenario): 100 km, 4 x 800G, one episode of each kind")
    for path in files:
        print(f"{path.stem:28s} {scenarios.description(path)}")
    if not files:
        where = ", ".join(str(f) for f in scenarios.SHIPPED_FOLDERS)
        print(f"spanwatch: no shipped scenario files found (looked in {where})", file=sys.stderr)
        return 1
    print(f"(the files: {files[0].parent})")
    return 0


# Where ``free_port`` draws from: the unprivileged ports, less the kernel's ephemeral range.
UNPRIVILEGED = range(1024, 65536)
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORT_TRIES = 64  # ports taken by running services are skipped; 64 all taken is a machine out of ports


def free_port(kind: socket.SocketKind = socket.SOCK_STREAM) -> int:
    """A TCP (or ``SOCK_DGRAM``: UDP) port free on loopback now, for a server that binds it a moment later.

    It is drawn at random outside the kernel's ephemeral range: a port that ``bind(0)`` hands out and
    releases can be handed out again before the caller binds it (to the fabric's own servers, grpc, ray or
    another test's), which made the demo fail with "address already in use". Outside that range only
    another caller picking the same port at random can take it.

    Raises:
        OSError: no port could be bound in ``PORT_TRIES`` draws.
    """
    low, high = ephemeral_range()
    ports = [p for p in UNPRIVILEGED if not low <= p <= high]
    if len(ports) < PORT_TRIES:  # a kernel whose ephemeral range spans nearly every port: draw from them all
        ports = list(UNPRIVILEGED)
    for port in random.sample(ports, PORT_TRIES):
        with socket.socket(socket.AF_INET, kind) as s, contextlib.suppress(OSError):
            s.bind(("127.0.0.1", port))
            return port
    raise OSError(f"no free {kind.name} port on 127.0.0.1 in {PORT_TRIES} random draws outside {low}-{high}")


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux's default where it cannot be read)."""
    try:
        low, high = EPHEMERAL_RANGE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def write_config(sim: SimulatedFabric, out: Path, listen: str) -> Path:
    """Write ``config.yaml`` and the community file into ``out``; returns the config's path."""
    out.mkdir(parents=True, exist_ok=True)
    community = out / "community"
    community.write_text(sim.community + "\n")
    community.chmod(0o600)
    path = out / "config.yaml"
    path.write_text(yaml.safe_dump(sim.collector_config(listen), sort_keys=False))
    return path


# -- spanwatch sim ---------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    """Start the fabric, print the collector config for it, run until Ctrl-C or ``--duration``."""
    if args.list_scenarios:
        return list_scenarios()
    return asyncio.run(_sim(args))


async def _sim(args: argparse.Namespace) -> int:
    sim = SimulatedFabric(scenario(args, None))  # --duration here is how long to serve, not the scenario
    await sim.start()
    try:
        path = write_config(sim, args.out, args.listen)
        print(path.read_text(), end="", flush=True)
        print(f"# written to {path}; run: spanwatch collect --config {path}", file=sys.stderr, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=args.duration)
    finally:
        await sim.stop()
    return 0
