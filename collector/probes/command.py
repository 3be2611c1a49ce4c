"""``spanwatch reflect``: a stand-alone TWAMP-light reflector, for a site whose far end runs no collector."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal

from collector.config import TWAMP_PORT, split_host_port
from collector.errors import SpanwatchError
from collector.probes.twamp import Reflector

log = logging.getLogger(__name__)


def arguments(p: argparse.ArgumentParser) -> None:
    """``reflect`` options."""
    p.add_argument(
        "--listen",
        default=f"0.0.0.0:{TWAMP_PORT}",
        help=f"host:port to answer TWAMP-light test packets on (default port {TWAMP_PORT})",
    )
    p.add_argument("--duration", type=float, default=None, help="seconds to run (default: until stopped)")


def run(args: argparse.Namespace) -> int:
    """Answer probes until SIGINT or SIGTERM (or ``--duration``)."""
    return asyncio.run(_reflect(args.listen, args.duration))


async def _reflect(listen: str, duration: float | None) -> int:
    try:
        host, port = split_host_port(listen)
        reflector = Reflector(host or "0.0.0.0", port or TWAMP_PORT)
    except (OSError, ValueError) as e:
        raise SpanwatchError(f"cannot listen on {listen}: {getattr(e, 'strerror', None) or e}") from None
    reflector.start()
    log.info("reflecting TWAMP-light test packets on %s (port %d)", listen, reflector.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=duration)
    finally:
        reflector.close()
    log.info("stopped after reflecting %d packets", reflector.reflected)
    return 0
