"""``spanwatch sim``: the simulated fabric on its own, on loopback only and free ports, printing the
collector config for it (the demo wiring, with the collector and the analysis, is ``spanwatch.demo``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import socket
import sys
from pathlib import Path

import yaml

from spanwatch.sim.params import MAX_DISTANCE_KM, MAX_WAVES, FabricParams
from spanwatch.sim.runtime import SimulatedFabric

log = logging.getLogger("spanwatch.sim")


def fabric_arguments(p: argparse.ArgumentParser) -> None:
    """The fabric's options, shared by ``sim`` and ``demo``."""
    p.add_argument(
        "--distance-km", type=float, default=100.0, help=f"fibre route (up to {MAX_DISTANCE_KM:g})"
    )
    p.add_argument("--waves", type=int, default=4, help=f"parallel 800G waves (up to {MAX_WAVES})")
    p.add_argument("--buffer", choices=["deep", "shallow"], default="deep", help="buffer profile")
    p.add_argument("--lossy", action="store_true", help="no PFC: tail-drop instead of pausing")
    p.add_argument("--seed", type=int, default=1)


def arguments(p: argparse.ArgumentParser) -> None:
    """``spanwatch sim`` options."""
    fabric_arguments(p)
    p.add_argument("--out", type=Path, default=Path("spanwatch-sim"), help="where config.yaml is written")
    p.add_argument("--duration", type=float, default=None, help="seconds to run (default: until Ctrl-C)")
    p.add_argument("--listen", default="127.0.0.1:9464", help="the /metrics address the config gives")


def params(args: argparse.Namespace) -> FabricParams:
    return FabricParams(
        distance_km=args.distance_km,
        waves=args.waves,
        buffer=args.buffer,
        lossless=not args.lossy,
        seed=args.seed,
    ).validate()


def free_port() -> int:
    """A free TCP port on loopback (bound and released: another process could take it, rarely)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    return asyncio.run(_sim(args))


async def _sim(args: argparse.Namespace) -> int:
    sim = SimulatedFabric(params(args), episodes_over_s=args.duration or 60.0)
    await sim.start()
    try:
        path = write_config(sim, args.out, args.listen)
        print(path.read_text(), end="", flush=True)
        print(f"# written to {path}; run: spanwatch collect --config {path}", file=sys.stderr, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=args.duration)
    finally:
        await sim.stop()
    return 0
