"""Helpers for the gNMI integration tests: the recordings, a loopback replay server, waiting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest

from collector.config import GnmiConfig
from collector.mappings import gnmi_subscription_names
from spanwatch.sim.gnmi_server import GnmiServer, serve

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = PROJECT_ROOT.parent / "shared" / "testdata" / "gnmi"


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
