"""ICMP echo round trips through gufo-ping (raw sockets, or Linux ICMP datagram sockets).

Raw ICMP needs root or CAP_NET_RAW; datagram ICMP sockets need the process's group inside
``net.ipv4.ping_group_range``. Without either, opening the socket fails with a permission error, which
the prober reports as the ``no_permission`` status (with one log line saying how to grant it) instead of
crashing. The round trip gufo-ping measures includes the event loop's latency in reading the answer, so
it is coarser than TWAMP's kernel-stamped one.
"""

from __future__ import annotations

from typing import Any

NO_PERMISSION_HINT = (
    "ICMP probes need root, CAP_NET_RAW (setcap cap_net_raw+ep, or AmbientCapabilities=CAP_NET_RAW in "
    "the unit) or the collector's group in net.ipv4.ping_group_range"
)


class IcmpSender:
    """Echo requests to one host; the socket opens on the first probe (so permission errors surface
    there, where the prober counts them).

    Args:
        host: the address to ping (IPv4 or IPv6 literal).
    """

    def __init__(self, host: str) -> None:
        self.host = host
        self._ping: Any = None

    async def probe(self, wait_s: float) -> float | None:
        """One echo request: the round trip in seconds, or None when no answer came in time.

        Raises:
            PermissionError: neither raw nor datagram ICMP sockets are allowed.
            OSError: the socket could not be opened for another reason.
        """
        if self._ping is None:
            from gufo.ping import Ping, SelectionPolicy  # imported when an ICMP target is configured

            # Raw first (root, CAP_NET_RAW), then Linux's unprivileged ICMP datagram sockets.
            self._ping = Ping(policy=SelectionPolicy.RAW_DGRAM, timeout=wait_s)
        rtt = await self._ping.ping(self.host)
        return None if rtt is None else float(rtt)

    def close(self) -> None:
        # gufo-ping keeps its socket for the Ping object's life and offers no close: dropping the
        # object is all we can do (a link's sender lives as long as its config).
        self._ping = None
