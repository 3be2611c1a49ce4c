"""The gNMI streaming source: one supervised Subscribe stream per target (Telegraf's ServiceInput).

``GnmiSource.run`` dials, subscribes (STREAM; SAMPLE / ON_CHANGE / TARGET_DEFINED per path, as the
subscription sets say), feeds the store one notification batch at a time, and redials on failure:

- transient failures (UNAVAILABLE, a stream the target ended, garbage on the wire, a stall) redial after a
  capped, jittered exponential backoff; ``spanwatch_gnmi_reconnects_total`` counts redials;
- permanent failures (INVALID_ARGUMENT, UNIMPLEMENTED, PERMISSION_DENIED, UNAUTHENTICATED, an unreadable
  credential) are not retried in a loop: ``spanwatch_target_up{source="gnmi"}`` goes to 0, one error line
  names the target and the cause, ``status`` says it, and the source waits ``permanent_retry`` seconds (an
  operator may fix the device meanwhile) before one more try; ``None`` stops for good;
- a stream that delivers nothing for ``max(stall_factor * sample_interval, stall_floor)`` is stalled: it is
  cancelled and redialled (keepalive alone cannot see a target that acknowledges pings but sends nothing).

At each dial the target's Capabilities are checked against the configured encoding: an unsupported one falls
back to the best supported (proto > json_ietf > json) with a warning; a target that does not implement
Capabilities (UNIMPLEMENTED), or lists no encodings, is taken at its word and gets the configured one.

ON_CHANGE / TARGET_DEFINED paths ask for a heartbeat of half the stall timeout. This is what keeps the stall
detector honest on a quiet on-change subscription (no change, no update, yet a healthy stream), and it is
cheap: the device resends the current value of those paths at most twice per stall timeout (at least 5 s
apart with the default 10 s floor), far below the SAMPLE traffic of the same stream.

Never silently behind (issue 18): a reader task queues each response as it arrives and a drain task
ingests what has queued every ``DRAIN_WINDOW``. ``spanwatch_ingest_backlog_seconds`` is how far behind
the stream is: the longest of how long the oldest queued response waited, the device-time span of the
queue, and how late a response was read after its timestamp (net of the device clock's offset). The last
is where a backlog shows that builds upstream of the reader, in grpc's buffers and HTTP/2 flow control,
which the queue alone never sees. ``spanwatch_ingest_lag_seconds`` is the collector time at ingest minus
each notification's timestamp. A batch one sample interval or more behind is folded: responses whose
counters a newer response of the batch repeats are skipped before they are decoded (decoding is the cost),
the rest goes through ``collector.coalesce`` (newest per counter; min, max and newest per gauge), all of it
counted in ``spanwatch_coalesced_samples_total``; while behind, the drain gathers half a sample interval
per batch so there is something to fold. The exposition then catches up instead of replaying a stale
backlog.

Never stale past capacity (issue 33): folding cannot skip what grpc has already queued, so a process that
stays behind asks its targets for less. ``collector.shedding`` decides, per process, which targets to
resubscribe at a longer sample interval (``shed_to``) and when to give it back; the new Subscribe goes out
on the same channel, without a redial or backoff. ``spanwatch_gnmi_sample_interval_seconds`` is the
interval in effect, ``spanwatch_gnmi_shed_updates_total`` the updates the target would have sent at its
configured interval and did not (estimated from what it sent), and each change is logged with its reason.
The lag, backlog, folding and stall timeout are judged against the interval in effect.

Health: ``spanwatch_target_up`` is 1 only while every stream of the target delivers (a target whose sets
use two prefix targets has two streams; one failing stream makes the target down),
``spanwatch_gnmi_updates_total`` (gNMI Update messages received),
``spanwatch_gnmi_reconnects_total`` and ``spanwatch_gnmi_clock_offset_seconds`` (see ``gnmi_timing``); a
clock skew above ``skew_warning`` seconds is logged once per excursion. A value or message that cannot be
decoded (a NaN counter, malformed or too deeply nested JSON, bytes that do not parse) is dropped and
counted in ``spanwatch_invalid_values_total``; the stream goes on. Should the task itself die of a bug,
the target is marked down and the cause logged. ``spanwatch_polls_total`` is not used
by streams: a stream has no polls, and its state is ``target_up`` plus the logged cause.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import DecodeError

from collector.clock import Clock, SystemClock
from collector.coalesce import coalesce
from collector.config import GnmiConfig
from collector.errors import ConfigError, MappingError
from collector.model import CounterReading, Sample, sample_of
from collector.sources.gnmi import shallow
from collector.sources.gnmi.client import (
    ENCODINGS,
    GnmiClient,
    call_metadata,
    open_channel,
    subscribe_request,
)
from collector.sources.gnmi.decode import Decoder
from collector.sources.gnmi.paths import SubscriptionSet, SubscriptionSpec, combined_table, load_set
from collector.sources.gnmi.timing import Backoff, ClockOffset
from collector.store import Store

if TYPE_CHECKING:
    from collector.shedding import Shedder, StreamLoad

log = logging.getLogger(__name__)

PERMANENT = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
    }
)

SOURCE = "gnmi"
PRUNE_SECONDS = 60.0  # how often the decoder forgets series the store expired
PREFERRED_ENCODINGS = ("proto", "json_ietf", "json")
DRAIN_WINDOW = 0.01  # seconds the drain lets the reader gather before ingesting a batch
BEHIND_WINDOW = 0.5  # sample intervals it gathers (at most a second) while the stream is behind
_parse = shallow.parse_response  # paths stay bytes until the decoder meets a new one


Queued = tuple[bytes, float, int]
"""One response waiting: its bytes, and when it arrived (monotonic seconds, and Unix nanoseconds)."""


class Backlog:
    """Responses read from the stream and not yet ingested (the reader pushes, the drain takes all)."""

    def __init__(self) -> None:
        self.items: list[Queued] = []
        self.ready = asyncio.Event()

    def push(self, raw: bytes, monotonic: float, time_ns: int) -> None:
        self.items.append((raw, monotonic, time_ns))
        self.ready.set()

    def take(self) -> list[Queued]:
        items, self.items = self.items, []
        self.ready.clear()
        return items


class Stalled(Exception):
    """No update arrived within the stall timeout."""


class PermanentFailure(Exception):
    """A failure that retrying will not fix."""


class GnmiSource:
    """One gNMI target's stream(s): one per distinct prefix target of its subscription sets (usually one).

    Args:
        device: the target's configured name.
        cfg: its gNMI config.
        sets: loaded subscription sets (default: the ones ``cfg.subscriptions`` names).
        clock: time for backoff, stall detection and receive timestamps.
        backoff: redial policy (default: 1 s doubling to 60 s).
        stall_floor: the smallest stall timeout, seconds.
        stall_factor: stall timeout in sample intervals.
        permanent_retry: seconds to wait after a permanent failure before one more try (None: stop).
        skew_warning: log a warning when the clock offset exceeds this many seconds.
        channel_factory: builds the channel (tests); default ``open_channel``.
        shedder: the process's ``collector.shedding.Shedder`` (None: the interval never changes).
        max_sample_interval: the longest interval shedding may ask for, seconds (the series' expiry
            should leave room for two samples).
    """

    source = SOURCE

    def __init__(
        self,
        device: str,
        cfg: GnmiConfig,
        *,
        sets: Sequence[SubscriptionSet] | None = None,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        stall_floor: float = 10.0,
        stall_factor: float = 3.0,
        permanent_retry: float | None = 600.0,
        skew_warning: float = 1.0,
        channel_factory: Callable[[GnmiConfig], grpc.aio.Channel] | None = None,
        max_series: int | None = None,
        shedder: Shedder | None = None,
        max_sample_interval: float | None = None,
    ) -> None:
        self.device = device
        self.cfg = cfg
        self.sets = tuple(sets) if sets is not None else tuple(load_set(n) for n in cfg.subscriptions)
        self.clock = clock or SystemClock()
        self.backoff = backoff or Backoff(rng=random.Random())
        self.stall_floor = stall_floor
        self.stall_factor = stall_factor
        self.permanent_retry = permanent_retry
        self.skew_warning = skew_warning
        self.channel_factory = channel_factory or open_channel
        self.decoder = Decoder(combined_table(self.sets), max_series, handles=True)
        self.offset = ClockOffset()
        self.status = "idle"
        self.responses = 0  # SubscribeResponses handled (tests wait on it)
        self._skewed = False
        self.behind = False  # the last batch was a sample interval or more behind: it was folded
        self._pruned = self.clock.monotonic()
        self._up: dict[str | None, bool] = {}  # prefix target -> its stream is delivering
        self._dev = (("device", device),)
        self._ds = (("device", device), ("source", SOURCE))
        self.shedder = shedder
        longest = max_sample_interval if max_sample_interval is not None else math.inf
        # (the policy has its own bound, ``ShedSettings.max_factor``)
        self.max_factor = _largest_power_of_two(min(longest / cfg.sample_interval, 2.0**16))
        self.factor = 1  # the interval in effect over the configured one (``shed_to``)
        self.generation = 0  # bumped by ``shed_to``: a stream subscribed at an older one resubscribes
        self._store: Store | None = None
        self._worst_landed = 0.0  # seconds, the latest a batch's values landed since the last ``shed_load``
        self._least_backlog = math.inf  # seconds, the least backlog of a batch since then
        self._updates = 0  # received since the last ``shed_load``
        self._period_start = self.clock.monotonic()

    @property
    def sample_interval(self) -> float:
        """The SAMPLE interval in effect, seconds (the configured one unless shed)."""
        return self.cfg.sample_interval * self.factor

    @property
    def stall_timeout(self) -> float:
        return max(self.stall_factor * self.sample_interval, self.stall_floor)

    # -- shedding (``collector.shedding``) -------------------------------------------------------------
    def shed_load(self) -> StreamLoad:
        """What the stream showed since the last call; starts a new period."""
        from collector.shedding import StreamLoad

        now = self.clock.monotonic()
        load = StreamLoad(
            lag=self._worst_landed,
            floor=self._least_backlog if self._least_backlog < math.inf else 0.0,
            interval=self.sample_interval,
            updates_per_second=self._updates / max(now - self._period_start, 1e-9),
            factor=self.factor,
            max_factor=self.max_factor,
        )
        self._worst_landed, self._least_backlog, self._updates, self._period_start = 0.0, math.inf, 0, now
        return load

    def shed_to(self, factor: int, reason: str) -> None:
        """Resubscribe every stream of the target at ``factor`` times the configured interval."""
        factor = min(max(factor, 1), self.max_factor)
        if factor == self.factor:
            return
        before = self.sample_interval
        self.factor = factor
        self.generation += 1
        log.warning(
            "gnmi %s: %s: sample interval %gs -> %gs (%s)",
            self.device,
            "shedding load" if self.sample_interval > before else "load fell",
            before,
            self.sample_interval,
            reason,
        )
        if self._store is not None:
            self._store.set("spanwatch_gnmi_sample_interval_seconds", self._dev, self.sample_interval)

    # -- the supervisor ----------------------------------------------------------------------------
    async def run(self, store: Store) -> None:
        """Subscribe and feed ``store`` until cancelled (or a permanent failure with no retry)."""
        store.set("spanwatch_target_up", self._ds, 0)
        store.set("spanwatch_gnmi_sample_interval_seconds", self._dev, self.sample_interval)
        store.inc("spanwatch_gnmi_shed_updates_total", self._dev, 0)
        store.inc("spanwatch_gnmi_reconnects_total", self._dev, 0)
        store.inc("spanwatch_gnmi_updates_total", self._dev, 0)
        store.inc("spanwatch_coalesced_samples_total", self._ds, 0)  # exported from the start, as 0
        groups: dict[str | None, list[SubscriptionSpec]] = {}
        for s in self.sets:
            groups.setdefault(s.target, []).extend(s.subscriptions)
        self._up = dict.fromkeys(groups, False)
        self._store = store
        if self.shedder is not None:
            self.shedder.register(self)
        try:
            async with asyncio.TaskGroup() as tg:
                for target, subs in groups.items():
                    tg.create_task(self._supervise(store, target, subs))
        except Exception as e:
            # A bug must not leave the target looking healthy: say it is down, and why, then let it go.
            self.status = f"failed: {type(e).__name__}"
            store.set("spanwatch_target_up", self._ds, 0)
            log.error("gnmi %s (%s): the stream task died: %r", self.device, self.cfg.address, e)
            raise
        finally:
            if self.shedder is not None:
                self.shedder.unregister(self)

    def _stream_up(self, store: Store, target: str | None, up: bool) -> None:
        """Record one stream's state; the target is up only while all of its streams are."""
        self._up[target] = up
        store.set("spanwatch_target_up", self._ds, int(all(self._up.values())))

    async def _supervise(self, store: Store, target: str | None, subs: list[SubscriptionSpec]) -> None:
        first = True
        while True:
            if not first:
                store.inc("spanwatch_gnmi_reconnects_total", self._dev)
            first = False
            try:
                await self._stream(store, target, subs)
                cause = "the target ended the stream"
            except PermanentFailure as e:
                self._down(store, target, f"failed: {e}")
                log.error("gnmi %s (%s): %s; not retrying", self.device, self.cfg.address, e)
                if self.permanent_retry is None:
                    return
                await self.clock.sleep(self.permanent_retry)
                continue
            except Stalled:
                cause = f"stalled: no update for {self.stall_timeout:g}s"
            except grpc.aio.AioRpcError as e:
                cause = f"{e.code().name}: {e.details()}"
            except Exception as e:  # an unexpected failure: redial with backoff rather than die silently
                cause = f"unexpected {type(e).__name__}: {e}"
            delay = self.backoff.next()
            self._down(store, target, f"backoff: {cause}")
            log.warning("gnmi %s (%s): %s; redial in %.2fs", self.device, self.cfg.address, cause, delay)
            await self.clock.sleep(delay)

    def _down(self, store: Store, target: str | None, status: str) -> None:
        self.status = status
        self._stream_up(store, target, False)

    async def _encoding(self, client: GnmiClient) -> str:
        """The encoding to subscribe with: the configured one if the target supports it, else the best it does.

        Raises:
            grpc.aio.AioRpcError: Capabilities failed other than UNIMPLEMENTED.
        """
        wanted = self.cfg.encoding
        try:
            caps = await client.capabilities(deadline_s=max(self.stall_timeout, 5.0))
        except grpc.aio.AioRpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            return wanted  # not every target implements Capabilities: unknown, go on
        return choose_encoding(wanted, caps.supported_encodings, self.device)

    async def _stream(self, store: Store, target: str | None, subs: list[SubscriptionSpec]) -> None:
        """One dial: check capabilities, subscribe and read until the stream ends.

        Raises:
            PermanentFailure: retrying will not help.
            Stalled: no update within the stall timeout.
            grpc.aio.AioRpcError: a transient RPC failure.
        """
        try:
            metadata = call_metadata(self.cfg)
            channel = self.channel_factory(self.cfg)
        except (ConfigError, OSError, MappingError) as e:
            raise PermanentFailure(str(e)) from None
        self.status = "connecting"
        call = None
        watchdog = None
        try:
            client = GnmiClient(channel, metadata)
            encoding = await self._encoding(client)
            while True:  # once, and again on the same channel each time shedding changes the interval
                request = subscribe_request(
                    subs,
                    mode="stream",
                    sample_interval_s=self.sample_interval,
                    heartbeat_s=self.stall_timeout / 2,
                    encoding=encoding,
                    target=target,
                )
                generation = self.generation
                call = await client.subscribe(request, raw=True)
                last_rx = [self.clock.monotonic()]  # per stream: a target may have two (prefix targets)
                watchdog = asyncio.create_task(self._watchdog(call, last_rx))
                if not await self._read(store, target, call, last_rx, generation):
                    return
                watchdog.cancel()
                call.cancel()
        except grpc.aio.AioRpcError as e:
            if e.code() in PERMANENT:
                raise PermanentFailure(f"{e.code().name}: {e.details()}") from None
            raise
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if watchdog is not None and watchdog.done() and task is not None and not task.cancelling():
                raise Stalled() from None
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()
            if call is not None:
                call.cancel()
            await channel.close(grace=None)

    async def _watchdog(self, call: Any, last_rx: list[float]) -> None:
        """Cancel ``call`` when nothing arrived for the stall timeout."""
        while True:
            await self.clock.sleep(self.stall_timeout / 4)
            if self.clock.monotonic() - last_rx[0] > self.stall_timeout:
                call.cancel()
                return

    async def _read(
        self, store: Store, target: str | None, call: Any, last_rx: list[float], generation: int = 0
    ) -> bool:
        """Queue every response of ``call`` (serialised bytes) until it ends; ``_drain`` ingests them.

        Returns:
            True when it stopped because the interval changed (``shed_to``): the caller resubscribes.
            A stream is asked at its next response, which a shed target (a busy one) sends soon.

        Reading and ingesting are separate tasks so that a stream the collector cannot keep up with shows
        as a backlog here (measured, exported, folded) rather than as bytes waiting unseen in grpc.
        """
        healthy_after = 30.0
        up = False
        started = self.clock.monotonic()
        backlog = Backlog()
        drain = asyncio.create_task(self._drain(store, backlog))
        resubscribe = False
        try:
            async for raw in call:
                now = self.clock.monotonic()
                last_rx[0] = now
                if not up:
                    up = True
                    self.status = "streaming"
                    self._stream_up(store, target, True)
                if self.backoff.attempt and now - started >= healthy_after:
                    self.backoff.reset()
                backlog.push(raw, now, self.clock.time_ns())
                if drain.done():  # the drain never ends on its own: surface its failure
                    drain.result()
                if self.generation != generation:
                    resubscribe = True
                    break
        finally:
            drain.cancel()
            await asyncio.gather(drain, return_exceptions=True)
        self.ingest_batch(store, backlog.take())  # the stream ended: what it delivered still counts
        return resubscribe

    async def _drain(self, store: Store, backlog: Backlog) -> None:
        while True:
            await backlog.ready.wait()
            # A short window lets the reader pull what grpc already holds, so a backlog is seen whole;
            # behind, a longer one lets it gather newer rounds that make the older ones redundant.
            behind = min(self.sample_interval * BEHIND_WINDOW, 1.0)
            await asyncio.sleep(behind if self.behind else DRAIN_WINDOW)
            self.ingest_batch(store, backlog.take())

    # -- responses -----------------------------------------------------------------------------------
    def ingest_batch(self, store: Store, items: list[Queued]) -> None:
        """Parse, decode and ingest queued responses, folding them when they span over one interval.

        A batch's timing figures (backlog, clock offset, lag, pruning) are worked out once per batch, from
        one pass over its notifications' timestamps, not once per response.
        """
        if not items:
            return
        now = self.clock.monotonic()
        parsed: list[tuple[Any, int]] = []
        for raw, _, received in items:
            try:
                parsed.append((_parse(raw), received))
            except DecodeError:
                # gRPC framed it, so the stream itself is fine: drop the one message, keep the stream.
                store.invalid(self.device, SOURCE, "undecodable_message")
        # (timestamp, received) of each notification, skipped ones too (how late they were is the point)
        stamps = [(resp.update.timestamp, received) for resp, received in parsed if resp.HasField("update")]
        backlog = self._backlog(now - items[0][1], stamps)
        store.set("spanwatch_ingest_backlog_seconds", self._ds, backlog)
        self._least_backlog = min(self._least_backlog, backlog)
        fold = backlog >= self.sample_interval
        self.behind = fold
        readings = parsed
        if fold:
            readings, skipped = self._skip_superseded(parsed)
            if skipped:
                self._count_updates(store, skipped)
                store.inc("spanwatch_coalesced_samples_total", self._ds, skipped)
        pending: list[Sample] = []  # folded readings
        # the others, ingested in one call (its setup is per call)
        runs: list[tuple[list[Sample | CounterReading], int]] = []

        def flush() -> None:  # before a delete: what came before it lands first
            if runs:
                store.ingest_runs(self.device, SOURCE, runs)
                runs.clear()
            self._fold(store, pending)

        updates = 0
        for resp, received in readings:
            try:
                samples, count = self._decode(store, resp, flush)
            except DecodeError:  # a path new to the decoder that does not parse (``shallow``)
                store.invalid(self.device, SOURCE, "undecodable_message")
                continue
            except Exception as e:  # one bad update must not end the stream (issue 16)
                store.invalid(self.device, SOURCE, "decode_error", type(e).__name__)
                continue
            updates += count
            if not samples:
                continue
            if fold:
                pending += map(sample_of, samples)  # ``coalesce`` compares them as samples
            else:
                runs.append((samples, received))
        if runs:
            store.ingest_runs(self.device, SOURCE, runs)
        if pending:
            self._fold(store, pending, items[-1][2])
        if updates:
            self._count_updates(store, updates)
        if self.offset.estimate is not None and any(ts for ts, _ in stamps):
            self._offset_seen(store, self.offset.estimate)
        self._prune(store, now)
        if stamps:
            done = self.clock.time_ns()
            lags = (max(done - (ts or received), 0) / 1e9 for ts, received in stamps)
            store.observe("spanwatch_ingest_lag_seconds", self._ds, *lags)
            self._worst_landed = max(self._worst_landed, self._landed(done, stamps))

    def _backlog(self, waited: float, stamps: list[tuple[int, int]]) -> float:
        """How far behind the stream is, seconds: the longest of how long the oldest queued response
        waited (``waited``), the device-time span of the batch, and how late a response was read after
        its timestamp. The last is where a backlog held upstream (grpc buffers, HTTP/2 flow control, the
        device's send queue) shows; it is net of the device clock's offset (the least delay of the last
        minute and of this batch, ``ClockOffset``, which this folds the batch's ``stamps`` into), so a
        skewed clock does not look like a backlog. (A stream behind for all of the last minute then looks
        skewed instead: the lag histogram, which is not corrected, still shows it.)
        """
        # the batch's device-time span, and its largest received - timestamp
        first: int | None = None
        last: int | None = None
        delay: int | None = None
        for ts, received in stamps:
            if ts:
                self.offset.observe(ts, received)
                first = ts if first is None else min(first, ts)
                last = ts if last is None else max(last, ts)
                delay = received - ts if delay is None else max(delay, received - ts)
        if first is None or last is None or delay is None:
            return waited
        late = delay + (self.offset.estimate or 0.0) * 1e9
        return max(waited, (last - first) / 1e9, late / 1e9)

    def _landed(self, done: int, stamps: list[tuple[int, int]]) -> float:
        """How late the batch's oldest value landed in the store (``done``, Unix ns), seconds: from its
        timestamp, net of the device clock's offset (from its receipt when it has none).

        This, not the backlog, is what the staleness bound is about: a value is at most one interval plus
        this old when the next one lands. The backlog is how far behind a batch was when its ingest began,
        the longest of two delays that add up (held upstream, then queued here), without the ingest itself.
        """
        offset = (self.offset.estimate or 0.0) * 1e9
        worst = 0.0
        for ts, received in stamps:
            late = done - ts + offset if ts else done - received
            if late > worst:
                worst = late
        return worst / 1e9

    def _skip_superseded(self, parsed: list[tuple[Any, int]]) -> tuple[list[tuple[Any, int]], int]:
        """Drop responses a newer one of the batch makes redundant (``Decoder.counter_key``) before they
        are decoded: under a backlog decoding is the cost, and the newest counter reading is exact.

        Returns:
            the responses to decode, oldest first, and how many updates were skipped.
        """
        seen: set[tuple[bytes, ...]] = set()
        kept: list[tuple[Any, int]] = []
        skipped = 0
        for resp, received in reversed(parsed):
            if resp.HasField("update"):
                key = self.decoder.counter_key(resp.update)
                if key is not None:
                    if key in seen:
                        skipped += len(resp.update.update)
                        self.responses += 1
                        continue
                    seen.add(key)
            kept.append((resp, received))
        kept.reverse()
        return kept, skipped

    def _fold(self, store: Store, pending: list[Sample], received: int | None = None) -> None:
        """Ingest the folded backlog (before a delete, and at the end of a batch) and count the folding."""
        if not pending:
            return
        samples, folded = coalesce(pending)
        pending.clear()
        store.ingest(self.device, SOURCE, samples, received or self.clock.time_ns())
        if folded:
            store.inc("spanwatch_coalesced_samples_total", self._ds, folded)

    def handle(self, store: Store, resp: Any) -> None:
        """Fold one parsed ``SubscribeResponse`` into the store (replay tests and benchmarks)."""
        received = self.clock.time_ns()
        samples, count = self._decode(store, shallow.response(resp))
        if resp.HasField("update"):
            self._count_updates(store, count)  # a notification without updates shows the counter at 0
            if resp.update.timestamp:
                self._offset_seen(store, self.offset.observe(resp.update.timestamp, received))
        self._prune(store, self.clock.monotonic())
        if samples:
            store.ingest(self.device, SOURCE, samples, received)

    def _decode(
        self, store: Store, resp: Any, flush: Callable[[], None] | None = None
    ) -> tuple[list[Sample | CounterReading], int]:
        """The readings of one response, and how many updates it carried; deletes and invalid values are
        applied to ``store``.

        Args:
            flush: called before a delete is applied, so readings folded ahead of it land first.
        """
        self.responses += 1
        if not resp.HasField("update"):
            if resp.HasField("error"):  # deprecated in gNMI 0.7, still sent by old agents
                log.warning("gnmi %s: target error: %s", self.device, resp.error.message)
            return [], 0
        n = resp.update
        try:
            samples, gone = self.decoder.notification(n)
        finally:
            for reason in self.decoder.invalid:
                store.invalid(self.device, SOURCE, reason)
            self.decoder.invalid.clear()
            if self.decoder.over_cap:
                store.series_dropped(self.device, SOURCE, self.decoder.over_cap)
                self.decoder.over_cap = 0
        if gone and flush is not None:
            flush()
        for metric, lbls in gone:
            store.forget(self.device, metric, lbls)
        return samples, len(n.update)

    def _prune(self, store: Store, now: float) -> None:
        """Let the decoder forget series the store expired, every ``PRUNE_SECONDS``."""
        if now - self._pruned >= PRUNE_SECONDS:
            self._pruned = now
            self.decoder.prune(lambda metric, lbls: store.holds(self.device, metric, lbls))

    def _count_updates(self, store: Store, count: int) -> None:
        """Count received updates, and while shed the ones the configured interval would have added."""
        store.inc("spanwatch_gnmi_updates_total", self._dev, count)
        self._updates += count
        if self.factor > 1:
            store.inc("spanwatch_gnmi_shed_updates_total", self._dev, count * (self.factor - 1))

    def _offset_seen(self, store: Store, offset: float) -> None:
        """Export the clock offset estimate, logging a skew once per excursion."""
        store.set("spanwatch_gnmi_clock_offset_seconds", self._dev, offset)
        skewed = abs(offset) > self.skew_warning
        if skewed and not self._skewed:
            log.warning(
                "gnmi %s: device clock is %+.3fs off the collector's; archive times are the device's",
                self.device,
                offset,
            )
        self._skewed = skewed


def _largest_power_of_two(limit: float) -> int:
    """The largest power of two not above ``limit`` (at least 1)."""
    factor = 1
    while factor * 2 <= limit:
        factor *= 2
    return factor


def choose_encoding(wanted: str, supported: Sequence[int], device: str = "") -> str:
    """The encoding to use given the target's ``supported_encodings``.

    Args:
        wanted: the configured encoding name.
        supported: ``CapabilityResponse.supported_encodings`` (enum numbers); empty means unknown.
        device: for the log line.

    Returns:
        ``wanted`` when supported (or when nothing is listed), else the first supported of
        ``PREFERRED_ENCODINGS``; ``wanted`` again when none of ours is listed (let the target say no).
    """
    names = {ENCODINGS[n]: n for n in ENCODINGS}
    offered = {names[e] for e in supported if e in names}
    if not supported or wanted in offered:
        return wanted
    for name in PREFERRED_ENCODINGS:
        if name in offered:
            log.warning("gnmi %s: target does not support %s encoding; using %s", device, wanted, name)
            return name
    return wanted
