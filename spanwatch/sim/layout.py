"""Where every queue of the fabric sits in the model's flat arrays, and its per-queue constants.

Link ``l`` with ``n`` waves owns the block ``[off_l, off_l + 2n)``: index ``off_l + side * n + w`` is the
egress queue of the switch at ``between[side]`` onto wave ``w`` (toward the other end) and, for
receive-side quantities, what that switch receives on wave ``w``. Device ``2l + side`` is that switch, so
a device's interfaces are one contiguous slice, and the peer of an index is the same wave at the other
end. Everything the step needs per queue (capacity, buffer, ECN ramp, PFC thresholds, delays) is an array
here, so one numpy operation covers every link.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from collector.contracts import fibre
from collector.contracts.optics import OpticsProfile, profile
from spanwatch.sim.scenario import Link, Scenario, device_name

F = npt.NDArray[np.float64]
I = npt.NDArray[np.int64]  # noqa: E741
B = npt.NDArray[np.bool_]
ECN_MIN, ECN_MAX, XOFF, XON = 0.05, 0.25, 0.9, 0.8  # fractions of a queue's buffer (DCQCN-style RED ramp)


def interface_name(wave: int) -> str:
    """The port of ``wave`` (0-based) on a simulated switch."""
    return f"Ethernet1/{wave + 1}"


def component_name(wave: int) -> str:
    """The optical channel of ``wave`` (0-based)."""
    return f"OpticalChannel1/{wave + 1}"


@dataclass(frozen=True)
class Device:
    name: str
    link: str
    site: str
    side: int
    start: int  # its slice of the flat arrays
    waves: int
    spec: Link

    @property
    def slice(self) -> slice:
        return slice(self.start, self.start + self.waves)


class Layout:
    """The flat arrays' geometry for one scenario."""

    def __init__(self, s: Scenario) -> None:
        self.links = list(s.links)
        self.names = [link.name for link in s.links]
        self.offsets = np.cumsum([0] + [2 * link.waves for link in s.links])[:-1].astype(np.int64)
        self.size = int(sum(2 * link.waves for link in s.links))
        self.devices: list[Device] = []
        link_of, side, wave, peer = [], [], [], []
        for li, (link, off) in enumerate(zip(s.links, self.offsets, strict=True)):
            n = link.waves
            for sd in (0, 1):
                self.devices.append(
                    Device(
                        device_name(link.name, link.between[sd]),
                        link.name,
                        link.between[sd],
                        sd,
                        int(off) + sd * n,
                        n,
                        link,
                    )
                )
                for w in range(n):
                    link_of.append(li)
                    side.append(sd)
                    wave.append(w)
                    peer.append(int(off) + (1 - sd) * n + w)
        self.link_of: I = np.asarray(link_of, dtype=np.int64)
        self.side: I = np.asarray(side, dtype=np.int64)
        self.wave: I = np.asarray(wave, dtype=np.int64)
        self.peer: I = np.asarray(peer, dtype=np.int64)
        self.device_starts: I = np.asarray([d.start for d in self.devices], dtype=np.int64)
        per_link = np.asarray
        self.cap: F = per_link([lk.wave_gbps * 1e9 / 8 for lk in s.links])[self.link_of].astype(np.float64)
        self.buffer: F = per_link([lk.buffer_bytes for lk in s.links])[self.link_of].astype(np.float64)
        self.lossless: B = per_link([lk.lossless for lk in s.links])[self.link_of].astype(bool)
        self.distance_km: F = per_link([lk.distance_km for lk in s.links])[self.link_of].astype(np.float64)
        self.one_way: F = np.asarray([fibre.one_way_delay_s(d) for d in self.distance_km], dtype=np.float64)
        self.rtt: F = 2 * self.one_way
        self.profiles: list[OpticsProfile] = [profile(lk.optics) for lk in s.links]
        job = set(s.job_links)
        self.job_link: B = np.asarray([lk.name in job for lk in s.links], dtype=bool)

    def link_index(self, name: str) -> int:
        return self.names.index(name)

    def block(self, li: int, side: int | None = None) -> slice:
        """The flat indexes of link ``li`` (one side's when ``side`` is given)."""
        off, n = int(self.offsets[li]), self.links[li].waves
        return slice(off, off + 2 * n) if side is None else slice(off + side * n, off + (side + 1) * n)

    def index(self, li: int, side: int, wave: int) -> int:
        return int(self.offsets[li]) + side * self.links[li].waves + wave

    def per_link(self, x: F) -> F:
        """Sum a per-queue array over each link's block."""
        return np.asarray(np.add.reduceat(x, self.offsets), dtype=np.float64)
