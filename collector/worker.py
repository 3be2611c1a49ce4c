"""One worker process of ``spanwatch collect`` (issue 18): ``python -m collector.worker``.

The supervisor (``collector.supervisor``) starts as many as the load needs (``collector.workload``). A worker runs a ``Daemon`` over its part of
the targets (``shard.select_worker``), without an HTTP server: its sources decode and ingest into its own
store, it writes its own archive files (the writer id names the process, so the layout is shared), and
every ``relay_seconds`` it sends its store's changes to the supervisor over the pipe ``--relay-fd``
(``collector.relay``). SIGTERM, SIGINT and SIGHUP behave as in a single-process daemon. A worker whose
supervisor is gone (the pipe breaks) stops, so no worker outlives its daemon.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from pathlib import Path

from collector import shard
from collector.config import Config
from collector.daemon import Daemon
from collector.errors import SpanwatchError
from collector.logfmt import LogfmtFormatter
from collector.relay import Outbox, encode

log = logging.getLogger(__name__)

# The exposition trails a worker by up to one relay period, and that age counts against the staleness
# bound (a value at most 1.5 of its intervals old): of the half interval left once a round is due, the
# device, the network and the ingest need most. A fixed 0.25 s took 0.5-0.94 of the bench's 0.27-0.5 s
# intervals, and with 2 workers under the capacity the oldest value at a scrape read 1.1-1.9 intervals;
# relayed every 0.05 s, 1.06-1.59 (bench/README.md, issue 33).
RELAY_SHARE = 0.1
RELAY_MAX = 0.25  # the period before: at intervals of 2.5 s and longer it is already under a tenth
RELAY_MIN = 0.05  # a frame costs its two ends about 0.3 ms of CPU: 20 a second are 0.6 % of a core


def relay_seconds(config: Config | None) -> float:
    """Seconds between relay frames: ``RELAY_SHARE`` of the shortest interval the worker's targets are
    sampled or polled at, within ``RELAY_MIN`` and ``RELAY_MAX`` (the longest before a config is read)."""
    if config is None:
        return RELAY_MAX
    intervals = [t.gnmi.sample_interval for t in config.targets if t.gnmi is not None]
    intervals += [t.snmp.interval or config.defaults.interval for t in config.targets if t.snmp is not None]
    if not intervals:
        return RELAY_MAX
    return min(RELAY_MAX, max(RELAY_MIN, RELAY_SHARE * min(intervals)))


async def relay(daemon: Daemon, fd: int, stopped: asyncio.Event) -> None:
    """Send the store's changes every ``relay_seconds`` until ``stopped``, then once more."""
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    outbox = Outbox(daemon.store)
    parent = os.getppid()
    config, period = None, relay_seconds(None)
    sent = loop.time()
    try:
        while True:
            if os.getppid() != parent:  # the supervisor died without a word: do not outlive it
                raise BrokenPipeError
            if daemon.config is not config:  # the first config read, or a reload
                config, period = daemon.config, relay_seconds(daemon.config)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(period):
                    await stopped.wait()
            now = loop.time()  # the exposition trails by the gap between frames, however late the timer
            daemon.shedder.relayed(now - sent)
            sent = now
            frame = outbox.frame()
            if frame is not None:
                writer.write(encode(frame))
                await writer.drain()
            if stopped.is_set():
                return
    except (BrokenPipeError, ConnectionResetError):
        log.error("the supervisor is gone: stopping")
        daemon.stop()
    finally:
        writer.close()


async def run(daemon: Daemon, fd: int) -> None:
    """Run the daemon and its relay; the last frame goes after the final archive flush."""
    stopped = asyncio.Event()
    sender = asyncio.create_task(relay(daemon, fd, stopped))
    try:
        await daemon.run()
    finally:
        stopped.set()
        await asyncio.gather(sender, return_exceptions=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit status 1 when archive rows were lost (as ``spanwatch collect``)."""
    p = argparse.ArgumentParser(prog="python -m collector.worker")
    p.add_argument("--config", required=True, type=Path)
    p.add_argument("--worker", required=True, type=shard.parse, metavar="i/W")
    p.add_argument("--shard", type=shard.parse, default=None, metavar="i/N")
    p.add_argument("--relay-fd", required=True, type=int)
    args = p.parse_args(argv)
    # The supervisor's format (logfmt), with the worker named: one log, one format.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter({"worker": f"{args.worker.index}/{args.worker.count}"}))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    daemon = Daemon(args.config, shard=args.shard, worker=args.worker)
    try:
        asyncio.run(run(daemon, args.relay_fd))
    except SpanwatchError as e:  # the supervisor validated the file, but it may have changed since
        log.error("cannot start: %s", e)
        return 2
    return 1 if daemon.rows_lost else 0


if __name__ == "__main__":
    sys.exit(main())
