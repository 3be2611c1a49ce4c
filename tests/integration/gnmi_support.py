"""Helpers for the gNMI integration tests: the recordings, a loopback replay server, waiting.

``python tests/integration/gnmi_support.py RECORDING [--port N] [--repeat N]`` replays a recording on
loopback by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import ParseDict
from pygnmi.spec.v080 import gnmi_pb2

from collector.config import GnmiConfig
from collector.mappings import gnmi_subscription_names
from spanwatch.sim.gnmi_server import GnmiServer, serve

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = PROJECT_ROOT.parent / "shared" / "testdata" / "gnmi"


def load_recording(path: str | Path) -> list[Any]:
    """Parse a recording: a JSON list of protojson ``SubscribeResponse`` messages.

    Raises:
        OSError, ValueError: unreadable file or not a recording.
    """
    items = json.loads(Path(path).read_text())
    return [ParseDict(item, gnmi_pb2.SubscribeResponse()) for item in items]


def recording_cases() -> list[str]:
    """Every recorded case (empty when the shared test data is absent)."""
    if not RECORDINGS.is_dir():
        return []
    return sorted(p.parent.name for p in RECORDINGS.glob("*/responses.json"))


def recording(case: str) -> Path:
    path = RECORDINGS / case / "responses.json"
    if not path.is_file():
        pytest.skip(f"shared gNMI recordings not found at {RECORDINGS} (clone ../shared beside the project)")
    return path


def config(port: int, subscriptions: tuple[str, ...] | None = None, interval: str = "1s") -> GnmiConfig:
    return GnmiConfig.model_validate(
        {
            "address": f"127.0.0.1:{port}",
            "insecure": True,
            "sample_interval": interval,
            "subscriptions": subscriptions or tuple(sorted(gnmi_subscription_names())),
        }
    )


@asynccontextmanager
async def running(
    servicer: GnmiServer, credentials: grpc.ServerCredentials | None = None
) -> AsyncIterator[int]:
    """Serve ``servicer`` on a free loopback port for the duration of the block."""
    server, port = await serve(servicer, credentials=credentials)
    try:
        yield port
    finally:
        await server.stop(grace=None)


async def until(predicate: Callable[[], bool], within: float = 10.0) -> None:
    """Wait (real time) until ``predicate()`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


async def _replay(args: argparse.Namespace) -> None:
    servicer = GnmiServer(load_recording(args.recording), repeat=args.repeat, hold=not args.end)
    server, port = await serve(servicer, port=args.port)
    print(port, flush=True)
    await server.wait_for_termination()


def main(argv: Sequence[str] | None = None) -> None:
    """Replay a recording on loopback until interrupted."""
    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("recording")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--end", action="store_true", help="end each stream after the responses")
    asyncio.run(_replay(p.parse_args(argv)))


if __name__ == "__main__":
    main()
