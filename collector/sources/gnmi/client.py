"""The gNMI client seam: channel, credentials and requests on ``grpc.aio`` with pygnmi's generated stubs.

Only this module builds channels and requests; the supervisor (``gnmi.py``) decides when to dial.
Keepalive follows gRPC's server-side defaults (grpc-go's enforcement policy: pings no more often than
every 5 minutes, none without an active call): a client pinging faster is answered with GOAWAY
``too_many_pings`` and its streams are torn down. So the client pings every 5 minutes, never without a
call, and a stalled stream is caught by the supervisor's own no-update timer instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Literal

import grpc
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from collector import grpc_wakeups
from collector.config import GnmiConfig
from collector.sources.gnmi.paths import SubscriptionSpec, split_path

log = logging.getLogger(__name__)
_warned_plaintext: set[str] = set()  # addresses already warned about, so a redialling stream warns once

KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 300_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
    # Redials are the supervisor's job (with its own backoff); keep gRPC's reconnect quick but bounded.
    ("grpc.initial_reconnect_backoff_ms", 500),
    ("grpc.max_reconnect_backoff_ms", 5_000),
)

ENCODINGS = {"json": gnmi_pb2.JSON, "proto": gnmi_pb2.PROTO, "json_ietf": gnmi_pb2.JSON_IETF}
_MODES = {
    "sample": gnmi_pb2.SAMPLE,
    "on_change": gnmi_pb2.ON_CHANGE,
    "target_defined": gnmi_pb2.TARGET_DEFINED,
}
_LIST_MODES = {
    "stream": gnmi_pb2.SubscriptionList.STREAM,
    "once": gnmi_pb2.SubscriptionList.ONCE,
    "poll": gnmi_pb2.SubscriptionList.POLL,
}

ListMode = Literal["stream", "once", "poll"]

SUBSCRIBE_METHOD = "/gnmi.gNMI/Subscribe"
RECEIVE_ENV = {"GRPC_EXPERIMENTS": "-event_engine_client"}
"""Process environment that halves grpc's per-message receive CPU (see the module docstring)."""


def make_path(text: str, target: str | None = None) -> Any:
    """A ``gnmi_pb2.Path`` from ``[origin:]/a/b[k=v]/c``.

    Args:
        text: the path; ``openconfig:/interfaces`` sets the origin.
        target: the prefix target (SONiC ``COUNTERS_DB``), or None.
    """
    origin = ""
    if not text.startswith("/") and ":/" in text:
        origin, _, text = text.partition(":")
    path = gnmi_pb2.Path(origin=origin, target=target or "")
    for part in split_path(text):
        name, _, rest = part.partition("[")
        elem = path.elem.add(name=name)
        for chunk in ("[" + rest).split("]")[:-1] if rest else ():
            k, _, v = chunk.lstrip("[").partition("=")
            elem.key[k] = v
    return path


def subscribe_request(
    subs: Sequence[SubscriptionSpec],
    *,
    mode: ListMode = "stream",
    sample_interval_s: float = 10.0,
    heartbeat_s: float = 0.0,
    encoding: str = "proto",
    target: str | None = None,
    updates_only: bool = False,
) -> Any:
    """A ``SubscribeRequest`` for the given paths.

    Args:
        subs: paths and per-path modes (SAMPLE, ON_CHANGE, TARGET_DEFINED).
        mode: STREAM for the daemon, ONCE or POLL for one-shot reads.
        sample_interval_s: the SAMPLE interval.
        heartbeat_s: ON_CHANGE / TARGET_DEFINED heartbeat (0: none): the device resends values this often,
            which also proves the stream alive.
        encoding: ``proto``, ``json`` or ``json_ietf``.
        target: the prefix target, or None.
        updates_only: skip the initial full dump.
    """
    slist = gnmi_pb2.SubscriptionList(
        prefix=gnmi_pb2.Path(target=target) if target else None,
        mode=_LIST_MODES[mode],
        encoding=ENCODINGS[encoding],
        updates_only=updates_only,
    )
    for s in subs:
        sub = slist.subscription.add(path=make_path(s.path))
        if mode == "stream":
            sub.mode = _MODES[s.mode]
            if s.mode == "sample":
                sub.sample_interval = int(sample_interval_s * 1e9)
            elif heartbeat_s > 0:
                sub.heartbeat_interval = int(heartbeat_s * 1e9)
    return gnmi_pb2.SubscribeRequest(subscribe=slist)


def credentials(cfg: GnmiConfig) -> grpc.ChannelCredentials:
    """TLS (server-authenticated, or mutual when a client certificate is configured) credentials.

    Raises:
        ConfigError: a certificate file cannot be read, or is outside the secrets directory.
    """
    tls = cfg.tls
    assert tls is not None  # the config guarantees tls xor insecure
    return grpc.ssl_channel_credentials(
        root_certificates=tls.read("ca_file"),
        private_key=tls.read("key_file"),
        certificate_chain=tls.read("cert_file"),
    )


def open_channel(cfg: GnmiConfig, extra: Iterable[tuple[str, Any]] = ()) -> grpc.aio.Channel:
    """A channel to the target: plaintext only when the config says ``insecure: true``.

    Raises:
        ConfigError: a TLS file cannot be read.
    """
    # A decoded message costs ~25x its wire size (66 MB took 1.7 GB): cap what one message may cost.
    limit = ("grpc.max_receive_message_length", cfg.max_message_bytes)
    options: list[tuple[str, Any]] = [*KEEPALIVE_OPTIONS, limit, *extra]
    if cfg.insecure:
        channel = grpc.aio.insecure_channel(cfg.address, options=options)
    else:
        if cfg.tls is not None and cfg.tls.server_name:
            options.append(("grpc.ssl_target_name_override", cfg.tls.server_name))
        channel = grpc.aio.secure_channel(cfg.address, credentials(cfg), options=options)
    with contextlib.suppress(RuntimeError):  # no running loop: nothing to drain on
        # A busy loop otherwise lets grpc's wake-ups pile up until every stream stops (``collector.grpc_wakeups``).
        grpc_wakeups.drain_wakeups(asyncio.get_running_loop())
    return channel


def call_metadata(cfg: GnmiConfig) -> tuple[tuple[str, str], ...]:
    """Username/password as call metadata (the gNMI convention), read from their files or variables.

    Raises:
        ConfigError: a configured secret cannot be read.
    """
    out: list[tuple[str, str]] = []
    if cfg.username is not None:
        out.append(("username", cfg.username.read()))
    if cfg.password is not None:
        out.append(("password", cfg.password.read()))
    if out and cfg.insecure and cfg.address not in _warned_plaintext:
        _warned_plaintext.add(cfg.address)
        log.warning("gNMI %s: username and password sent in clear (insecure: true)", cfg.address)
    return tuple(out)


class GnmiClient:
    """RPCs on one channel.

    Args:
        channel: from ``open_channel`` (or any ``grpc.aio`` channel in tests).
        metadata: call metadata (credentials).
    """

    def __init__(self, channel: grpc.aio.Channel, metadata: Sequence[tuple[str, str]] = ()) -> None:
        self.channel = channel
        self.metadata = tuple(metadata)
        self.stub = gnmi_pb2_grpc.gNMIStub(channel)

    async def capabilities(self, deadline_s: float = 10.0) -> Any:
        """The target's ``CapabilityResponse``.

        Raises:
            grpc.aio.AioRpcError: the RPC failed.
        """
        return await self.stub.Capabilities(
            gnmi_pb2.CapabilityRequest(), metadata=self.metadata, timeout=deadline_s
        )

    async def get(self, paths: Iterable[str], encoding: str = "json_ietf", deadline_s: float = 10.0) -> Any:
        """A ``GetResponse`` for ``paths`` (STATE data).

        Raises:
            grpc.aio.AioRpcError: the RPC failed.
        """
        req = gnmi_pb2.GetRequest(
            path=[make_path(p) for p in paths], type=gnmi_pb2.GetRequest.STATE, encoding=ENCODINGS[encoding]
        )
        return await self.stub.Get(req, metadata=self.metadata, timeout=deadline_s)

    async def subscribe(self, request: Any, *, raw: bool = False) -> Any:
        """Open a Subscribe stream and send ``request``; the caller reads (``read()``) and cancels the call.

        The client side stays open: some targets end a STREAM subscription when the client half-closes.

        Args:
            request: the ``SubscribeRequest``.
            raw: the call yields each response as serialised bytes (parse with
                ``gnmi_pb2.SubscribeResponse.FromString``), which is cheaper than gRPC's deserializer hook.

        Returns:
            the ``grpc.aio`` stream-stream call.

        Raises:
            grpc.aio.AioRpcError: the stream could not be opened.
        """
        if raw:
            method = self.channel.stream_stream(
                SUBSCRIBE_METHOD,
                request_serializer=gnmi_pb2.SubscribeRequest.SerializeToString,
                response_deserializer=None,
            )
            call = method(metadata=self.metadata)
        else:
            call = self.stub.Subscribe(metadata=self.metadata)
        await call.write(request)
        return call

    async def once(self, request: Any, deadline_s: float = 30.0) -> list[Any]:
        """Run a ONCE subscription: every response up to ``sync_response`` (or the end of the stream).

        Raises:
            grpc.aio.AioRpcError: the RPC failed.
        """
        call = self.stub.Subscribe(iter([request]), metadata=self.metadata, timeout=deadline_s)
        out = []
        async for resp in call:
            if resp.sync_response:
                call.cancel()
                break
            out.append(resp)
        return out

    async def poll(self, request: Any, rounds: int, deadline_s: float = 30.0) -> AsyncIterator[list[Any]]:
        """Run a POLL subscription: the initial dump, then ``rounds - 1`` polls; yields one list per round.

        Raises:
            grpc.aio.AioRpcError: the RPC failed.
        """
        call = self.stub.Subscribe(metadata=self.metadata, timeout=deadline_s)
        await call.write(request)
        try:
            for i in range(rounds):
                if i:
                    await call.write(gnmi_pb2.SubscribeRequest(poll=gnmi_pb2.Poll()))
                batch = []
                while True:
                    resp = await call.read()
                    if resp is grpc.aio.EOF or resp.sync_response:
                        break
                    batch.append(resp)
                yield batch
        finally:
            call.cancel()
