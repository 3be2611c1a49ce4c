"""Replay every recorded real-device gNMI stream through a loopback server into the store; compare the
exposition with its golden file (tests/golden/gnmi/<case>.prom; regenerate with ``--update-golden``)."""

from __future__ import annotations

import asyncio

import pytest

from collector.clock import FakeClock
from collector.exporters.prometheus import render
from collector.mappings import gnmi_subscription_names
from collector.sources.gnmi.paths import load_set
from collector.sources.gnmi.source import GnmiSource
from collector.store import Store
from spanwatch.sim.gnmi_server import GnmiServer
from tests.integration.gnmi_support import (
    PROJECT_ROOT,
    config,
    load_recording,
    recording,
    recording_cases,
    running,
    until,
)

GOLDEN = PROJECT_ROOT / "tests" / "golden" / "gnmi"
pytestmark = pytest.mark.integration


# How far behind the replay ran depends on scheduling, not on the recording: not part of the golden file.
TIMING_FAMILIES = (
    "spanwatch_ingest_lag_seconds",
    "spanwatch_ingest_backlog_seconds",
    "spanwatch_coalesced_samples_total",
)


def exposition(case: str, text: str) -> str:
    text = "".join(line + "\n" for line in text.splitlines() if not any(f in line for f in TIMING_FAMILIES))
    mapped = any(line.startswith("dci_") for line in text.splitlines())
    note = (
        "maps onto catalogue series"
        if mapped
        else "maps to no catalogue series (its paths are not in the catalogue); only collector health"
    )
    return f"# gNMI replay of shared/testdata/gnmi/{case}: {note}\n{text}"


@pytest.mark.parametrize("case", recording_cases() or ["(no recordings)"])
async def test_replay_matches_golden(case: str, update_golden: bool) -> None:
    responses = load_recording(recording(case))
    clock = FakeClock()
    store = Store(clock=clock)
    async with running(GnmiServer(responses, sync=True, hold=True)) as port:
        # Every set on one stream: a set with its own prefix target (SONiC's COUNTERS_DB) would open a
        # second stream, and the replay server answers every stream with the whole recording.
        sets = tuple(s for s in sorted(gnmi_subscription_names()) if load_set(s).target is None)
        source = GnmiSource("replay", config(port, sets), clock=clock)
        task = asyncio.create_task(source.run(store))
        try:
            await until(lambda: source.responses >= len(responses) + 1)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    text = exposition(case, render(store))
    golden = GOLDEN / f"{case}.prom"
    if update_golden:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.is_file(), f"no golden file {golden}; run pytest --update-golden once and review it"
    assert text == golden.read_text()
