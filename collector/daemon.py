"""The collector daemon's lifecycle (``spanwatch collect``), shaped like uvicorn's.

Start-up builds the store, the archive, the HTTP server and one task per source; the first SIGTERM or
SIGINT stops gracefully (sources cancelled, a final archive flush), a second one forces the exit; SIGHUP
reloads the config, restarts only the targets that changed, and keeps the old config if the new one is
invalid.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from collector import config as configuration
from collector import links, mapping_files
from collector import shard as sharding
from collector.clock import Clock, SystemClock
from collector.config import Config, Target
from collector.errors import SpanwatchError
from collector.exporters.http import Exporter
from collector.lifecycle import Signals, cancel_all
from collector.mapping_files import Mappings
from collector.probes.prober import Probes
from collector.probes.twamp import Reflector
from collector.process import HeapFreezer, raise_descriptor_limit, return_large_blocks
from collector.scheduler import Poller, Schedule
from collector.shard import Shard
from collector.shedding import Shedder
from collector.sources import PolledSource, StreamingSource
from collector.store import Store, TargetLabels

if TYPE_CHECKING:
    from collector.exporters.archive import Archive

log = logging.getLogger(__name__)

HOUSEKEEPING_SECONDS = 5.0


class Daemon:
    """One running collector."""

    def __init__(
        self,
        config_path: Path,
        clock: Clock | None = None,
        shard: Shard | None = None,
        worker: Shard | None = None,
    ) -> None:
        self.config_path = config_path
        self.shard = shard  # poll only this replica's targets (None: all)
        # A worker process (``collector.worker``) collects its part of the replica's targets and relays
        # its store; the supervisor serves /metrics and the link series. None: this process does it all.
        self.worker = worker
        self.clock = clock or SystemClock()
        self.config: Config | None = None
        self.store = Store(self.clock, rendered=worker is None)
        self.archive: Archive | None = None
        self.exporter = Exporter(self.store)
        self._targets: dict[str, tuple[Target, list[asyncio.Task[None]], list[PolledSource]]] = {}
        self._housekeeping_task: asyncio.Task[None] | None = None
        self._flush_task: asyncio.Task[None] | None = None
        self.mappings: Mappings | None = None
        self._signatures: dict[str, tuple[str, ...]] = {}  # the user mapping files each target uses
        self._targets_files: dict[Path, float] = {}  # targets files and their mtimes at the last load
        self._stop = asyncio.Event()
        self.signals = Signals(self.stop, self.reload)
        self.probes = Probes(self.store, self.clock)
        self.reflector: Reflector | None = None
        self._heap = HeapFreezer()
        self._phases: dict[str, float] = {}  # target -> where in its interval it is polled (``_phases``)
        self.shedder = Shedder()  # this process's gNMI streams share its loop, hence one per process

    async def run(self) -> None:
        """Run until stopped by a signal or ``stop()``.

        Raises:
            SpanwatchError: the config is invalid, or the address cannot be bound, at start-up (a reload
                keeps the running config instead).
        """
        raise_descriptor_limit()
        return_large_blocks()
        config, mappings = await self._load()
        self._phases = _phases(sharding.select(config, self.shard))
        config = sharding.select_worker(config, self.shard, self.worker)
        await self._apply(config, mappings)
        self.signals.install()
        self._housekeeping_task = asyncio.create_task(self._housekeeping(), name="housekeeping")
        log.info("collecting from %d targets, serving %s", len(config.targets), config.collector.listen)
        await self._stop.wait()
        await self._shutdown()

    def stop(self) -> None:
        """Ask for a graceful stop."""
        self._stop.set()

    async def reload(self) -> bool:
        """Load the config file again and apply it; keep the running config if it is invalid.

        Returns:
            whether the new config was applied.
        """
        try:
            config, mappings = await self._load()
            self._phases = _phases(sharding.select(config, self.shard))
            config = sharding.select_worker(config, self.shard, self.worker)
            await self._apply(config, mappings)
        except (SpanwatchError, OSError) as e:
            log.error("reload rejected, keeping the running config:\n%s", e)
            return False
        log.info("config reloaded: %d targets", len(config.targets))
        return True

    async def _load(self) -> tuple[Config, Mappings]:
        """Read and validate the config file, its targets files and the user mapping files in a worker
        thread: a large (or hostile) file must not stall polls and scrapes while it is parsed (the YAML
        reader bounds what it may cost)."""
        return await asyncio.to_thread(mapping_files.load, self.config_path)

    # -- applying a config -----------------------------------------------------------------------
    async def _apply(self, config: Config, mappings: Mappings) -> None:
        old = self.config
        if self.worker is None:
            await self._restart_server(config, old)
        if old is None or old.collector.archive != config.collector.archive:
            await self._restart_archive(config)
        self.config, self.mappings = config, mappings
        self._targets_files = _stat(configuration.targets_files(config))
        member_links = links.member_links(config)
        wanted = {t.name: t for t in config.targets}
        for name in list(self._targets):
            target = wanted.get(name)
            if (
                target is None
                or target != self._targets[name][0]
                or old is None
                or old.defaults != config.defaults
                # a user mapping file it uses was edited
                or mappings.signature(target) != self._signatures.get(name)
            ):
                await self._stop_target(name)
        for target in config.targets:
            ttl = config.defaults.expiry_intervals * _interval(target, config)
            self.store.set_target(
                target.name,
                TargetLabels(
                    tuple(sorted(target.labels.items())),
                    ttl,
                    config.defaults.max_series_per_target,
                    member_links.get(target.name, {}),
                ),
            )
            if target.name not in self._targets:
                self._start_target(target, config)
        if self.worker is None:
            links.update(self.store, config)
        self.probes.apply(config)  # the links this process probes (``shard.select_worker``)
        if self.worker is None or self.worker.index == 0:  # one reflector per collector, not per worker
            self._restart_reflector(config, old)

    def _restart_reflector(self, config: Config, old: Config | None) -> None:
        """Answer other collectors' TWAMP-light probes where ``collector.reflector`` says."""
        if old is not None and old.collector.reflector == config.collector.reflector:
            return
        if self.reflector is not None:
            self.reflector.close()
            self.reflector = None
        address = config.collector.reflector
        if address is not None:
            host, _, port = address.rpartition(":")
            try:
                self.reflector = Reflector(host.strip("[]"), int(port))
            except OSError as e:
                raise SpanwatchError(f"cannot listen for TWAMP probes on {address}: {e.strerror}") from None
            self.reflector.start()

    async def _restart_server(self, config: Config, old: Config | None) -> None:
        previous = (old.collector.listen, old.collector.web_config) if old is not None else None
        await self.exporter.apply(config.collector.listen, config.collector.web_config, previous)

    async def _restart_archive(self, config: Config) -> None:
        """Flush the old archive and start writing where ``config`` says."""
        if self._flush_task is not None:
            self._flush_task.cancel()
            self._flush_task = None
        await self._flush()
        archive = config.collector.archive
        self.archive = (
            None if archive is None else _archive_class().from_config(archive, self.clock, self.shard)
        )
        self.store.archive = self.archive
        if archive is not None:
            self._flush_task = asyncio.create_task(self._flush_loop(archive.flush_interval))

    def _start_target(self, target: Target, config: Config) -> None:
        assert self.mappings is not None
        mappings = self.mappings
        self._signatures[target.name] = mappings.signature(target)
        tasks: list[asyncio.Task[None]] = []
        polled: list[PolledSource] = []
        for kind, make in POLLED.items():
            if getattr(target, kind) is not None:
                source = make(target, config, mappings, self.clock)
                schedule = Schedule(
                    _interval(target, config), _timeout(target, config), phase=self._phases.get(target.name)
                )
                poller = Poller(source, self.store, schedule, self.clock)
                polled.append(source)
                tasks.append(asyncio.create_task(poller.run(), name=f"{target.name}/{kind}"))
        for kind, make_stream in STREAMING.items():
            if getattr(target, kind) is not None:
                stream = make_stream(target, config, mappings, self.clock, self.shedder)
                tasks.append(asyncio.create_task(stream.run(self.store), name=f"{target.name}/{kind}"))
        for task in tasks:
            task.add_done_callback(self._source_ended)
        self._targets[target.name] = (target, tasks, polled)

    def _source_ended(self, task: asyncio.Task[None]) -> None:
        """A source task is meant to run until cancelled: if it ends otherwise, say so and mark it down."""
        if task.cancelled():
            return
        device, _, kind = task.get_name().rpartition("/")
        error = task.exception()
        if device in self._targets:
            self.store.set("spanwatch_target_up", (("device", device), ("source", kind)), 0)
        if error is not None:
            log.error("%s %s: the source task died: %r", kind, device, error)
        else:
            log.warning("%s %s: the source task ended", kind, device)

    async def _stop_target(self, name: str) -> None:
        _, tasks, polled = self._targets.pop(name)
        await cancel_all(list(tasks), name)
        for source in polled:
            with contextlib.suppress(Exception):
                await source.close()
        self.store.drop_device(name)

    # -- background work ----------------------------------------------------------------------------
    async def _housekeeping(self) -> None:
        while True:
            await self.clock.sleep(HOUSEKEEPING_SECONDS)
            self.store.expire()
            self._heap.tick(self.store.series_count())
            if self.config is None:
                continue
            if self.worker is None:  # in a worker process, the supervisor exports the link series
                links.update(self.store, self.config)
            # Each worker reads the targets files itself and keeps its share of them.
            self._watch_targets_files(self.config)

    def _watch_targets_files(self, config: Config) -> None:
        """Reload when a targets file appeared, vanished or changed (Prometheus file_sd's refresh)."""
        now = _stat(configuration.targets_files(config)) if config.targets_files else {}
        if now != self._targets_files:
            self._targets_files = now  # one reload per change, also when the new file is rejected
            log.info("targets files changed: reloading")
            self.signals.reload_soon()

    async def _flush_loop(self, interval: float) -> None:
        while True:
            await self.clock.sleep(interval)
            await self._flush()

    async def _flush(self) -> None:
        archive = self.archive
        if archive is None:
            return
        try:
            await archive.flush_async()
        except Exception:  # never let one flush end the loop (Archive.flush already catches its own)
            archive.write_errors += 1
            log.exception("archive flush failed")
        self.store.set("spanwatch_archive_rows_total", (), archive.rows_written)
        self.store.set("spanwatch_archive_write_errors_total", (), archive.write_errors)
        if archive.bucket is not None:
            self.store.set("spanwatch_archive_upload_retries_total", (), archive.bucket.put_retries)
        for reason, n in archive.rows_dropped.items():
            self.store.set("spanwatch_archive_rows_dropped_total", (("reason", reason),), n)

    @property
    def rows_lost(self) -> int:
        """Rows that were never written: still buffered (after the final flush) or dropped."""
        if self.archive is None:
            return 0
        return self.archive.pending + sum(self.archive.rows_dropped.values())

    async def _shutdown(self) -> None:
        log.info("stopping: cancelling sources, flushing the archive")
        background = [
            t for t in (self._housekeeping_task, self._flush_task, *self.signals.reloads) if t is not None
        ]
        for task in background:
            task.cancel()
        for name in list(self._targets):
            await self._stop_target(name)
        await self.probes.stop()
        if self.reflector is not None:
            self.reflector.close()
        await asyncio.gather(*background, return_exceptions=True)
        await self._flush()
        if self.archive is not None and self.rows_lost:
            log.error(
                "archive: %d rows were never written to %s (%d still buffered, %d dropped)",
                self.rows_lost,
                self.archive.root,
                self.archive.pending,
                sum(self.archive.rows_dropped.values()),
            )
        await self.exporter.close()


def _archive_class() -> type[Archive]:
    # Imported when an archive is configured: pyarrow alone is about 60 MB of a process's memory, and
    # each worker process would pay it.
    from collector.exporters.archive import Archive

    return Archive


def _interval(target: Target, config: Config) -> float:
    snmp = target.snmp
    return (snmp.interval if snmp is not None and snmp.interval else None) or config.defaults.interval


def _timeout(target: Target, config: Config) -> float:
    snmp = target.snmp
    return min(
        (snmp.timeout if snmp is not None and snmp.timeout else None) or config.defaults.timeout,
        _interval(target, config),
    )


def _phases(config: Config) -> dict[str, float]:
    """Each polled target's share of its interval at which it is polled: evenly spread over the replica's
    targets, in config order, so polls never bunch up (random offsets do: at 200 targets that queued polls
    behind each other at the agent and on the event loop, and tripled the p99 poll duration). Every worker
    computes the same from the whole config, and they share the monotonic clock, so theirs interleave."""
    polled = [t.name for t in config.targets if any(getattr(t, kind) is not None for kind in POLLED)]
    return {name: i / len(polled) for i, name in enumerate(polled)}


def _stat(files: list[Path]) -> dict[Path, float]:
    """Each file's modification time (a vanished file is left out: the next glob will not find it)."""
    found = {}
    for path in files:
        with contextlib.suppress(OSError):
            found[path] = path.stat().st_mtime
    return found


# Each source module is imported when a target uses it (grpc costs an SNMP-only worker 10-20 MB).
def _snmp(target: Target, config: Config, mappings: Mappings, clock: Clock) -> PolledSource:
    assert target.snmp is not None
    from collector.sources.snmp.source import SnmpSource

    modules = mappings.snmp_modules(target)
    return SnmpSource(target.name, target.snmp, config.defaults, clock, modules=modules)


def _gnmi(
    target: Target, config: Config, mappings: Mappings, clock: Clock, shedder: Shedder
) -> StreamingSource:
    assert target.gnmi is not None
    from collector.sources.gnmi.source import GnmiSource

    sets = mappings.gnmi_sets(target)
    # A shed target still sends twice within its series' expiry time, so no series of it expires.
    expiry = config.defaults.expiry_intervals * _interval(target, config)
    return GnmiSource(
        target.name,
        target.gnmi,
        sets=sets,
        clock=clock,
        max_series=config.defaults.max_series_per_target,
        shedder=shedder,
        max_sample_interval=expiry / 2,
    )


# The source registries, one per kind: a target's config section of that name turns the source on.
POLLED: dict[str, Callable[[Target, Config, Mappings, Clock], PolledSource]] = {"snmp": _snmp}
STREAMING: dict[str, Callable[[Target, Config, Mappings, Clock, Shedder], StreamingSource]] = {"gnmi": _gnmi}
