"""What runs inside the lab's namespaces besides the job: the routers' snmpd and gNMI agents, the iperf3
servers of the generators, and the collector (in the management namespace), with its config."""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from spanwatch.lab.agent import QueueSpec
from spanwatch.lab.config import SITES
from spanwatch.lab.netns import LabError, Process
from spanwatch.lab.topology import GNMI_PORT, MGMT, SNMP_PORT, Link, Plan, class_id, device, router_ns

SNMPD = "/usr/sbin/snmpd"
IPERF3 = "/usr/bin/iperf3"
COMMUNITY = "spanwatch-lab"
COLLECTOR_LISTEN = "127.0.0.1:9464"  # the management namespace's own loopback
READY_TIMEOUT_S = 30.0
PROBE_INTERVAL = "5s"  # ten probes spread over it per link: a handful of packets a second
ETHERNET_CSMACD = 6  # IANAifType of a veth, as snmpd reads it


class Snmpd:
    """Debian's snmpd in a router's namespace: IF-MIB of its real interfaces, v2c from the mgmt side.

    Each inter-site link reports its shaped rate as its speed (``interface NAME TYPE SPEED`` sets ifSpeed and
    ifHighSpeed), as a switch port reports its line rate: the veth's own 10G says nothing of the link. A rate
    cut is reported too (``rate``), as a port stepping down its line rate would be.
    """

    def __init__(self, plan: Plan, site: str, state: Path, logs: Path) -> None:
        self.plan = plan
        self.site = site
        self.factors: dict[str, float] = {}
        folder = state / f"snmpd-{site}"
        persistent = folder / "persistent"  # snmpd rewrites <dir>/snmpd.conf on exit: not the config's path
        persistent.mkdir(parents=True, exist_ok=True)
        self.conf = folder / "snmpd.conf"
        self._write()
        argv = [
            SNMPD,
            "-f",
            "-Lf",
            str(folder / "snmpd.log"),
            "-C",
            "-c",
            str(self.conf),
            "-p",
            str(folder / "pid"),
        ]
        env = {"SNMP_PERSISTENT_DIR": str(persistent)}
        self.process = Process(f"snmpd-{site}", router_ns(site), argv, logs, env=env)

    def _write(self) -> None:
        address = self.plan.mgmt_address(self.site)
        manager = address.rsplit(".", 1)[0] + ".1"
        speeds = "".join(
            f"interface {link.ifname} {ETHERNET_CSMACD} "
            f"{round(link.spec.port_mbit * self.factors.get(link.spec.name, 1.0) * 1e6)}\n"
            for link in self.plan.links
        )
        self.conf.write_text(
            f"agentAddress udp:{address}:{SNMP_PORT}\n"
            f"rocommunity {COMMUNITY} {manager}\n"
            f"sysName {device(self.site)}\n"
            "dontLogTCPWrappersConnects yes\n" + speeds
        )

    def rate(self, link: Link, factor: float) -> None:
        """Report ``link``'s speed as ``factor`` of its shaped rate: snmpd re-reads its config on SIGHUP and
        serves the new speed from its next interface cache refresh (about a second, measured)."""
        self.factors[link.spec.name] = factor
        self._write()
        if self.process.alive():
            self.process.popen.send_signal(signal.SIGHUP)


def queue_specs(plan: Plan, site: str) -> list[QueueSpec]:
    """The router's egress queues on its inter-site links, as the agent reads them."""
    job = plan.config.job
    out = []
    for link in plan.links:
        for tclass in (job.traffic_class, job.background_class):
            cid = int(class_id(tclass), 16)
            out.append(
                QueueSpec(
                    interface=link.ifname,
                    queue=str(tclass),
                    leaf=cid << 16,
                    klass=(1 << 16) | cid,
                    buffer_bytes=link.spec.buffer_bytes,
                    profile=link.spec.profile,
                )
            )
    return out


def agent(plan: Plan, site: str, state: Path, logs: Path) -> Process:
    """The router's gNMI agent (``spanwatch.lab.agent serve``) in its namespace."""
    spec = state / f"queues-{site}.json"
    spec.write_text(json.dumps([dataclasses.asdict(q) for q in queue_specs(plan, site)]))
    listen = f"{plan.mgmt_address(site)}:{GNMI_PORT}"
    argv = [sys.executable, "-m", "spanwatch.lab.agent", "serve", "--listen", listen, "--spec", str(spec)]
    return Process(f"gnmi-{site}", router_ns(site), argv, logs)


def reflectors(plan: Plan, logs: Path) -> list[Process]:
    """A TWAMP-light reflector per link on the far router, on its address on the link."""
    far = router_ns(SITES[1])
    return [
        Process(
            f"reflect-{link.spec.name}",
            far,
            [sys.executable, "-m", "spanwatch", "reflect", "--listen", plan.probe_target(link)],
            logs,
        )
        for link in plan.links
    ]


def iperf_servers(plan: Plan, logs: Path) -> list[Process]:
    """One iperf3 server per link in site b's generator (idle until a bounded client asks)."""
    gen = plan.generator(SITES[1])
    return [
        Process(
            f"iperf3-server-{link.spec.name}",
            gen.ns,
            [IPERF3, "-s", "-p", str(link.port), "-B", gen.address],
            logs,
        )
        for link in plan.links
    ]


def wait_ready(processes: list[Process], marker: dict[str, str], timeout: float = READY_TIMEOUT_S) -> None:
    """Wait until each process named in ``marker`` has printed its marker; any that died is an error."""
    deadline = time.monotonic() + timeout
    pending = dict(marker)
    while pending:
        for p in processes:
            if not p.alive():
                raise LabError(f"{p.name} exited at start: {p.tail()}")
            if p.name in pending and pending[p.name] in p.log_path.read_text(errors="replace"):
                del pending[p.name]
        if time.monotonic() > deadline:
            raise LabError(f"not ready after {timeout:g} s: {', '.join(pending)}")
        time.sleep(0.1)


def collector_config(plan: Plan, out: Path, distance_km: dict[str, float]) -> Path:
    """The collector config for the routers' agents (like the simulator's), written to ``out``."""
    community = out / "community"
    community.write_text(COMMUNITY + "\n")
    community.chmod(0o600)
    interval = f"{plan.config.interval:g}s"
    targets = [
        {
            "name": device(site),
            "labels": {"site": site, "vendor": "linux-lab", "model": "netns-htb"},
            "snmp": {
                "address": f"{plan.mgmt_address(site)}:{SNMP_PORT}",
                "version": "2c",
                "community_file": "community",
                "modules": ["if_mib"],
                "interval": interval,
                "timeout": "900ms",
            },
            "gnmi": {
                "address": f"{plan.mgmt_address(site)}:{GNMI_PORT}",
                "insecure": True,
                "sample_interval": interval,
                "subscriptions": ["qos", "cumulus_qos"],
            },
        }
        for site in SITES
    ]
    links = [
        {
            "name": link.spec.name,
            "site_a": SITES[0],
            "site_b": SITES[1],
            "distance_km": distance_km[link.spec.name],
            "members": [{"device": device(site), "interface": link.ifname} for site in SITES],
            "probe": {
                "interval": PROBE_INTERVAL,
                "count": 10,
                "timeout": "1s",
                "targets": [{"name": f"site-{SITES[1]}", "address": plan.probe_target(link)}],
            },
        }
        for link in plan.links
    ]
    config: dict[str, Any] = {
        "collector": {"listen": COLLECTOR_LISTEN, "archive": {"path": "archive", "flush_interval": "1s"}},
        "defaults": {"interval": interval, "timeout": "900ms"},
        "targets": targets,
        "links": links,
    }
    path = out / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def collector(config: Path, logs: Path) -> Process:
    """``spanwatch collect`` in the management namespace (the only place the agents are reachable from)."""
    argv = [sys.executable, "-m", "spanwatch", "--log-level", "warning", "collect", "--config", str(config)]
    return Process("collector", MGMT, argv, logs)
