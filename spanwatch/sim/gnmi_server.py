"""A reusable ``grpc.aio`` gNMI target: Capabilities, Get and Subscribe (STREAM, ONCE, POLL).

``GnmiServer`` serves whatever ``notifications()`` returns; by default a fixed list of responses, which the
tests fill from recordings of real devices (``tests/integration/gnmi_support.py``). Fault knobs make it misbehave on purpose: no ``sync_response``, end the stream after N responses,
stall after N responses, or answer every Subscribe with an error status. The simulated fabric subclasses it
and overrides ``notifications``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

GNMI_VERSION = "0.8.0"


class GnmiServer(gnmi_pb2_grpc.gNMIServicer):  # type: ignore[misc]
    """A gNMI target serving a fixed list of responses.

    Args:
        responses: ``SubscribeResponse`` messages to send (sync_response entries included are sent as is).
        sync: send a ``sync_response`` after the responses of a STREAM (a recording may carry its own).
        hold: keep a STREAM open after the responses (False: end it with status OK).
        close_after: abort a STREAM with UNAVAILABLE after this many responses.
        stall_after: after this many responses, send nothing more and keep the stream open.
        error: answer every Subscribe with this status code.
        repeat: send the responses this many times per STREAM (benchmarks).
        encodings: the ``supported_encodings`` Capabilities lists (gnmi_pb2 enum numbers).
        capabilities_error: answer Capabilities with this status code (UNIMPLEMENTED: a target without it).
    """

    def __init__(
        self,
        responses: Sequence[Any] = (),
        *,
        sync: bool = True,
        hold: bool = True,
        close_after: int | None = None,
        stall_after: int | None = None,
        error: grpc.StatusCode | None = None,
        repeat: int = 1,
        encodings: Sequence[int] = (gnmi_pb2.JSON, gnmi_pb2.JSON_IETF, gnmi_pb2.PROTO),
        capabilities_error: grpc.StatusCode | None = None,
    ) -> None:
        self.responses = list(responses)
        self.sync = sync
        self.hold = hold
        self.close_after = close_after
        self.stall_after = stall_after
        self.error = error
        self.repeat = repeat
        self.encodings = tuple(encodings)
        self.capabilities_error = capabilities_error
        self.subscribes = 0
        self.requests: list[Any] = []
        self.metadata: list[dict[str, str]] = []  # call metadata of each Subscribe (credentials tests)

    def notifications(self) -> list[Any]:
        """The responses one round sends (override to generate data)."""
        return self.responses

    async def Capabilities(self, request: Any, context: Any) -> Any:
        """The models and encodings the target supports."""
        if self.capabilities_error is not None:
            await context.abort(self.capabilities_error, "replay server configured to refuse Capabilities")
        return gnmi_pb2.CapabilityResponse(
            supported_models=[
                gnmi_pb2.ModelData(name="openconfig-interfaces", organization="OpenConfig", version="3.8.1")
            ],
            supported_encodings=list(self.encodings),
            gNMI_version=GNMI_VERSION,
        )

    async def Get(self, request: Any, context: Any) -> Any:
        """Every notification of one round (a recording has no tree to query)."""
        notes = [r.update for r in self.notifications() if r.HasField("update")]
        return gnmi_pb2.GetResponse(notification=notes)

    async def Subscribe(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        """Serve one Subscribe RPC in the mode the first request asks for."""
        self.subscribes += 1
        del (
            self.metadata[:-100],
            self.requests[:-100],
        )  # keep the recent ones: soak tests dial thousands of times
        self.metadata.append({m.key: m.value for m in context.invocation_metadata() or ()})
        if self.error is not None:
            await context.abort(self.error, f"replay server configured to answer {self.error.name}")
        first = await anext(aiter(request_iterator))
        self.requests.append(first)
        mode = first.subscribe.mode
        if mode == gnmi_pb2.SubscriptionList.ONCE:
            for r in self._round(sync=True):
                yield r
            return
        if mode == gnmi_pb2.SubscriptionList.POLL:
            for r in self._round(sync=True):
                yield r
            async for req in request_iterator:
                if req.HasField("poll"):
                    for r in self._round(sync=True):
                        yield r
            return
        async for r in self._stream(context):
            yield r

    def _round(self, sync: bool) -> list[Any]:
        out = list(self.notifications())
        if sync:
            out.append(gnmi_pb2.SubscribeResponse(sync_response=True))
        return out

    async def _stream(self, context: Any) -> AsyncIterator[Any]:
        sent = 0
        for _ in range(self.repeat):
            for r in self.notifications():
                if self.close_after is not None and sent >= self.close_after:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, "replay server closed the stream")
                if self.stall_after is not None and sent >= self.stall_after:
                    await asyncio.Event().wait()
                yield r
                sent += 1
        if self.sync:
            yield gnmi_pb2.SubscribeResponse(sync_response=True)
        if self.hold:
            await asyncio.Event().wait()


async def serve(
    servicer: GnmiServer,
    host: str = "127.0.0.1",
    port: int = 0,
    credentials: grpc.ServerCredentials | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Start ``servicer`` on ``host:port`` (0: a free port), plaintext unless ``credentials`` are given.

    Returns:
        the running server and its port.
    """
    server = grpc.aio.server()
    gnmi_pb2_grpc.add_gNMIServicer_to_server(servicer, server)
    address = f"{host}:{port}"
    if credentials is None:
        bound = server.add_insecure_port(address)
    else:
        bound = server.add_secure_port(address, credentials)
    await server.start()
    return server, bound
