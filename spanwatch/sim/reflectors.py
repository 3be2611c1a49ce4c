"""TWAMP-light reflectors at both ends of the simulated link, answering with the link's own delay.

One reflector per link end (site a, site b) on a free loopback port. Each takes a request as arriving one
fibre delay after it was sent and sends its answer one fibre delay before it reaches the sender
(``collector.probes.twamp.Reflector``'s emulation), so a collector probing either end measures the link's
round trip, 2 x distance x 4.9 us/km, plus what loopback itself adds (some microseconds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collector.probes.twamp import Reflector

INTERVAL = "2s"
COUNT = 10
TIMEOUT = "500ms"


class LinkReflectors:
    """The reflectors of one simulated link.

    Args:
        one_way_s: the link's one-way delay now, in seconds.
        sites: the link's two sites, in config order.
    """

    def __init__(self, one_way_s: Callable[[], float], sites: tuple[str, str]) -> None:
        self.one_way_s = one_way_s
        self.sites = sites
        self.reflectors: list[Reflector] = []
        self.ports: list[
            int
        ] = []  # one per site: the listening reflectors' (a recorder without sockets sets its own)

    def start(self) -> None:
        """Listen on free loopback ports (one per end), on the running loop."""
        for _ in self.sites:
            reflector = Reflector("127.0.0.1", 0, delay_s=self.one_way_s)
            reflector.start()
            self.reflectors.append(reflector)
            self.ports.append(reflector.port)

    def stop(self) -> None:
        for reflector in self.reflectors:
            reflector.close()
        self.reflectors = []
        self.ports = []

    def probe_config(self) -> dict[str, Any]:
        """The link's ``probe`` section of the collector config: a responder at each site."""
        return {
            "interval": INTERVAL,
            "count": COUNT,
            "timeout": TIMEOUT,
            "targets": [
                {"name": f"site-{site}", "address": f"127.0.0.1:{port}", "method": "twamp"}
                for site, port in zip(self.sites, self.ports, strict=True)
            ],
        }
