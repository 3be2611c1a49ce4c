"""Probing each configured link's targets continuously and exporting what the probes saw.

Per (link, target): ``count`` probes spread evenly over each ``interval`` (on a fixed schedule, so a slow
answer does not stretch the window), then one export of the window: the latest round trip, its
min/avg/max, the jitter (mean difference between consecutive round trips), TWAMP's one-way delays and the
loss ratio, plus one ``spanwatch_probes_total`` count per probe outcome. A window without a single answer
withdraws the round-trip series (a stale figure would look like a healthy link) and reports loss 1.
The window's statistics also go to the archive, as rows of device = target, source = method.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import logging
import socket
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from collector.clock import Clock
from collector.config import Config, Link, ProbeConfig, ProbeTarget
from collector.contracts.catalog import PROBE_METRICS, STAT_SUFFIXES
from collector.lifecycle import cancel_all
from collector.probes import icmp, twamp
from collector.store import FullLabels, Store

log = logging.getLogger(__name__)

RTT = "dci_link_rtt_seconds"
JITTER = "dci_link_rtt_jitter_seconds"
ONE_WAY = "dci_link_one_way_delay_seconds"
LOSS = "dci_link_probe_loss_ratio"
PROBES = "spanwatch_probes_total"
_UNREACHABLE = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN}


@dataclass
class Window:
    """The answers of one interval."""

    rtts: list[float] = field(default_factory=list)
    forward: list[float] = field(default_factory=list)
    reverse: list[float] = field(default_factory=list)
    sent: int = 0
    lost: int = 0


def jitter(rtts: list[float]) -> float:
    """Mean absolute difference between consecutive round trips (0 with fewer than two)."""
    if len(rtts) < 2:
        return 0.0
    return statistics.fmean(abs(b - a) for a, b in itertools.pairwise(rtts))


class TargetProber:
    """The probe loop of one (link, target), writing into the store.

    Args:
        link: the link's name.
        target: the responder.
        probe: the link's probe settings.
        store: where the series go.
        clock: the daemon's clock.
    """

    def __init__(
        self, link: str, target: ProbeTarget, probe: ProbeConfig, store: Store, clock: Clock
    ) -> None:
        self.link, self.target, self.probe = link, target, probe
        self.store, self.clock = store, clock
        self.labels: FullLabels = (("link", link), ("method", target.method), ("target", target.label))
        self._sender: twamp.Sender | icmp.IcmpSender | None = None
        self._last_status = "success"

    async def run(self, phase: float = 0.0) -> None:
        """Probe until cancelled; the series go with the task.

        Args:
            phase: fraction of a probe spacing to wait first, so a link's targets do not all probe at
                the same instant (their answers would queue behind each other and look like delay).
        """
        try:
            await self.clock.sleep(phase * self.probe.interval / self.probe.count)
            while True:
                self.export(await self.window())
        finally:
            self.close()

    async def window(self) -> Window:
        """One interval's probes, on a fixed schedule."""
        out = Window()
        spacing = self.probe.interval / self.probe.count
        start = self.clock.monotonic()
        for i in range(self.probe.count):
            wait_s = min(self.probe.timeout, spacing * (self.probe.count - i))
            status = await self._one(out, wait_s)
            self.store.inc(PROBES, (*self.labels, ("status", status)))
            self._note(status)
            wait = start + (i + 1) * spacing - self.clock.monotonic()
            if wait > 0:
                await self.clock.sleep(wait)
        return out

    async def _one(self, out: Window, wait_s: float) -> str:
        try:
            if self._sender is None:
                self._sender = self._open()
            result = await self._sender.probe(wait_s)
        except PermissionError:
            return "no_permission"
        except OSError as e:
            out.sent += 1
            out.lost += 1
            if e.errno in _UNREACHABLE or isinstance(e, socket.gaierror):
                return "unreachable"
            log.debug("probe %s %s: %s", self.link, self.target.label, e)
            return "error"
        out.sent += 1
        if result is None:
            out.lost += 1
            return "timeout"
        rtt = result.rtt_s if isinstance(result, twamp.Measurement) else result
        if rtt < 0:  # the wall clock stepped between the stamps: not a measurement
            out.lost += 1
            return "error"
        out.rtts.append(rtt)
        if isinstance(result, twamp.Measurement):
            out.forward.append(result.forward_s)
            out.reverse.append(result.reverse_s)
        return "success"

    def _open(self) -> twamp.Sender | icmp.IcmpSender:
        if self.target.method == "icmp":
            return icmp.IcmpSender(self.target.host_port()[0])
        return twamp.Sender(*self.target.host_port())

    def _note(self, status: str) -> None:
        """One log line when a target's outcome changes, not one per probe."""
        if status == self._last_status:
            return
        self._last_status = status
        if status == "no_permission":
            log.error(
                "probe %s -> %s: no permission (%s)", self.link, self.target.label, icmp.NO_PERMISSION_HINT
            )
        elif status != "success":
            log.warning("probe %s -> %s (%s): %s", self.link, self.target.label, self.target.method, status)
        else:
            log.info("probe %s -> %s: answering again", self.link, self.target.label)

    def export(self, w: Window) -> None:
        """Set (or withdraw) the window's series and archive its statistics."""
        if w.sent:
            self._set(LOSS, self.labels, w.lost / w.sent)
        else:
            self._drop(LOSS, self.labels)
        if w.rtts:
            self._stats(RTT, self.labels, w.rtts)
            self._set(JITTER, self.labels, jitter(w.rtts))
        else:
            for name in (RTT, *(RTT + s for s in STAT_SUFFIXES), JITTER):
                self._drop(name, self.labels)
        for direction, values in (("forward", w.forward), ("reverse", w.reverse)):
            if values:
                self._stats(ONE_WAY, (*self.labels, ("direction", direction)), values)

    def _stats(self, name: str, labels: FullLabels, values: list[float]) -> None:
        self._set(name, labels, values[-1])
        self._set(name + "_min", labels, min(values))
        self._set(name + "_max", labels, max(values))
        self._set(name + "_avg", labels, statistics.fmean(values))

    def _set(self, name: str, labels: FullLabels, value: float) -> None:
        self.store.set(name, labels, value)
        archive = self.store.archive
        if archive is not None and name != RTT and not name.startswith(ONE_WAY):
            now = self.clock.time_ns()
            archive.add((now, now, self.target.label, self.target.method, name, (), self.link, value, None))

    def _drop(self, name: str, labels: FullLabels) -> None:
        self.store.families.get(name, {}).pop(labels, None)

    def close(self) -> None:
        """Close the socket and withdraw every series of this (link, target)."""
        if self._sender is not None:
            with contextlib.suppress(OSError):
                self._sender.close()
            self._sender = None
        for spec in PROBE_METRICS:
            for name in (spec.name, *(spec.name + s for s in STAT_SUFFIXES)):
                family = self.store.families.get(name, {})
                for key in [k for k in family if k[: len(self.labels)] == self.labels]:
                    del family[key]


class Probes:
    """Every link's probe tasks; ``apply`` starts, keeps or stops them as a config (re)load says."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store, self.clock = store, clock
        self._tasks: dict[tuple[str, ProbeTarget, ProbeConfig], asyncio.Task[None]] = {}

    def apply(self, config: Config) -> None:
        wanted = set(_keys(config.links))
        for key in [k for k in self._tasks if k not in wanted]:
            self._tasks.pop(key).cancel()
        for key in wanted - set(self._tasks):
            link, target, probe = key
            prober = TargetProber(link, target, probe, self.store, self.clock)
            phase = probe.targets.index(target) / len(probe.targets)
            task = asyncio.create_task(prober.run(phase), name=f"probe {link} {target.label}")
            task.add_done_callback(_ended)
            self._tasks[key] = task

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        await cancel_all(tasks, "probes")


def _ended(task: asyncio.Task[None]) -> None:
    """A probe task runs until cancelled: if it dies, say so (the link's series went with it)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("%s: the probe task died: %r", task.get_name(), task.exception())


def _keys(links: Iterable[Link]) -> Iterable[tuple[str, ProbeTarget, ProbeConfig]]:
    for link in links:
        if link.probe is not None:
            for target in link.probe.targets:
                yield link.name, target, link.probe
