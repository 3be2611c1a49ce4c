"""The ``/metrics`` HTTP server: a small HTTP/1.1 server on the daemon's event loop (asyncio streams).

It serves ``/metrics`` (a snapshot of the store, gzip when the scraper accepts it), ``/`` (a page linking
it) and ``/-/healthy``. Connections are kept alive between scrapes; a request (request line and headers)
must arrive within ``header_timeout`` of its first byte (of the connection, for the first request) and fit
in ``max_header_bytes``, a kept-alive connection is closed after ``idle_timeout`` without a new request,
and bodies are refused, so a slow or hostile client cannot hold memory or a task for long.

At most ``max_connections`` are open, and clients trickling their headers cannot take them all (issue 34):
connections whose request is still incomplete may hold at most ``max_connections - reserve`` slots, and at
most ``max_pending_per_client`` from one address. A new connection past either bound closes the oldest
incomplete one (of its own address, or of the address holding most) once that one has had
``pending_grace`` to finish, and at ``max_connections`` whatever its age, so the ``reserve`` stays for
connections that completed a request, and a scraper, which sends its whole request at once, gets in. Past ``max_connections``, a new connection takes the place of one idling between requests, or gets a
503 when every slot is serving (``spanwatch_http_connections_evicted_total{reason}`` and
``spanwatch_http_connections_rejected_total`` count them; never logged one by one), so descriptors never
run out under a flood. TLS, client certificates, basic auth, security headers and a rate limit come from
an exporter-toolkit ``web.yml`` (``webconfig``).

Rendering is synchronous on the loop (it is the snapshot: no poll can interleave); gzip runs on worker
threads of its own (zlib releases the GIL and a large exposition takes tens of milliseconds to compress),
so password checks and archive flushes, which have their own threads, never delay a scrape.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collector.errors import ConfigError, SpanwatchError
from collector.exporters.auth import CHALLENGE, BasicAuth
from collector.exporters.prometheus import CONTENT_TYPE, render_chunks
from collector.exporters.webconfig import WebConfig, load_web_config, peer_allowed, ssl_context
from collector.lograte import RateLimitedLog
from collector.store import Store

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

INDEX = (
    b"<!DOCTYPE html>\n<html><head><title>spanwatch</title></head><body>\n"
    b'<h1>spanwatch</h1>\n<p><a href="/metrics">Metrics</a></p>\n</body></html>\n'
)
_REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
    408: "Request Timeout", 413: "Content Too Large", 429: "Too Many Requests",
    431: "Request Header Fields Too Large", 501: "Not Implemented", 503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}  # fmt: skip
GZIP_LEVEL = 1  # metrics text is repetitive: level 1 already shrinks it ~10x, at a fraction of the CPU
GZIP_WORKERS = 2
REJECTED = "spanwatch_http_connections_rejected_total"
EVICTED = "spanwatch_http_connections_evicted_total"


@dataclass(frozen=True, slots=True)
class Limits:
    """What one client may cost the server.

    Attributes:
        header_timeout: seconds for a request (request line and headers) once its first byte arrived, for
            the first request of a connection from its start, and for the TLS handshake.
        idle_timeout: seconds a kept-alive connection may wait for its next request.
        max_header_bytes: the request line and headers together.
        max_connections: open connections at most (well below the descriptor limit).
        reserve: slots that only connections with a complete request may hold.
        max_pending_per_client: connections with an incomplete request from one address at most (once
            the oldest of them has been pending ``pending_grace``).
        pending_grace: seconds a request may take to arrive before a newcomer may displace it below the cap
            (a client sends its whole request within a round trip).
    """

    header_timeout: float = 10.0
    idle_timeout: float = 120.0
    max_header_bytes: int = 16 * 1024
    max_connections: int = 256
    reserve: int = 32
    max_pending_per_client: int = 32
    pending_grace: float = 1.0


class HttpError(Exception):
    """A request that ends in an error response and a closed connection."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclass(slots=True)
class Request:
    """The parts of a request the server looks at; header names are lower-case."""

    method: str
    path: str
    version: str
    headers: dict[str, str]

    @property
    def keep_alive(self) -> bool:
        tokens = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        return "keep-alive" in tokens if self.version == "HTTP/1.0" else "close" not in tokens


@dataclass(slots=True)
class Response:
    """A response before serialisation."""

    status: int
    body: bytes | list[bytes] = b""  # a list: written in its parts (``/metrics``, a chunk a family)
    content_type: str = "text/plain; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


class TokenBucket:
    """``rate_limit``: ``burst`` requests at once, then one per ``interval`` seconds."""

    def __init__(self, interval: float, burst: int) -> None:
        self.interval, self.burst = interval, burst
        self.tokens, self.stamp = float(burst), time.monotonic()

    def allow(self) -> bool:
        """Take a token if one is left.

        Returns:
            False when the request should get a 429.
        """
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) / self.interval)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


def parse_listen(listen: str) -> tuple[str | None, int]:
    """Split ``host:port`` (``[::1]:9464`` for IPv6, ``:9464`` for every interface).

    Args:
        listen: the configured address.

    Returns:
        ``(host or None, port)``; port 0 picks a free port.

    Raises:
        ConfigError: not a host:port address.
    """
    host, sep, port = listen.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not port.isdigit() or int(port) > 65535 or ("[" in host or "]" in host):
        raise ConfigError(f"collector.listen: not a host:port address: {listen!r}")
    return host or None, int(port)


class ExporterServer:
    """The running exporter: answers scrapes until ``close``."""

    def __init__(self, store: Store, web: WebConfig | None = None, limits: Limits = Limits()) -> None:
        """Prepare a server; ``start`` binds it.

        Args:
            store: what ``/metrics`` renders.
            web: the parsed ``web.yml``, or None for plain HTTP without auth.
            limits: timeouts and sizes.
        """
        self.store = store
        self.web = web or WebConfig()
        self.limits = limits
        users = {u: h.get_secret_value() for u, h in self.web.basic_auth_users.items()}
        self._auth = BasicAuth(users) if users else None
        rate = self.web.rate_limit
        self._bucket = TokenBucket(rate.interval, rate.burst) if rate.interval > 0 else None
        self._extra = self.web.http_server_config.headers.items()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self._idle: dict[asyncio.StreamWriter, None] = {}  # waiting for a request, oldest first
        # a request under way, not yet complete (or none yet on a new connection): writer -> client address,
        # oldest first
        self._pending: dict[asyncio.StreamWriter, tuple[str, float]] = {}  # (address, monotonic since)
        self._tasks: set[asyncio.Task[None]] = set()
        self._gzip = ThreadPoolExecutor(max_workers=GZIP_WORKERS, thread_name_prefix="gzip")
        self.rejected = 0

    async def start(self, host: str | None, port: int) -> None:
        """Bind and start accepting.

        Args:
            host: address to bind (None: every interface).
            port: port (0: a free one).

        Raises:
            ConfigError: the TLS material cannot be loaded.
            OSError: the address cannot be bound.
        """
        tls = self.web.tls_server_config
        ctx = ssl_context(tls) if tls is not None else None
        _limit_accept_errors(asyncio.get_running_loop())
        self.store.inc(REJECTED, (), 0)
        for reason in ("idle", "incomplete_request"):
            self.store.inc(EVICTED, (("reason", reason),), 0)
        self._server = await asyncio.start_server(
            self._connection,
            host,
            port,
            ssl=ctx,
            ssl_handshake_timeout=self.limits.header_timeout if ctx else None,
            limit=self.limits.max_header_bytes,
        )

    @property
    def address(self) -> tuple[str, int]:
        """The first bound ``(host, port)``."""
        assert self._server is not None, "not started"
        sockname = self._server.sockets[0].getsockname()
        return sockname[0], sockname[1]

    def close(self) -> None:
        """Stop accepting and close every connection (a scrape in flight is cut)."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._connections):
            writer.close()
        if self._auth is not None:
            self._auth.close()
        self._gzip.shutdown(wait=False, cancel_futures=True)

    async def wait_closed(self) -> None:
        """Wait until the listener and every connection handler are gone."""
        if self._server is not None:
            await self._server.wait_closed()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=self.limits.header_timeout)

    # -- one connection ----------------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = _client(writer)
        if not self._make_room(client):
            self._reject(writer)
            return
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._connections.add(writer)
        self._pending[writer] = (client, time.monotonic())
        try:
            if self.web.tls_server_config is not None and not peer_allowed(
                writer.get_extra_info("peercert"), self.web.tls_server_config.client_allowed_sans
            ):
                return
            await self._serve_requests(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass  # the client went away or idled out: nothing to answer
        except Exception:
            log.exception("exporter connection failed")
        finally:
            self._connections.discard(writer)
            self._idle.pop(writer, None)
            self._pending.pop(writer, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            if task is not None:
                self._tasks.discard(task)

    def _make_room(self, client: str) -> bool:
        """Close what a new connection from ``client`` displaces; False when it must be refused.

        An incomplete request younger than ``pending_grace`` is displaced only at ``max_connections``: a
        burst of clients whose requests are on their way is not cut, and a trickler's slot is taken anyway.
        """
        limits = self.limits
        budget = max(limits.max_connections // 2, limits.max_connections - limits.reserve)
        mine = sum(1 for c, _ in self._pending.values() if c == client)
        if mine >= limits.max_pending_per_client:
            self._evict_pending(client, limits.pending_grace)
        if len(self._pending) >= budget:
            self._evict_pending(None, limits.pending_grace)
        if len(self._connections) < limits.max_connections:
            return True
        if len(self._pending) >= budget:  # the reserve belongs to connections with a complete request
            return self._evict_pending(None) or self._evict_idle()
        return self._evict_idle() or self._evict_pending(None)

    def _evict_idle(self) -> bool:
        """Close the connection that has idled longest between requests, making room for a new one."""
        for writer in self._idle:
            self._evict(writer, "idle")
            return True
        return False

    def _evict_pending(self, client: str | None, older_than: float = 0.0) -> bool:
        """Close the oldest connection whose request is incomplete, if pending longer than ``older_than``
        seconds: of ``client``, or (None) of the address holding most such connections, so that one
        flooding address displaces its own first."""
        if client is None:
            counts: dict[str, int] = {}
            for c, _ in self._pending.values():
                counts[c] = counts.get(c, 0) + 1
            if not counts:
                return False
            client = max(counts, key=counts.__getitem__)
        now = time.monotonic()
        for writer, (c, since) in self._pending.items():
            if c == client:
                if now - since < older_than:
                    return False  # the oldest of them is still young
                self._evict(writer, "incomplete_request")
                return True
        return False

    def _evict(self, writer: asyncio.StreamWriter, reason: str) -> None:
        self._idle.pop(writer, None)
        self._pending.pop(writer, None)
        self._connections.discard(writer)
        writer.close()
        self.store.inc(EVICTED, (("reason", reason),))

    def _reject(self, writer: asyncio.StreamWriter) -> None:
        """Answer 503 and close, without logging each one: the counter carries the volume."""
        self.rejected += 1
        self.store.inc(REJECTED, ())
        _limited.log(
            logging.WARNING,
            "connection cap",
            "exporter: %d connections open, the cap: refusing new ones (%s)",
            len(self._connections),
            REJECTED,
        )
        with contextlib.suppress(Exception):
            if self.web.tls_server_config is None:  # on TLS the handshake is done; an answer costs nothing
                writer.write(self._serialise(Response(503, _reason(503)), keep_alive=False))
        writer.close()

    async def _serve_requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = True
        while True:
            if not first:
                self._idle[writer] = None
            try:
                request = await self._read_request(reader, first, writer)
            except HttpError as e:
                writer.write(self._serialise(Response(e.status, _reason(e.status)), keep_alive=False))
                await writer.drain()
                return
            finally:
                self._idle.pop(writer, None)
                self._pending.pop(writer, None)  # complete (or over): no longer displaceable
            first = False
            if request is None:
                return
            response = await self._respond(request)
            # The request was read whole (no body is accepted), so any answer can keep the connection.
            keep_alive = request.keep_alive
            writer.write(self._serialise(response, keep_alive, with_body=False))
            if request.method != "HEAD":  # apart from the head: a large body is not copied again
                for part in [response.body] if isinstance(response.body, bytes) else response.body:
                    writer.write(part)  # not ``writelines``: it joins the parts into one copy first
            await writer.drain()
            if not keep_alive:
                return

    async def _read_request(
        self, reader: asyncio.StreamReader, first: bool, writer: asyncio.StreamWriter
    ) -> Request | None:
        """The next request, or None when the client closed or idled out between requests.

        A connection's first request must be complete within ``header_timeout`` (or ``idle_timeout`` when
        shorter) of the connection; a later one may idle ``idle_timeout`` before its first byte, then has
        ``header_timeout`` for the rest.
        """
        loop = asyncio.get_running_loop()
        limits = self.limits
        deadline = loop.time() + (
            min(limits.header_timeout, limits.idle_timeout) if first else limits.idle_timeout
        )
        try:
            async with asyncio.timeout_at(deadline):
                head = await reader.readexactly(1)
        except (asyncio.IncompleteReadError, TimeoutError):
            return None
        if not first:  # a request is under way: no longer idle, now incomplete
            self._idle.pop(writer, None)
            self._pending[writer] = (_client(writer), time.monotonic())
            deadline = loop.time() + limits.header_timeout
        try:
            async with asyncio.timeout_at(deadline):
                line = head + await reader.readuntil(b"\r\n")
                headers = await self._read_headers(reader, len(line))
        except TimeoutError:
            raise HttpError(408) from None
        except asyncio.LimitOverrunError:
            raise HttpError(431) from None
        return _parse_request_line(line, headers)

    async def _read_headers(self, reader: asyncio.StreamReader, used: int) -> dict[str, str]:
        headers: dict[str, str] = {}
        while True:
            line = await reader.readuntil(b"\r\n")
            used += len(line)
            if used > self.limits.max_header_bytes:
                raise HttpError(431)
            if line == b"\r\n":
                return headers
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep or not name or name != name.strip():
                raise HttpError(400)
            key = name.lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value

    async def _respond(self, request: Request) -> Response:
        if self._bucket is not None and not self._bucket.allow():
            return Response(429, b"Too Many Requests\n")
        if self._auth is not None and not await self._auth.check(request.headers.get("authorization")):
            return Response(401, b"Unauthorized\n", headers=[("WWW-Authenticate", CHALLENGE)])
        if request.method not in ("GET", "HEAD"):
            return Response(405, b"Method Not Allowed\n", headers=[("Allow", "GET, HEAD")])
        if request.path == "/metrics":
            return await self._metrics(request)
        if request.path == "/":
            return Response(200, INDEX, "text/html; charset=utf-8")
        if request.path == "/-/healthy":
            return Response(200, b"OK\n")
        return Response(404, b"Not Found\n")

    async def _metrics(self, request: Request) -> Response:
        chunks = render_chunks(self.store)
        if not accepts_gzip(request.headers.get("accept-encoding", "")):
            return Response(200, chunks, CONTENT_TYPE)
        loop = asyncio.get_running_loop()
        body = await loop.run_in_executor(self._gzip, gzip_chunks, chunks)
        return Response(200, body, CONTENT_TYPE, [("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")])

    def _serialise(self, response: Response, keep_alive: bool, with_body: bool = True) -> bytes:
        lines = [
            f"HTTP/1.1 {response.status} {_REASONS[response.status]}",
            f"Content-Type: {response.content_type}",
            f"Content-Length: {_length(response.body)}",
            f"Connection: {'keep-alive' if keep_alive else 'close'}",
            *(f"{k}: {v}" for k, v in (*response.headers, *self._extra)),
        ]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if not with_body:
            return head
        return head + (response.body if isinstance(response.body, bytes) else b"".join(response.body))


def _length(body: bytes | list[bytes]) -> int:
    return len(body) if isinstance(body, bytes) else sum(map(len, body))


def gzip_chunks(chunks: list[bytes]) -> bytes:
    """One gzip member of ``chunks`` in order, compressed as they come (never joined uncompressed)."""
    packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # 16+: a gzip header
    out = [packer.compress(chunk) for chunk in chunks]
    out.append(packer.flush())
    return b"".join(out)


def _client(writer: asyncio.StreamWriter) -> str:
    """The client's address (without its port)."""
    peer = writer.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else "?"


def _limit_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Rate-limit asyncio's "socket.accept() out of system resource" lines (one per failed accept: 178 MB
    of log in a minute at the descriptor limit); every other loop error goes where it went before."""
    previous = loop.get_exception_handler()
    if getattr(previous, "spanwatch_limited", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        if "accept" in message:
            error = context.get("exception")
            _limited.log(logging.ERROR, "accept", "exporter: %s: %s", message, error)
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.spanwatch_limited = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


def _reason(status: int) -> bytes:
    return f"{_REASONS[status]}\n".encode()


def _parse_request_line(first: bytes, headers: dict[str, str]) -> Request:
    parts = first.decode("latin-1").rstrip("\r\n").split(" ")
    if len(parts) != 3 or not parts[1]:
        raise HttpError(400)
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpError(505)
    if "transfer-encoding" in headers:
        raise HttpError(501)  # no endpoint takes a body; refuse rather than mis-frame the next request
    length = headers.get("content-length", "0")
    if not length.isdigit() or int(length) > 0:
        raise HttpError(413 if length.isdigit() else 400)
    return Request(method, target.split("?", 1)[0], version, headers)


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` value allows gzip (``gzip`` or ``*`` with a non-zero q).

    Args:
        accept_encoding: the header's value.

    Returns:
        True when the response may be gzip-compressed.
    """
    for item in accept_encoding.lower().split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip() in ("gzip", "*"):
            q = params.strip().removeprefix("q=")
            try:
                return not params or float(q) > 0
            except ValueError:
                return False
    return False


async def serve(
    store: Store, listen: str, web_config: Path | None, limits: Limits = Limits()
) -> ExporterServer:
    """Start the exporter on the running event loop.

    Args:
        store: what ``/metrics`` renders.
        listen: ``host:port`` (``collector.listen``; ``[::1]:9464`` for IPv6).
        web_config: an exporter-toolkit ``web.yml`` (TLS, basic auth), or None.
        limits: timeouts and sizes.

    Returns:
        the running server; stop it with ``close()`` then ``await wait_closed()``.

    Raises:
        ConfigError: the address or the web config is invalid.
        OSError: the address cannot be bound.
    """
    host, port = parse_listen(listen)
    web = load_web_config(web_config) if web_config is not None else None
    server = ExporterServer(store, web, limits)
    await server.start(host, port)
    scheme = "https" if web is not None and web.tls_server_config is not None else "http"
    log.info("serving metrics on %s://%s/metrics", scheme, listen)
    return server


class Exporter:
    """The ``/metrics`` server of one process, replaced as the config changes.

    Args:
        store: what it serves.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.server: ExporterServer | None = None

    async def apply(self, listen: str, web_config: Path | None, old: tuple[str, Path | None] | None) -> None:
        """Serve on ``listen`` with ``web_config``, re-reading web.yml (certificates may have rotated).

        The running server is closed first, so the same address can be bound again; if the new one cannot
        start, the ``old`` settings are served again and the error propagates (the reload is rejected).

        Raises:
            SpanwatchError: at start-up (no ``old``), the address cannot be bound; or web.yml is invalid.
            OSError: on a reload, the new address cannot be bound.
        """
        await self.close()
        try:
            self.server = await serve(self.store, listen, web_config)
        except (OSError, SpanwatchError) as e:
            if old is not None:
                self.server = await serve(self.store, *old)
            elif isinstance(e, OSError):  # at start-up: a user error (port taken), not a traceback
                raise SpanwatchError(f"cannot listen on {listen}: {e.strerror}") from None
            raise

    async def close(self) -> None:
        """Stop serving."""
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
