"""The lab's network: who lives in which namespace, its addresses, and the commands that build it.

Per site: two training hosts (``swlab-a1``, ``swlab-a2``; ``swlab-b1``, ``swlab-b2``), a traffic generator
(``swlab-ga``, ``swlab-gb``: the other tenants), and a DCI router (``swlab-ra``, ``swlab-rb``). The routers
are joined by one veth pair per link (``dci1``, ``dci2``...); each end's egress is the bottleneck: an
``htb`` class per traffic class (the job's, and background) with its own ``bfifo`` of the link's buffer
depth. A management namespace (``swlab-mgmt``) reaches each router's ``mgmt0``: the collector runs there,
the routers' snmpd and gNMI agent listen there, as on a switch's out-of-band port.

Addresses are 198.18.0.0/15 (RFC 2544's benchmarking range) and exist only inside these namespaces: no
veth end is ever in the host's namespace, so nothing routes to the host's interfaces or beyond.

Routing: every remote prefix has a multipath route over all links with the L4 hash (ECMP by flow). The
job's two cross-site ring flows and the generators' flows are pinned to a link by policy rules (by host
pair, by port), so that the lab knows which link carries what; when a link goes down its pinned routes
vanish and those flows fall back to the multipath route over the links left.
"""

from __future__ import annotations

from dataclasses import dataclass

from spanwatch.lab.config import SITES, LabConfig, LinkSpec
from spanwatch.lab.netns import PREFIX

MGMT = f"{PREFIX}mgmt"
IPERF_PORT = 5201  # + link index: one generator port per link
GLOO_PORT = 29500
SNMP_PORT = 161
GNMI_PORT = 6030
TABLE = 100  # + link index: the policy table that pins flows to one link
PROBE_PORT = 862  # TWAMP-light: each link's far router reflects on its own address on the link
PROBE_TABLE = 200  # + link index: the far router's table that returns a probe over the link it came by
MTU_BYTES = 1500


def router_ns(site: str) -> str:
    return f"{PREFIX}r{site}"


def device(site: str) -> str:
    """The router's name as the collector and the analysis know it."""
    return f"dci-lab-{site}"


@dataclass(frozen=True)
class Host:
    """A host namespace behind a site's router (a training rank or the site's generator)."""

    ns: str
    site: str
    subnet: int  # third octet of its /24
    rank: int | None
    router_if: str

    @property
    def address(self) -> str:
        return f"198.18.{self.subnet}.2"

    @property
    def gateway(self) -> str:
        return f"198.18.{self.subnet}.1"


@dataclass(frozen=True)
class Link:
    """One inter-site link: a veth pair ``dci<N>`` between the routers."""

    index: int
    spec: LinkSpec

    @property
    def ifname(self) -> str:
        return f"dci{self.index + 1}"

    def address(self, site: str) -> str:
        return f"198.18.{32 + self.index}.{1 + SITES.index(site)}"

    @property
    def table(self) -> int:
        return TABLE + self.index

    @property
    def port(self) -> int:
        return IPERF_PORT + self.index


def class_id(traffic_class: int) -> str:
    """The htb class minor (and leaf qdisc major) of a traffic class, hex as tc reads it: 3 -> ``13``."""
    return f"{0x10 + traffic_class:x}"


class Plan:
    """Every namespace, address and link of one lab (pure data: no system calls)."""

    def __init__(self, config: LabConfig) -> None:
        self.config = config
        self.links = [Link(i, spec) for i, spec in enumerate(config.links)]
        # gloo's ring may run either way round: the control run's byte counts settle it per link.
        self.measured: dict[int, str] = {}
        self.hosts: list[Host] = []
        for s, site in enumerate(SITES):
            for i in range(2):
                self.hosts.append(Host(f"{PREFIX}{site}{i + 1}", site, 1 + 2 * s + i, 2 * s + i, f"h{i + 1}"))
            self.hosts.append(Host(f"{PREFIX}g{site}", site, 17 + s, None, "gen"))

    # -- who is where --------------------------------------------------------------------------------
    @property
    def ranks(self) -> list[Host]:
        return sorted((h for h in self.hosts if h.rank is not None), key=lambda h: h.rank or 0)

    def generator(self, site: str) -> Host:
        return next(h for h in self.hosts if h.site == site and h.rank is None)

    def namespaces(self) -> list[str]:
        return [MGMT, *(router_ns(s) for s in SITES), *(h.ns for h in self.hosts)]

    @staticmethod
    def mgmt_address(site: str) -> str:
        """The router's management address (where its snmpd and gNMI agent listen)."""
        return f"198.19.{1 + SITES.index(site)}.2"

    def ring_flows(self) -> list[tuple[Host, Host, Link]]:
        """The job's cross-site ring neighbours (gloo's ring joins rank r and r + 1) and the link each pair
        is pinned to, both ways: the k-th crossing on link k (mod the link count)."""
        ranks, out = self.ranks, list[tuple[Host, Host, Link]]()
        for r, src in enumerate(ranks):
            dst = ranks[(r + 1) % len(ranks)]
            if src.site != dst.site:
                out.append((src, dst, self.links[len(out) % len(self.links)]))
        return out

    def job_direction(self, link: Link) -> str | None:
        """Which way (``a-b``/``b-a``) the job's data crosses ``link``, if it does: as measured in the
        control run (``measured``), else as the ring's rank order says."""
        if link.index in self.measured:
            return self.measured[link.index]
        for src, dst, pinned in self.ring_flows():
            if pinned.index == link.index:
                return f"{src.site}-{dst.site}"
        return None

    def link(self, name: str) -> Link:
        return next(link for link in self.links if link.spec.name == name)

    # -- the commands ----------------------------------------------------------------------------------
    def build(self, netem: bool) -> list[list[str]]:
        """The ``ip``/``tc``/``sysctl`` commands that build the lab, in order."""
        cmds: list[list[str]] = [["ip", "netns", "add", ns] for ns in self.namespaces()]
        cmds += [["ip", "-n", ns, "link", "set", "lo", "up"] for ns in self.namespaces()]
        for site in SITES:
            cmds += self._router(site)
        for host in self.hosts:
            cmds += self._host(host)
        for link in self.links:
            cmds += self._link(link, netem)
        for site in SITES:
            cmds += self._routes(site)
        for link in self.links:
            cmds += self._probe_path(link)
        return cmds

    def probe_target(self, link: Link) -> str:
        """Where the collector probes ``link``: the far router's address on it (site b's)."""
        return f"{link.address(SITES[1])}:{PROBE_PORT}"

    def _probe_path(self, link: Link) -> list[list[str]]:
        """A probe from the management namespace crosses ``link`` both ways: to the far router's address
        on it through the near router, and back from that address over the same link."""
        near, far = SITES
        target, table = link.address(far), str(PROBE_TABLE + link.index)
        mgmt_net = f"198.19.{1 + SITES.index(near)}.0/24"
        r = router_ns(far)
        return [
            ["ip", "-n", MGMT, "route", "add", f"{target}/32", "via", self.mgmt_address(near)],
            ["ip", "-n", r, "rule", "add", "from", target, "to", mgmt_net, "table", table],
            ["ip", "-n", r, "route", "add", mgmt_net, "via", link.address(near), "dev", link.ifname,
             "table", table],
        ]  # fmt: skip

    def _router(self, site: str) -> list[list[str]]:
        r, n = router_ns(site), 1 + SITES.index(site)
        sysctl = ["ip", "netns", "exec", r, "sysctl", "-q", "-w"]
        return [
            [*sysctl, "net.ipv4.ip_forward=1", "net.ipv4.fib_multipath_hash_policy=1"],
            # Pinned flows come back on another link than the multipath route would pick.
            [*sysctl, "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"],
            [
                "ip",
                "link",
                "add",
                "mgmt0",
                "netns",
                r,
                "type",
                "veth",
                "peer",
                "name",
                f"to-r{site}",
                "netns",
                MGMT,
            ],
            ["ip", "-n", r, "addr", "add", f"{self.mgmt_address(site)}/24", "dev", "mgmt0"],
            ["ip", "-n", MGMT, "addr", "add", f"198.19.{n}.1/24", "dev", f"to-r{site}"],
            ["ip", "-n", r, "link", "set", "mgmt0", "up"],
            ["ip", "-n", MGMT, "link", "set", f"to-r{site}", "up"],
        ]

    def _host(self, h: Host) -> list[list[str]]:
        r = router_ns(h.site)
        return [
            [
                "ip",
                "link",
                "add",
                "eth0",
                "netns",
                h.ns,
                "type",
                "veth",
                "peer",
                "name",
                h.router_if,
                "netns",
                r,
            ],
            ["ip", "-n", h.ns, "addr", "add", f"{h.address}/24", "dev", "eth0"],
            ["ip", "-n", r, "addr", "add", f"{h.gateway}/24", "dev", h.router_if],
            *_offloads_off(h.ns, "eth0"),
            *_offloads_off(r, h.router_if),
            ["ip", "-n", h.ns, "link", "set", "eth0", "up"],
            ["ip", "-n", r, "link", "set", h.router_if, "up"],
            ["ip", "-n", h.ns, "route", "add", "default", "via", h.gateway],
            *(self._nic(h) if h.rank is not None else []),
        ]

    def _nic(self, h: Host) -> list[list[str]]:
        """A training host's NIC rate, just under the slowest link's job class: in a clean run the job's
        own flows queue in the host (where TCP's small-queue limit holds them back without loss), not at
        the DCI egress, as on a DCI with headroom; an episode then shows where it happens."""
        mbit = self.config.job.host_share * min(link.spec.job_mbit for link in self.links)
        return [
            ["tc", "-n", h.ns, "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", f"{mbit:.3f}mbit",
             "burst", "4kb", "limit", "4mb"],
        ]  # fmt: skip

    def _link(self, link: Link, netem: bool) -> list[list[str]]:
        a, b = (router_ns(s) for s in SITES)
        cmds = [
            [
                "ip",
                "link",
                "add",
                link.ifname,
                "netns",
                a,
                "type",
                "veth",
                "peer",
                "name",
                link.ifname,
                "netns",
                b,
            ]
        ]
        for site in SITES:
            r = router_ns(site)
            cmds += [
                ["ip", "-n", r, "addr", "add", f"{link.address(site)}/24", "dev", link.ifname],
                *_offloads_off(r, link.ifname),
                ["ip", "-n", r, "link", "set", link.ifname, "up"],
                *self.shaping(r, link, netem),
            ]
        return cmds

    def shaping(self, ns: str, link: Link, netem: bool, factor: float = 1.0) -> list[list[str]]:
        """The egress bottleneck of one link end: htb, a class per traffic class, a fifo each, filters."""
        job, bg, spec = self.config.job, self.config.job.background_class, link.spec
        dev = ["dev", link.ifname]
        tc = ["tc", "-n", ns]
        total = spec.port_mbit * factor
        cmds = [
            [*tc, "qdisc", "replace", *dev, "root", "handle", "1:", "htb", "default", class_id(bg)],
            [*tc, "class", "add", *dev, "parent", "1:", "classid", "1:1", "htb", *_rate(total)],
        ]
        for tclass, mbit, prio in ((job.traffic_class, spec.job_mbit, 0), (bg, spec.background_mbit, 1)):
            cid = class_id(tclass)
            cmds.append(
                [
                    *tc,
                    "class",
                    "add",
                    *dev,
                    "parent",
                    "1:1",
                    "classid",
                    f"1:{cid}",
                    "htb",
                    *_rate(mbit * factor),
                    "prio",
                    str(prio),
                ]
            )
            leaf = ["bfifo", "limit", str(spec.buffer_bytes)]
            if netem:  # the link's propagation delay, in the same queue, bounded by the same depth
                delay_ms = spec.distance_km * 0.0049
                leaf = [
                    "netem",
                    "delay",
                    f"{delay_ms:.3f}ms",
                    "limit",
                    str(max(1, spec.buffer_bytes // MTU_BYTES)),
                ]
            cmds.append([*tc, "qdisc", "add", *dev, "parent", f"1:{cid}", "handle", f"{cid}:", *leaf])
        u32 = [*tc, "filter", "add", *dev, "parent", "1:", "protocol", "ip"]
        tos = f"0x{job.dscp << 2:02x}"
        cmds += [
            # The job's class: its DSCP (another tenant in the same class marks it too) ...
            [
                *u32,
                "prio",
                "1",
                "u32",
                "match",
                "ip",
                "tos",
                tos,
                "0xfc",
                "flowid",
                f"1:{class_id(job.traffic_class)}",
            ],
            # ... and the training hosts' own traffic (gloo's sockets carry no DSCP).
            [
                *u32,
                "prio",
                "2",
                "u32",
                "match",
                "ip",
                "src",
                "198.18.0.0/20",
                "match",
                "ip",
                "dst",
                "198.18.0.0/20",
                "flowid",
                f"1:{class_id(job.traffic_class)}",
            ],
        ]
        return cmds

    def rate(self, ns: str, link: Link, factor: float) -> list[list[str]]:
        """Commands that set one link end's class rates to ``factor`` of the configured ones."""
        job, spec = self.config.job, link.spec
        tc = ["tc", "-n", ns, "class", "change", "dev", link.ifname]
        total = spec.port_mbit * factor
        return [
            [*tc, "parent", "1:", "classid", "1:1", "htb", *_rate(total)],
            [
                *tc,
                "parent",
                "1:1",
                "classid",
                f"1:{class_id(job.traffic_class)}",
                "htb",
                *_rate(spec.job_mbit * factor),
                "prio",
                "0",
            ],
            [
                *tc,
                "parent",
                "1:1",
                "classid",
                f"1:{class_id(job.background_class)}",
                "htb",
                *_rate(spec.background_mbit * factor),
                "prio",
                "1",
            ],
        ]

    def remote_prefixes(self, site: str) -> list[str]:
        return [f"198.18.{h.subnet}.0/24" for h in self.hosts if h.site != site]

    def _routes(self, site: str) -> list[list[str]]:
        r, other = router_ns(site), SITES[1 - SITES.index(site)]
        cmds: list[list[str]] = []
        hops = [w for link in self.links for w in ("nexthop", "via", link.address(other), "dev", link.ifname)]
        for prefix in self.remote_prefixes(site):
            cmds.append(["ip", "-n", r, "route", "add", prefix, *hops])
        for link in self.links:
            cmds += self.pinned_routes(site, link)
            for proto in ("tcp", "udp"):
                for way in ("dport", "sport"):
                    cmds.append(
                        [
                            "ip",
                            "-n",
                            r,
                            "rule",
                            "add",
                            "ipproto",
                            proto,
                            way,
                            str(link.port),
                            "table",
                            str(link.table),
                        ]
                    )
        for src, dst, link in self.ring_flows():
            for x, y in ((src, dst), (dst, src)):
                cmds.append(
                    [
                        "ip",
                        "-n",
                        r,
                        "rule",
                        "add",
                        "from",
                        x.address,
                        "to",
                        y.address,
                        "table",
                        str(link.table),
                    ]
                )
        return cmds

    def pinned_routes(self, site: str, link: Link) -> list[list[str]]:
        """The routes of ``link``'s policy table at ``site`` (again after the link comes back up)."""
        r, other = router_ns(site), SITES[1 - SITES.index(site)]
        return [
            [
                "ip",
                "-n",
                r,
                "route",
                "replace",
                prefix,
                "via",
                link.address(other),
                "dev",
                link.ifname,
                "table",
                str(link.table),
            ]
            for prefix in self.remote_prefixes(site)
        ]


def _rate(mbit: float) -> list[str]:
    # quantum: one MTU, so that htb shares per packet and does not warn at these small rates.
    return ["rate", f"{mbit:.3f}mbit", "ceil", f"{mbit:.3f}mbit", "quantum", str(MTU_BYTES + 14)]


def _offloads_off(ns: str, dev: str) -> list[list[str]]:
    """No TSO/GSO/GRO: the queues then hold wire-size packets, as a switch's do."""
    return [["ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"]]
