"""``spanwatch collect`` over several cores (issue 18): one supervisor, worker processes by load (``workload``).

The supervisor validates the config, serves ``/metrics`` from a mirror of the workers' stores
(``collector.relay``), computes the link series from the speeds they report, and keeps one worker
process (``collector.worker``) per share of the targets: worker ``i`` of ``W`` collects the targets
``shard.select_worker`` gives it (shard first, then workers, both by ``hashmod``). Decoding, counter
state and the archive stay in the workers; what crosses is one frame of changed values per relay tick.

Lifecycle, as a single-process daemon: the first SIGTERM or SIGINT stops every worker gracefully (each
flushes its archive) and then the server; a second one kills them and exits at once. SIGHUP validates
the new config here, keeps the running one if it is invalid (the workers are not told), else restarts
the server if its settings changed and passes SIGHUP to every worker, which reloads its share.

A worker that dies is restarted after a capped backoff; meanwhile its series are withdrawn, its targets
read ``spanwatch_target_up 0`` and ``spanwatch_worker_restarts_total{worker}`` counts the restart.

This module imports neither the sources nor the archive: the supervisor's own memory stays small.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

from collector import config as configuration
from collector import links
from collector import shard as sharding
from collector.clock import Clock, SystemClock
from collector.config import Config
from collector.errors import SpanwatchError
from collector.exporters.http import Exporter
from collector.lifecycle import Signals
from collector.process import HeapFreezer, raise_descriptor_limit, return_large_blocks
from collector.relay import Mirror, read_frame
from collector.shard import Shard
from collector.store import Store

log = logging.getLogger(__name__)

SOURCE_KINDS = ("snmp", "gnmi")  # a target's config sections that start a source (daemon.POLLED, STREAMING)
HOUSEKEEPING_SECONDS = 5.0
STOP_SECONDS = 60.0  # how long a stopping worker may take for its final flush before it is killed
RESTART_INITIAL, RESTART_CAP = 1.0, 30.0
HEALTHY_SECONDS = 60.0  # a worker that ran this long restarts without the accumulated backoff


class Supervisor:
    """The collector daemon as a supervisor of ``workers`` worker processes."""

    def __init__(
        self, config_path: Path, workers: int, shard: Shard | None = None, clock: Clock | None = None
    ) -> None:
        self.config_path = config_path
        self.workers = workers
        self.shard = shard
        self.clock = clock or SystemClock()
        self.store = Store(self.clock)
        self.mirror = Mirror(self.store)
        self.config: Config | None = None
        self.exporter = Exporter(self.store)
        self.procs: dict[int, asyncio.subprocess.Process] = {}
        self.exit_codes: dict[int, int] = {}
        self._keepers: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()
        self.signals = Signals(self.stop, self.reload, self._kill_workers)

    async def run(self) -> None:
        """Run until stopped by a signal or ``stop()``.

        Raises:
            SpanwatchError: the config is invalid, or the address cannot be bound, at start-up.
        """
        raise_descriptor_limit()
        return_large_blocks()
        config = await self._load()
        await self._restart_server(config, None)
        self.config = config
        links.update(self.store, config)
        self._keepers = [asyncio.create_task(self._keep(i), name=f"worker {i}") for i in range(self.workers)]
        self.signals.install()
        housekeeping = asyncio.create_task(self._housekeeping())
        log.info(
            "collecting from %d targets with %d worker processes, serving %s",
            len(config.targets),
            self.workers,
            config.collector.listen,
        )
        await self._stop.wait()
        housekeeping.cancel()
        await self._shutdown()

    def stop(self) -> None:
        """Ask for a graceful stop."""
        self._stop.set()

    @property
    def failed(self) -> bool:
        """Whether a worker ended its last run with a failure (lost archive rows, an error)."""
        return any(code != 0 for code in self.exit_codes.values())

    async def _load(self) -> Config:
        config = await asyncio.to_thread(configuration.load, self.config_path)
        return sharding.select(config, self.shard)

    async def reload(self) -> bool:
        """Validate the config file; if valid, apply the server settings and tell every worker.

        Returns:
            whether the new config was applied.
        """
        try:
            config = await self._load()
            await self._restart_server(config, self.config)
        except (SpanwatchError, OSError) as e:
            log.error("reload rejected, keeping the running config:\n%s", e)
            return False
        self.config = config
        links.update(self.store, config)
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGHUP)
        log.info("config reloaded: %d targets", len(config.targets))
        return True

    async def _restart_server(self, config: Config, old: Config | None) -> None:
        previous = (old.collector.listen, old.collector.web_config) if old is not None else None
        await self.exporter.apply(config.collector.listen, config.collector.web_config, previous)

    # -- workers ----------------------------------------------------------------------------------
    async def _keep(self, index: int) -> None:
        """Run worker ``index``, restarting it whenever it dies until the daemon stops.

        The delay doubles up to ``RESTART_CAP`` while the worker keeps dying, and starts over once a run
        lasted ``HEALTHY_SECONDS``. A stop during the delay ends it at once. Only the run the stop ended
        decides the exit status: a death before it was handled by its restart (and logged, and counted).
        """
        delay = RESTART_INITIAL
        while not self._stop.is_set():
            started = self.clock.monotonic()
            code = await self._run_worker(index)
            if self._stop.is_set():
                self.exit_codes[index] = code
                return
            self.exit_codes.pop(index, None)
            self.mirror.drop_worker(index)
            down = self._mark_down(index)
            self.store.inc("spanwatch_worker_restarts_total", (("worker", str(index)),))
            if self.clock.monotonic() - started >= HEALTHY_SECONDS:
                delay = RESTART_INITIAL
            log.error(
                "worker %d/%d exited (status %d); its %d targets are down; restarting in %.0fs",
                index,
                self.workers,
                code,
                down,
                delay,
            )
            await self._pause(delay)
            delay = min(delay * 2, RESTART_CAP)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when the daemon stops meanwhile."""
        stopped = asyncio.ensure_future(self._stop.wait())
        sleep = asyncio.ensure_future(self.clock.sleep(seconds))
        try:
            await asyncio.wait((stopped, sleep), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            sleep.cancel()

    async def _run_worker(self, index: int) -> int:
        """Start worker ``index``, fold its frames in until it exits, and return its exit status."""
        read_end, write_end = os.pipe()
        args = ["--config", str(self.config_path), "--worker", f"{index}/{self.workers}"]
        if self.shard is not None:
            args += ["--shard", str(self.shard)]
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "collector.worker",
                *args,
                "--relay-fd",
                str(write_end),
                pass_fds=(write_end,),
                stdin=asyncio.subprocess.DEVNULL,
                # Its own session: a terminal's Ctrl-C reaches the supervisor only, which stops the
                # workers once (a second signal would make a worker skip its final flush).
                start_new_session=True,
            )
        finally:
            os.close(write_end)
        self.procs[index] = proc
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**20)
        pipe = os.fdopen(read_end, "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        try:
            while (frame := await read_frame(reader)) is not None:
                self.mirror.apply(index, frame)
        except (ValueError, EOFError, OSError) as e:  # a worker never sends these: treat it as dead
            log.error("worker %d: broken relay (%s): stopping it", index, e)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        finally:
            transport.close()
        code = await proc.wait()
        self.procs.pop(index, None)
        return code

    def _mark_down(self, index: int) -> int:
        """Report every target of worker ``index`` down; returns how many there are."""
        if self.config is None:
            return 0
        part = sharding.select_worker(self.config, None, Shard(index, self.workers))
        for target in part.targets:
            for kind in SOURCE_KINDS:
                if getattr(target, kind) is not None:
                    self.store.set("spanwatch_target_up", (("device", target.name), ("source", kind)), 0)
        return len(part.targets)

    # -- background and shutdown ----------------------------------------------------------------------
    async def _housekeeping(self) -> None:
        heap = HeapFreezer()  # a full collection over the mirror would stall relays and scrapes
        while True:
            await self.clock.sleep(HOUSEKEEPING_SECONDS)
            heap.tick(self.store.series_count())
            if self.config is not None:
                links.update(self.store, self.config)

    async def _shutdown(self) -> None:
        log.info("stopping: each worker flushes its archive")
        for proc in list(self.procs.values()):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        done, pending = await asyncio.wait(self._keepers, timeout=STOP_SECONDS) if self._keepers else ((), ())
        for proc in list(self.procs.values()):
            log.error("a worker did not stop within %gs: killing it", STOP_SECONDS)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        for task in pending:
            task.cancel()
        await asyncio.gather(*done, *pending, return_exceptions=True)
        await self.exporter.close()

    def _kill_workers(self) -> None:
        """A forced exit: the workers go at once, without their final flush."""
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
