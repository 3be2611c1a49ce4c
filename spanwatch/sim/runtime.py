"""The simulated fabric, live: the model at the wall clock, its switches' SNMP agents and gNMI targets.

``SimulatedFabric`` advances the model from an asyncio task in small chunks (at most 50 ms of model time
per turn of the event loop, so the protocol servers sharing the loop stay responsive), publishes a new
snapshot every 100 ms, and hands completed training steps to a callback. ``collector_config`` describes
it in the collector's config schema, and ``truth`` says what was injected and what each step exposed.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import grpc

from spanwatch.sim import physics, snapshot, snmp_agent, snmp_mib
from spanwatch.sim.episodes import Episode, Schedule, default_episodes
from spanwatch.sim.fabric import Fabric
from spanwatch.sim.gnmi_server import serve as serve_gnmi
from spanwatch.sim.gnmi_target import SimTarget
from spanwatch.sim.params import FabricParams
from spanwatch.sim.reflectors import LinkReflectors
from spanwatch.sim.snapshot import Snapshot
from spanwatch.sim.training import StepRecord

log = logging.getLogger(__name__)

DEVICES = ("dci1.site-a", "dci1.site-b")
SITES = ("a", "b")
LINK = "site-a-site-b"
SNAPSHOT_S = 0.1
CHUNK_S = 0.05
TICK_S = 0.01
SNMP_MODULES = ("if_mib", "etherlike", "juniper_ifoptics")
# qos before cumulus_qos: the first set wins the shared queue leaves; cumulus adds instant-queue-len,
# pause durations and the buffer pool.
GNMI_SETS = ("qos", "cumulus_qos", "optical_channel", "transceiver", "arista_pfc")


def iso(epoch_s: float) -> str:
    """RFC 3339 UTC with milliseconds and a Z."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def worst_penalty_db(distance_km: float) -> float:
    """An optical loss that takes OSNR 1 dB past the FEC limit at the episode's worst point."""
    return physics.nominal_osnr_db(distance_km) - physics.osnr_at_limit() + 1.0


class SimulatedFabric:
    """The running fabric.

    Args:
        params: the fabric.
        episodes_over_s: spread the default episodes over this many seconds (None: no episodes).
        episodes: explicit episodes instead of the default ones.
        community: the SNMPv2c community both agents answer.
        on_step: called with each completed training step (model times; see ``wall``).
    """

    def __init__(
        self,
        params: FabricParams,
        episodes_over_s: float | None = 60.0,
        episodes: list[Episode] | None = None,
        community: str = "spanwatch-sim",
        on_step: Callable[[StepRecord], None] | None = None,
    ) -> None:
        self.params = params.validate()
        if episodes is None and episodes_over_s is not None:
            episodes = default_episodes(episodes_over_s, params.waves, worst_penalty_db(params.distance_km))
        self.episodes = episodes or []
        self.fabric = Fabric(params, Schedule(self.episodes, params.waves))
        self.community = community
        self.on_step = on_step
        self.steps: list[StepRecord] = []
        self.t0 = time.time()
        self._mono0 = time.monotonic()
        self.snap: Snapshot = snapshot.take(self.fabric, time.time_ns(), 0.0)
        self._tables: list[tuple[Snapshot | None, snmp_agent.Table]] = [(None, ([], [])), (None, ([], []))]
        self.snmp_ports: list[int] = []
        self.gnmi_ports: list[int] = []
        self._transports: list[asyncio.DatagramTransport] = []
        self._servers: list[grpc.aio.Server] = []
        self._task: asyncio.Task[None] | None = None
        self.lag_s = 0.0
        self.reflectors = LinkReflectors(lambda: self.fabric.one_way_s, SITES)

    # -- lifecycle -----------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the servers on free loopback ports and the model's clock."""
        self.t0, self._mono0 = time.time(), time.monotonic()
        epoch_ns = time.time_ns()
        for d in range(2):
            transport, port = await snmp_agent.serve(self.community, functools.partial(self.table, d))
            self._transports.append(transport)
            self.snmp_ports.append(port)
            server, gport = await serve_gnmi(SimTarget(lambda: self.snap, d, epoch_ns))
            self._servers.append(server)
            self.gnmi_ports.append(gport)
        self.reflectors.start()
        self._task = asyncio.create_task(self._run(), name="sim-fabric")

    async def stop(self) -> None:
        """Stop the model and close every server."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for transport in self._transports:
            transport.close()
        self.reflectors.stop()
        await asyncio.gather(*(s.stop(grace=0.5) for s in self._servers))
        self._transports, self._servers = [], []

    async def _run(self) -> None:
        f = self.fabric
        published = 0.0
        while True:
            target = time.monotonic() - self._mono0
            end = min(target, f.t + CHUNK_S)
            while f.t + f.dt <= end + 1e-12:
                f.step()
            self.lag_s = target - f.t
            self._drain()
            if f.t - published >= SNAPSHOT_S:
                published = f.t
                self.snap = snapshot.take(f, int((self.t0 + f.t) * 1e9), f.t, self.snap)
            await asyncio.sleep(TICK_S if self.lag_s < CHUNK_S else 0)

    def _drain(self) -> None:
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
            table = snmp_mib.build(self.snap, d, DEVICES[d])
            self._tables[d] = (self.snap, table)
        return table

    def wall(self, model_s: float) -> float:
        """Epoch seconds of a model time."""
        return self.t0 + model_s

    def step_line(self, r: StepRecord) -> dict[str, Any]:
        """The plain step log line of a step (interfaces.md)."""
        return {"step": r.step, "start": iso(self.wall(r.start_s)), "end": iso(self.wall(r.end_s)), "rank": 0}

    def collector_config(
        self, listen: str, archive: str = "archive", community_file: str = "community"
    ) -> dict[str, Any]:
        """The collector config (as a YAML-ready dict) that points at this fabric.

        Args:
            listen: the collector's ``/metrics`` address.
            archive: the archive path (relative to the config file).
            community_file: the file holding the SNMP community (relative to the config file).
        """
        targets = []
        for d, name in enumerate(DEVICES):
            targets.append(
                {
                    "name": name,
                    "labels": {
                        "site": SITES[d],
                        "vendor": "spanwatch-sim",
                        "model": f"dci-{self.params.buffer}",
                    },
                    "snmp": {
                        "address": f"127.0.0.1:{self.snmp_ports[d]}",
                        "version": "2c",
                        "community_file": community_file,
                        "modules": list(SNMP_MODULES),
                        "interval": "1s",
                        "timeout": "900ms",
                    },
                    "gnmi": {
                        "address": f"127.0.0.1:{self.gnmi_ports[d]}",
                        "insecure": True,
                        "sample_interval": "1s",
                        "subscriptions": list(GNMI_SETS),
                    },
                }
            )
        members = [
            {"device": name, "interface": snmp_mib.interface_name(w), "component": f"OpticalChannel1/{w + 1}"}
            for name in DEVICES
            for w in range(self.params.waves)
        ]
        return {
            "collector": {"listen": listen, "archive": {"path": archive, "flush_interval": "1s"}},
            "defaults": {
                "interval": "1s",
                "timeout": "900ms",
                "fibre_delay_us_per_km": physics.FIBRE_DELAY_S_PER_KM * 1e6,
            },
            "targets": targets,
            "links": [
                {
                    "name": LINK,
                    "site_a": "a",
                    "site_b": "b",
                    "distance_km": self.params.distance_km,
                    "members": members,
                    "probe": self.reflectors.probe_config(),
                }
            ],
        }

    def truth(self) -> dict[str, Any]:
        """Every injected episode and, per completed step, the network time it exposed and why."""
        return {
            "link": LINK,
            "fabric": {
                **asdict(self.params),
                "one_way_delay_s": self.fabric.one_way_s,
                "rtt_s": self.fabric.rtt_s,
            },
            "episodes": [self._episode(e) for e in self.episodes if e.start_s < self.fabric.t],
            "steps": [self._step(r) for r in self.steps],
        }

    def _episode(self, e: Episode) -> dict[str, Any]:
        out = {
            "kind": e.kind,
            "start": iso(self.wall(e.start_s)),
            "end": iso(self.wall(e.end_s)),
            "link": LINK,
            "device": DEVICES[e.device],
            "interface": snmp_mib.interface_name(e.wave),
            "wave": e.wave,
            "magnitude": e.magnitude,
        }
        if e.kind == "wave_down":
            out["peer"] = DEVICES[1 - e.device]
        return out

    def _step(self, r: StepRecord) -> dict[str, Any]:
        culprits = [
            {
                "device": DEVICES[c.device],
                "interface": snmp_mib.interface_name(c.wave),
                "wave": c.wave,
                "late_s": round(c.late_s, 6),
                "causes": sorted(c.causes),
            }
            for c in sorted(r.culprits.values(), key=lambda c: -c.late_s)
        ]
        return {
            "step": r.step,
            "start": iso(self.wall(r.start_s)),
            "end": iso(self.wall(r.end_s)),
            "compute_s": round(r.compute_end_s - r.start_s, 6),
            "network_s": round(r.network_s, 6),
            "ideal_network_s": round(r.ideal_network_s, 6),
            "excess_s": round(r.excess_s, 6),
            "culprits": culprits,
        }
