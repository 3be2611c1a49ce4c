"""The fast recording path: a demo run recorded in simulated time, without sockets (``demo --fast``).

``record(scenario, out)`` writes into ``out`` what the live demo's recording writes (``config.yaml``,
``community``, ``archive/``, the job's log, ``truth.json``, ``metrics.txt``): the fabric model is stepped
as fast as the CPU allows (in a second process, to every snapshot time planned ahead: ``fast_model``,
``fast_schedule``), and the archive is the one the collector would have written, because the
collector's own code writes it: each switch's SNMP table (``snmp_mib``) is walked by ``SnmpSource``
through its ``Poller`` (mapping, Counter32 wraps, sysUpTime, no row for a wave with no signal), each
switch's gNMI notifications (its ``SimTarget`` subscriptions, on the snapshots' clock) are decoded by
``GnmiSource``, the link probes' windows are exported by ``TargetProber``, into a ``Store`` and an
``Archive`` on a simulated clock. Only the sockets and the waiting are gone; the delays they caused
(polls' phases and durations, the model's lag behind the wall clock, delivery) are drawn from
``fast_feeds.Timing``, seeded by the scenario.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import multiprocessing
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from collector import links, mapping_files
from collector.config import Config
from collector.contracts.fibre import one_way_delay_s
from collector.daemon import _interval, _phases, _timeout
from collector.exporters.archive import Archive
from collector.exporters.prometheus import render
from collector.mapping_files import Mappings
from collector.probes.prober import PROBES, TargetProber, Window
from collector.scheduler import Poller, Schedule
from collector.sources.gnmi.source import GnmiSource
from collector.sources.snmp.source import SnmpSource
from collector.store import Store, TargetLabels
from spanwatch.fast_feeds import (
    WIRE,
    SimClock,
    SimStream,
    SnapshotHolder,
    SnapshotWalker,
    Timing,
    streams_of,
)
from spanwatch.fast_model import Model, ModelInProcess, ModelProcess, stepped
from spanwatch.fast_schedule import Lookahead, ScheduleError, next_poll
from spanwatch.sim import snmp_mib
from spanwatch.sim.commands import write_config
from spanwatch.sim.gnmi_target import SimTarget
from spanwatch.sim.runtime import SimulatedFabric
from spanwatch.sim.scenario import Scenario

LISTEN = "127.0.0.1:9464"  # the config's /metrics address: nothing listens on it
FIRST_PORT = 20000  # the config's device and reflector ports: nothing listens on them either
# Archive files are written at most this often (simulated seconds): the live collector's 1 s makes a file
# a second, and each costs an fsync; the rows, and so the archive's readers, are the same.
FLUSH_S = 10.0


@dataclass
class Recording:
    """A finished fast recording."""

    out: Path
    log: Path  # the job's log
    sim: SimulatedFabric  # the model as it ended (truth, devices, steps)
    metrics: str  # the collector's last exposition


def record(
    scenario: Scenario,
    out: Path,
    *,
    epoch_s: float | None = None,
    timing: Timing | None = None,
    timing_seed: int | None = None,
    model_process: bool | None = None,
) -> Recording:
    """Record ``scenario`` into ``out`` in simulated time (see the module docstring).

    Args:
        scenario: what to run.
        out: the folder (created).
        epoch_s: the wall time the fabric starts at (default: now).
        timing: the live path's delays (default: as measured).
        timing_seed: seeds the draws of those delays (default: from the scenario's seed; with ``epoch_s``
            too the recording is reproducible); another seed is another run of the live path (other poll
            and sample phases). The epoch's fraction of a second matters as well: the analysis bins on
            absolute time.
        model_process: step the model in a second process, beside the collector's work (the same files;
            default: where the platform can fork, ``spanwatch.fast_model``).
    """
    out.mkdir(parents=True, exist_ok=True)
    sim = SimulatedFabric(scenario)
    sim.t0 = time.time() if epoch_s is None else epoch_s
    _placeholder_ports(sim)
    config_path = write_config(sim, out, LISTEN)
    if model_process is None:
        model_process = "fork" in multiprocessing.get_all_start_methods()
    model: Model = ModelProcess(sim, out) if model_process else ModelInProcess(sim, out)
    try:
        recorder = _Recorder(sim, model, config_path, timing or Timing(), timing_seed)
        metrics = asyncio.run(recorder.run())
        model.finish()
    finally:
        model.close()
    (out / "metrics.txt").write_text(metrics)
    (out / "truth.json").write_text(json.dumps(sim.truth(), indent=1))
    return Recording(out, model.log_path, sim, metrics)


def _placeholder_ports(sim: SimulatedFabric) -> None:
    """Ports for the config, distinct as live ones are; no socket is opened."""
    ports = itertools.count(FIRST_PORT)
    telemetry = sim.scenario.telemetry
    sim.snmp_ports = [next(ports) for _ in sim.devices] if telemetry.snmp else []
    sim.gnmi_ports = [next(ports) for _ in sim.devices] if telemetry.gnmi else []
    for reflectors in sim.reflectors.values():
        reflectors.ports = [next(ports) for _ in reflectors.sites]


Event = tuple[float, int, Callable[[float], Any]]


class _Recorder:
    """The event loop of one recording: model steps, snapshots, and the collector's work at wall times."""

    def __init__(
        self, sim: SimulatedFabric, model: Model, config_path: Path, timing: Timing, timing_seed: int | None
    ) -> None:
        self.sim = sim
        self.model = model
        self.config_path = config_path
        self.timing = timing
        # Its own stream, so the model's draws (seeded by the scenario) are the live path's.
        self.rng = np.random.default_rng([sim.scenario.seed, 29] if timing_seed is None else timing_seed)
        self.clock = SimClock(sim.t0)
        self.holder = SnapshotHolder(sim.snap)
        self.events: list[Event] = []
        self._seq = itertools.count()
        self.lookahead = Lookahead(timing)  # the polls and probe windows, for the snapshot times

    def at(self, wall_s: float, action: Callable[[float], Any]) -> None:
        heapq.heappush(self.events, (wall_s, next(self._seq), action))

    async def run(self) -> str:
        config, mappings = mapping_files.load(self.config_path)
        archive_cfg = config.collector.archive
        assert archive_cfg is not None
        self.store = Store(self.clock)
        self.archive = Archive(archive_cfg.path, self.clock, max_buffer_bytes=archive_cfg.max_buffer_bytes)
        self.store.archive = self.archive
        t = self.timing
        start = t.start_s + float(self.rng.uniform(0.0, t.start_spread_s))
        self._targets(config, mappings, start)
        self._probes(config, start + t.probes_after_s)
        flush_s = max(archive_cfg.flush_interval, FLUSH_S)
        self.at(start + flush_s, self._flush_every(flush_s))
        await self._run_model()
        self.archive.flush()  # the daemon's final flush at shutdown
        links.update(self.store, config)
        return render(self.store)

    # -- set-up, as ``collector.daemon.Daemon._apply`` does it ------------------------------------------
    def _targets(self, config: Config, mappings: Mappings, start: float) -> None:
        member_links = links.member_links(config)
        phases = _phases(config)
        index = {dev.name: d for d, dev in enumerate(self.sim.devices)}
        base = float(self.rng.uniform(0.0, config.defaults.interval))  # where the monotonic clock's 0 falls
        epoch_ns = round(self.sim.t0 * 1e9)
        self.streams: list[tuple[GnmiSource, SimStream]] = []
        for target in config.targets:
            interval = _interval(target, config)
            self.store.set_target(
                target.name,
                TargetLabels(
                    tuple(sorted(target.labels.items())),
                    config.defaults.expiry_intervals * interval,
                    config.defaults.max_series_per_target,
                    member_links.get(target.name, {}),
                ),
            )
            d = index[target.name]
            if target.snmp is not None:
                walker = SnapshotWalker(self.clock)
                source = SnmpSource(
                    target.name,
                    target.snmp,
                    config.defaults,
                    self.clock,
                    walker=walker,
                    modules=mappings.snmp_modules(target),
                )
                poller = Poller(source, self.store, Schedule(interval, _timeout(target, config)), self.clock)
                first = base + phases[target.name] * interval
                first += interval * max(0.0, np.ceil((start - first) / interval))
                self.at(first, self._poll_every(poller, walker, d, interval))
                self.lookahead.poll(first, interval)
            if target.gnmi is not None:
                gnmi = GnmiSource(target.name, target.gnmi, sets=mappings.gnmi_sets(target), clock=self.clock)
                server = SimTarget(self.holder, d, epoch_ns)
                for i, (prefix, subs) in enumerate(streams_of(gnmi.sets).items()):
                    connect = start + i * self.timing.stream_gap_s
                    connect += float(self.rng.uniform(0.0, self.timing.connect_spread_s))
                    self.streams.append(
                        (
                            gnmi,
                            SimStream(
                                server,
                                self.holder,
                                target.gnmi,
                                prefix,
                                subs,
                                connect,
                                gnmi.stall_timeout / 2,
                                self.timing.split_share,
                            ),
                        )
                    )
        links.update(self.store, config)

    def _probes(self, config: Config, start: float) -> None:
        for link in config.links:
            probe = link.probe
            if probe is None:
                continue
            fibre_rtt = 2 * one_way_delay_s(link.distance_km)  # what the simulated reflectors answer with
            for i, target in enumerate(probe.targets):
                prober = TargetProber(link.name, target, probe, self.store, self.clock)
                phase = i / len(probe.targets) * probe.interval / probe.count  # ``Probes.apply``
                self.at(start + phase + probe.interval, self._probe_every(prober, fibre_rtt))
                self.lookahead.probe(start + phase + probe.interval, probe.interval, probe.count)

    # -- the collector's work, each at its wall time -------------------------------------------------
    def _poll_every(
        self, poller: Poller, walker: SnapshotWalker, d: int, interval: float
    ) -> Callable[[float], Any]:
        name = self.sim.devices[d].name

        async def poll(now: float) -> None:
            self.clock.set(now)
            walker.load(snmp_mib.build(self.holder.snap, d, name, WIRE), self.timing.poll(self.rng))
            await poller.poll_once()
            self.at(next_poll(now, interval, self.clock.now), poll)

        return poll

    def _probe_every(self, prober: TargetProber, fibre_rtt: float) -> Callable[[float], Any]:
        probe = prober.probe

        def window(now: float) -> None:
            self.clock.set(now)
            rtts = self.timing.round_trips(self.rng, fibre_rtt, probe.count)
            one_way = [r / 2 for r in rtts]
            for _ in rtts:
                self.store.inc(PROBES, (*prober.labels, ("status", "success")))
            prober.export(Window(rtts=rtts, forward=one_way, reverse=one_way, sent=probe.count))
            self.at(now + probe.interval, window)

        return window

    def _flush_every(self, interval: float) -> Callable[[float], Any]:
        def flush(now: float) -> None:
            self.clock.set(now)
            self.archive.flush()
            self.at(now + interval, flush)

        return flush

    def _deliver(self, source: GnmiSource, responses: list[Any]) -> Callable[[float], Any]:
        def deliver(now: float) -> None:
            self.clock.set(now)
            for response in responses:
                source.handle(self.store, response)

        return deliver

    async def _until(self, wall_s: float) -> None:
        """Do the collector's work due before ``wall_s``, in time order."""
        while self.events and self.events[0][0] < wall_s:
            when, _, action = heapq.heappop(self.events)
            result = action(when)
            if asyncio.iscoroutine(result):
                await result

    # -- the model ---------------------------------------------------------------------------------------
    async def _run_model(self) -> None:
        """Snapshots at the live path's times, and the collector's work between them.

        The draws from ``rng`` come in the live order (a snapshot's time, its lag, the collector's work
        before it, its delivery, its gNMI rounds, the next snapshot's time); the model is given every
        snapshot time at the start (``fast_schedule``: the same draws, replayed), so that a model in another
        process steps on while this one works, and each time drawn here is checked against them.
        """
        sim, t, model = self.sim, self.timing, self.model
        dt = sim.fabric.dt
        duration = float(sim.scenario.duration) + t.tail_s
        planned = self.lookahead.snapshot_times(self.rng, len(self.streams), sim.fabric.t, dt, duration)
        model.plan(planned)
        asked = iter(planned)
        published = 0.0  # wall time of the last publication
        now = sim.fabric.t  # the model's time once it has taken the snapshot asked for last
        more = now < duration
        if more:
            now = self._next(now, dt, asked)
        while more:
            taken = now
            wall = max(published, taken + t.lag(self.rng))
            await self._until(wall)  # what happened before this snapshot was published saw the last one
            published = wall
            delivered = wall + t.deliver(self.rng)
            splits = [float(self.rng.uniform()) for _ in self.streams]
            more = taken < duration
            if more:
                now = self._next(now, dt, asked)
            self.holder.snap = model.snapshot()
            for (source, stream), split in zip(self.streams, splits, strict=True):
                responses = stream.sample(taken, split)
                if responses:
                    self.at(delivered, self._deliver(source, responses))
        await self._until(duration)

    def _next(self, now: float, dt: float, planned: Iterator[float]) -> float:
        """The next snapshot's time, drawn as the live path draws it (and as planned); returns the model
        time it is taken at."""
        due = now + self.timing.snapshot_s + float(self.rng.uniform(0.0, self.timing.snapshot_slack_s))
        if due != next(planned, None):
            raise ScheduleError(f"snapshot at {due!r} s drawn, not the one planned: the lookahead has parted")
        return stepped(now, dt, due)
