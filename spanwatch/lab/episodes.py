"""Episodes on the real network: iperf3 cross traffic, a rate cut, a link down, a compute stall.

Each episode is an ``Action`` started and ended by the lab's clock. Cross traffic is UDP at ``load`` x the
class's rate from site a's generator to site b's (``-R`` for b to a), pinned to the link by its port and
marked with the job's DSCP or none (background); every iperf3 runs under ``timeout -s KILL`` so it ends
even if the lab does not. A rate cut lowers the link's htb rates and the speed its ports report over SNMP.
A compute stall is the training job's own doing (``--stall``), nothing here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spanwatch.lab.config import SITES, EpisodeSpec
from spanwatch.lab.netns import Process, run
from spanwatch.lab.services import IPERF3, Snmpd
from spanwatch.lab.topology import Link, Plan, device, router_ns

KILL_AFTER_S = 5.0  # beyond the episode: iperf3's own end, then SIGKILL
UDP_PAYLOAD = 1400


@dataclass
class Action:
    """One scheduled episode and where it acts."""

    index: int
    spec: EpisodeSpec
    plan: Plan
    logs: Path
    snmpds: Sequence[Snmpd] = ()  # a rate cut is reported as the ports' speed
    started: float | None = None
    ended: float | None = None
    checked: bool = False
    process: Process | None = field(default=None, repr=False)

    @property
    def link(self) -> Link | None:
        return None if self.spec.link is None else self.plan.link(self.spec.link)

    @property
    def direction(self) -> str:
        """``a-b`` or ``b-a``: the egress it loads (default: the way the job's data crosses the link)."""
        if self.spec.direction is not None:
            return self.spec.direction
        return (self.link and self.plan.job_direction(self.link)) or "a-b"

    @property
    def traffic_class(self) -> int:
        return (
            self.plan.config.job.traffic_class if self.spec.traffic_class is None else self.spec.traffic_class
        )

    @property
    def network(self) -> bool:
        return self.spec.kind != "compute_stall"

    def start(self, now: float) -> None:
        self.started = now
        link = self.link
        if self.spec.kind == "congestion" and link is not None:
            self.process = self._iperf(link)
        elif self.spec.kind == "rate_cut" and link is not None:
            for site in SITES:
                for cmd in self.plan.rate(router_ns(site), link, self.spec.factor):
                    run(cmd)
            for agent in self.snmpds:
                agent.rate(link, self.spec.factor)
        elif self.spec.kind == "link_down" and link is not None:
            for site in SITES:
                run(["ip", "-n", router_ns(site), "link", "set", link.ifname, "down"])

    def end(self, now: float) -> None:
        self.ended = now
        link = self.link
        if self.process is not None:
            self.process.stop()
        if self.spec.kind == "rate_cut" and link is not None:
            for site in SITES:
                for cmd in self.plan.rate(router_ns(site), link, 1.0):
                    run(cmd)
            for agent in self.snmpds:
                agent.rate(link, 1.0)
        elif self.spec.kind == "link_down" and link is not None:
            for site in SITES:
                run(["ip", "-n", router_ns(site), "link", "set", link.ifname, "up"])
            # Going down removed the link's pinned routes: put them back so its flows return.
            for site in SITES:
                for cmd in self.plan.pinned_routes(site, link):
                    run(cmd)

    def _iperf(self, link: Link) -> Process:
        job = self.plan.config.job
        ours = self.traffic_class == job.traffic_class
        mbit = (link.spec.job_mbit if ours else link.spec.background_mbit) * self.spec.load
        client, server = self.plan.generator(SITES[0]), self.plan.generator(SITES[1])
        seconds = max(1, round(self.spec.duration))
        argv = [
            "timeout", "-s", "KILL", f"{seconds + KILL_AFTER_S:g}",
            IPERF3, "-c", server.address, "-p", str(link.port), "-B", client.address,
            "-u", "-b", f"{mbit:.3f}M", "-l", str(UDP_PAYLOAD), "-t", str(seconds),
            "-S", str(job.dscp << 2 if ours else 0), "--connect-timeout", "2000",
        ]  # fmt: skip
        if self.direction == "b-a":
            argv.append("-R")
        return Process(f"episode-{self.index}-{self.spec.kind}", client.ns, argv, self.logs)

    # -- what the truth records ----------------------------------------------------------------------
    def places(self) -> dict[str, Any]:
        """Devices, interfaces and queues the episode touched (``device/interface[/queue]``)."""
        link = self.link
        if link is None:
            return {"devices": [], "interfaces": [], "queues": []}
        sites = [self.direction[0]] if self.spec.kind == "congestion" else list(SITES)
        devices = [device(s) for s in sites]
        queue = [] if self.spec.kind == "link_down" else [str(self.traffic_class)]
        return {
            "devices": devices,
            "interfaces": [f"{d}/{link.ifname}" for d in devices],
            "queues": [f"{d}/{link.ifname}/{q}" for d in devices for q in queue],
            "queue": queue[0] if queue else None,
        }
