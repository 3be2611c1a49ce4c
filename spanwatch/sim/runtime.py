"""The simulated fabric, live: the model at the wall clock, its switches' SNMP agents and gNMI targets.

``SimulatedFabric`` advances the model from an asyncio task in small chunks (at most 50 ms of model time
per turn of the event loop, so the protocol servers sharing the loop stay responsive), publishes a new
snapshot every 100 ms, and hands completed training steps to a callback. ``collector_config`` describes
it in the collector's config schema, and ``truth`` is ``truth.json`` (``spanwatch.sim.truth``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import grpc

from collector import grpc_wakeups
from collector.contracts.fibre import one_way_delay_s
from spanwatch.sim import physics, snapshot, snmp_agent, snmp_mib
from spanwatch.sim.fabric import Fabric
from spanwatch.sim.gnmi_server import serve as serve_gnmi
from spanwatch.sim.gnmi_target import SimTarget
from spanwatch.sim.reflectors import LinkReflectors
from spanwatch.sim.scenario import Scenario
from spanwatch.sim.snapshot import Snapshot
from spanwatch.sim.training import StepRecord
from spanwatch.sim.truth_build import build_truth

log = logging.getLogger(__name__)

SNAPSHOT_S = 0.1
CHUNK_S = 0.05
TICK_S = 0.01
SNMP_MODULES = ("if_mib", "etherlike", "juniper_ifoptics")
# qos before cumulus_qos: the first set wins the shared queue leaves; cumulus adds instant-queue-len,
# pause durations and the buffer pool; qos_input reads the receive stage as the ingress queues.
GNMI_SETS = ("qos", "cumulus_qos", "qos_input", "optical_channel", "transceiver", "arista_pfc")
# Without SNMP, gNMI reads the interfaces too (counters, speed, oper-status), as an operator would configure
# a gNMI-only switch: else no speed (no steady serialization) and no wave down but the optics' no-signal.
GNMI_ONLY_SETS = ("interfaces", *GNMI_SETS)


class SimulatedFabric:
    """The running fabric.

    Args:
        scenario: what to run.
        community: the SNMPv2c community every agent answers.
        on_step: called with each completed training step (model times; see ``wall``).
    """

    def __init__(
        self,
        scenario: Scenario,
        community: str = "spanwatch-sim",
        on_step: Callable[[StepRecord], None] | None = None,
    ) -> None:
        self.scenario = scenario
        self.fabric = Fabric(scenario)
        self.devices = self.fabric.lay.devices
        self.community = community
        self.on_step = on_step
        self.steps: list[StepRecord] = []
        self.t0 = time.time()
        self._mono0 = time.monotonic()
        self.snap: Snapshot = snapshot.take(self.fabric, time.time_ns(), 0.0)
        self._tables: list[tuple[Snapshot | None, snmp_agent.Table]] = [
            (None, ([], [])) for _ in self.devices
        ]
        self.snmp_ports: list[int] = []
        self.gnmi_ports: list[int] = []
        self._transports: list[asyncio.DatagramTransport] = []
        self._servers: list[grpc.aio.Server] = []
        self._task: asyncio.Task[None] | None = None
        self._published = asyncio.Event()
        self.lag_s = 0.0
        # A TWAMP-light responder at each end of each link, answering with that link's fibre delay.
        self.reflectors = {
            link.name: LinkReflectors(functools.partial(one_way_delay_s, link.distance_km), link.between)
            for link in scenario.links
        }

    # -- lifecycle -----------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the servers on free loopback ports and the model's clock."""
        self.t0, self._mono0 = time.time(), time.monotonic()
        epoch_ns = time.time_ns()
        telemetry = self.scenario.telemetry
        for d in range(len(self.devices)):
            if telemetry.snmp:
                transport, port = await snmp_agent.serve(self.community, functools.partial(self.table, d))
                self._transports.append(transport)
                self.snmp_ports.append(port)
            if telemetry.gnmi:
                target = SimTarget(lambda: self.snap, d, epoch_ns, self.next_snapshot)
                server, gport = await serve_gnmi(target)
                self._servers.append(server)
                self.gnmi_ports.append(gport)
        if self._servers:
            # Catching up, the model holds the loop for a chunk per turn: without this, grpc's wake-ups
            # pile up and stall every gNMI stream of the process for seconds (collector.grpc_wakeups).
            grpc_wakeups.drain_wakeups(asyncio.get_running_loop())
        for reflectors in self.reflectors.values():
            reflectors.start()
        self._task = asyncio.create_task(self._run(), name="sim-fabric")

    async def freeze(self) -> None:
        """Stop advancing the model; the servers keep answering from the last state.

        A fabric behind real time steps without yielding much, so the demo freezes it before stopping the
        collector: the collector's shutdown then has the event loop to itself.
        """
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def stop(self) -> None:
        """Stop the model and close every server."""
        await self.freeze()
        for transport in self._transports:
            transport.close()
        for reflectors in self.reflectors.values():
            reflectors.stop()
        await asyncio.gather(*(s.stop(grace=0.5) for s in self._servers))
        self._transports, self._servers = [], []

    async def _run(self) -> None:
        f = self.fabric
        published = 0.0
        while True:
            target = time.monotonic() - self._mono0
            end = min(target, f.t + CHUNK_S)
            f.step_until(end, 1e-12)
            self.lag_s = target - f.t
            self.drain()
            if f.t - published >= SNAPSHOT_S:
                published = f.t
                self.snap = snapshot.take(f, int((self.t0 + f.t) * 1e9), f.t, self.snap)
                self._published.set()
                self._published = asyncio.Event()
            await asyncio.sleep(TICK_S if self.lag_s < CHUNK_S else 0)

    async def next_snapshot(self) -> None:
        """Wait until the next snapshot is published (catching up, the loop turns once per chunk, so a
        waiter sees every snapshot)."""
        await self._published.wait()

    def drain(self) -> None:
        """Hand the steps the model completed to ``steps`` and ``on_step``."""
        job = self.fabric.job
        while job.completed:
            record = job.completed.pop(0)
            self.steps.append(record)
            if self.on_step is not None:
                self.on_step(record)

    # -- views ---------------------------------------------------------------------------------------
    def table(self, d: int) -> snmp_agent.Table:
        """Device ``d``'s OID table for the current snapshot."""
        snap, table = self._tables[d]
        if snap is not self.snap:
            table = snmp_mib.build(self.snap, d, self.devices[d].name)
            self._tables[d] = (self.snap, table)
        return table

    def wall(self, model_s: float) -> float:
        """Epoch seconds (switches' clock) of a model time."""
        return self.t0 + model_s

    def host(self, model_s: float) -> float:
        """Epoch seconds on the training hosts' clock (skewed by the scenario's ``clock_skew``)."""
        return self.t0 + model_s + self.scenario.job.clock_skew

    def collector_config(
        self, listen: str, archive: str = "archive", community_file: str = "community"
    ) -> dict[str, Any]:
        """The collector config (as a YAML-ready dict) that points at this fabric.

        Args:
            listen: the collector's ``/metrics`` address.
            archive: the archive path (relative to the config file).
            community_file: the file holding the SNMP community (relative to the config file).
        """
        interval = f"{self.scenario.telemetry.interval:g}s"
        timeout = f"{self.scenario.telemetry.interval * 0.9:g}s"
        targets = []
        for d, dev in enumerate(self.devices):
            target: dict[str, Any] = {
                "name": dev.name,
                "labels": {
                    "site": dev.site,
                    "vendor": dev.spec.vendor.switch,
                    "optics_vendor": dev.spec.vendor.optics,
                    "model": f"dci-{dev.spec.buffer_name}",
                },
            }
            if self.snmp_ports:
                target["snmp"] = {
                    "address": f"127.0.0.1:{self.snmp_ports[d]}",
                    "version": "2c",
                    "community_file": community_file,
                    "modules": list(SNMP_MODULES),
                    "interval": interval,
                    "timeout": timeout,
                }
            if self.gnmi_ports:
                target["gnmi"] = {
                    "address": f"127.0.0.1:{self.gnmi_ports[d]}",
                    "insecure": True,
                    "sample_interval": interval,
                    "subscriptions": list(GNMI_SETS if self.snmp_ports else GNMI_ONLY_SETS),
                }
            targets.append(target)
        links = []
        for link in self.scenario.links:
            members = [
                {
                    "device": dev.name,
                    "interface": snmp_mib.interface_name(w),
                    "component": f"OpticalChannel1/{w + 1}",
                }
                for dev in self.devices
                if dev.link == link.name
                for w in range(dev.waves)
            ]
            links.append(
                {
                    "name": link.name,
                    "site_a": link.between[0],
                    "site_b": link.between[1],
                    "distance_km": link.distance_km,
                    "optics": link.optics,
                    "members": members,
                    "probe": self.reflectors[link.name].probe_config(),
                }
            )
        return {
            "collector": {"listen": listen, "archive": {"path": archive, "flush_interval": "1s"}},
            "defaults": {
                "interval": interval,
                "timeout": timeout,
                "fibre_delay_us_per_km": physics.FIBRE_DELAY_S_PER_KM * 1e6,
            },
            "targets": targets,
            "links": links,
        }

    def truth(self) -> dict[str, Any]:
        """``truth.json`` (``spanwatch.sim.truth.Truth``) for what has run so far."""
        return build_truth(self.scenario, self.fabric, self.steps, self.t0).model_dump(mode="json")
