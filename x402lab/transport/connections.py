"""HTTP/1.1 keep-alive connections for requests sent whole and answers read whole.

Every paid call of a batch is one such exchange: a JSON body of a few hundred bytes, an
answer of a few kilobytes. aiohttp's client makes a request object, a response object, a
task, timers and a stream reader for each; measured here at concurrency 32 it spends about
0.2 ms of CPU per exchange where writing the request's bytes on a kept connection and
parsing the answer with httptools (llhttp, Node.js's parser, in C) spends about 0.1 ms. A
batch's paid call takes 11% fewer client instructions so. ``Wire`` sends such requests
here; streams, large bodies and HEAD stay on aiohttp.

What a client of these services needs and nothing else: one request at a time per
connection (no pipelining), answers framed by Content-Length, chunks or the end of the
connection, TLS by the standard library's default context, no proxies (as the aiohttp
session), no cookies, no redirects. Failures are httpx's errors, which the retry and
re-send rules read: nothing connected (``ConnectError``/``ConnectTimeout``/``PoolTimeout``:
the request never left), no whole answer (``RemoteProtocolError``/``ReadTimeout``: it may
have been acted on).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import NamedTuple

import httptools
import httpx

#: What a connection is kept under: scheme, host, port.
Key = tuple[str, str, int]

#: Methods whose answers llhttp frames without knowing the request (HEAD's has no body
#: whatever its Content-Length says; CONNECT's is a tunnel).
METHODS = frozenset({b"GET", b"POST", b"PUT", b"PATCH", b"DELETE", b"OPTIONS"})


class Answer(NamedTuple):
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection: writes a request, parses its answer."""

    def __init__(self, pool: Connections, key: Key) -> None:
        self._pool, self.key = pool, key
        self._loop = asyncio.get_running_loop()
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.open = True
        self.keep_alive = False
        self._answer: asyncio.Future[Answer] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._read_timeout_s = 0.0
        self._last_read = 0.0
        self._reset()

    def _reset(self) -> None:
        self._status = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._headers_done = False

    # -- one exchange ------------------------------------------------------------------

    def send(self, data: bytes, read_timeout_s: float) -> asyncio.Future[Answer]:
        assert self.transport is not None and self._answer is None
        self._answer = answer = self._loop.create_future()
        self._reset()
        self.transport.write(data)
        self._read_timeout_s = read_timeout_s
        self._last_read = now = self._loop.time()
        self._timer = self._loop.call_at(now + read_timeout_s, self._check_read)
        return answer

    def _check_read(self) -> None:
        """Fail the exchange when nothing was read for the read timeout (else look again)."""
        due = self._last_read + self._read_timeout_s
        if self._loop.time() < due:
            self._timer = self._loop.call_at(due, self._check_read)
            return
        self._timer = None
        self._fail(httpx.ReadTimeout(f"no data for {self._read_timeout_s:g} s"))

    def _fail(self, error: Exception) -> None:
        self._finish(error=error)
        self.abort()

    def _finish(self, answer: Answer | None = None, error: Exception | None = None) -> None:
        waiting, self._answer = self._answer, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if waiting is None or waiting.done():
            return
        if error is not None:
            waiting.set_exception(error)
        else:
            waiting.set_result(answer)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the connection after what is written (the server asked for it)."""
        self.open = False
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection at once (its state is unknown, or it is no longer wanted)."""
        self.open = False
        if self.transport is not None:
            self.transport.abort()

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def eof_received(self) -> None:
        # The server closed its side: no new request goes here (an answer that ends with
        # the connection is completed in ``connection_lost``, which follows).
        self.open = False

    def data_received(self, data: bytes) -> None:
        if self._answer is None:  # nothing asked: the server broke the protocol
            self.abort()
            return
        self._last_read = self._loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("the server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed answer: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self._answer is not None:
            if self._headers_done and not self._framed():
                # An answer without Content-Length or chunks ends with its connection.
                self.keep_alive = False
                self._finish(self._whole())
            else:
                self._finish(error=httpx.RemoteProtocolError("server disconnected"))
        self._pool._lost(self)

    # -- httptools callbacks -----------------------------------------------------------

    def on_status(self, status: bytes) -> None:
        self._status += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if 100 <= self._parser.get_status_code() < 200:
            self._reset()  # an interim answer (100 Continue): the real one follows
            return
        self.keep_alive = self._parser.should_keep_alive()
        self._finish(self._whole())

    def _whole(self) -> Answer:
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        return Answer(self._parser.get_status_code(), self._status, self._headers, body)

    def _framed(self) -> bool:
        names = {name.lower() for name, _ in self._headers}
        return b"content-length" in names or b"transfer-encoding" in names


class Connections:
    """A pool of at most ``limit`` connections, kept per scheme, host and port."""

    def __init__(
        self, *, limit: int, connect_timeout_s: float, read_timeout_s: float, pool_timeout_s: float
    ) -> None:
        self._limit = limit
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._pool_timeout_s = pool_timeout_s
        self._idle: dict[Key, list[_Connection]] = {}
        self._all: set[_Connection] = set()
        self._opening = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tls: ssl.SSLContext | None = None

    @staticmethod
    def takes(request: httpx.Request) -> bool:
        """Whether ``request`` can go here: a body already read, an http(s) URL, a method
        whose answer needs no knowledge of the request to frame, no chunked upload."""
        return (
            request.url.scheme in ("http", "https")
            and request.method.encode() in METHODS
            and "transfer-encoding" not in request.headers
        )

    async def exchange(self, request: httpx.Request) -> Answer:
        """Send ``request`` (its body read) and return the whole answer."""
        data = _request_bytes(request)
        url = request.url
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        connection = await self._connection(key, request)
        try:
            answer = await connection.send(data, self._read_timeout_s)
        except httpx.TransportError as exc:
            exc.request = request
            raise
        except BaseException:  # cancelled mid-exchange: the connection's state is unknown
            connection.abort()
            raise
        if connection.keep_alive and connection.open:
            self._idle.setdefault(key, []).append(connection)
            self._wake()
        else:
            connection.close()
        return answer

    async def aclose(self) -> None:
        for connection in list(self._all):
            connection.abort()
        self._all.clear()
        self._idle.clear()
        self._opening = 0
        await asyncio.sleep(0)  # the transports close their sockets on the next turn

    # -- the pool ----------------------------------------------------------------------

    async def _connection(self, key: Key, request: httpx.Request) -> _Connection:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # connections belong to the loop that made them
            self._idle.clear()
            self._all.clear()
            self._opening, self._loop = 0, loop
        deadline = None
        while True:
            idle = self._idle.get(key)
            while idle:
                connection = idle.pop()
                if connection.open:
                    return connection
            if len(self._all) + self._opening < self._limit:
                return await self._open(key, request)
            if self._drop_an_idle_connection():
                continue
            if deadline is None:
                deadline = loop.time() + self._pool_timeout_s
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            except BaseException as exc:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._wake()  # woken, but leaving: the free place goes to the next one
                if isinstance(exc, TimeoutError):
                    raise httpx.PoolTimeout(
                        f"no free connection within {self._pool_timeout_s:g} s", request=request
                    ) from None
                raise

    def _drop_an_idle_connection(self) -> bool:
        """Close an idle connection to another host to make room; False when none is idle."""
        for connections in self._idle.values():
            while connections:
                connection = connections.pop()
                if connection.open:
                    connection.abort()
                    self._all.discard(connection)
                    return True
        return False

    async def _open(self, key: Key, request: httpx.Request) -> _Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        tls = self._tls_context() if scheme == "https" else None
        self._opening += 1
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self, key),
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls else None,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"cannot connect to {host}:{port} within {self._connect_timeout_s:g} s",
                request=request,
            ) from None
        except OSError as exc:  # refused, unreachable, unknown host, a TLS failure
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        finally:
            self._opening -= 1
        self._all.add(connection)
        return connection

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    def _lost(self, connection: _Connection) -> None:
        """A connection closed (by either side): it leaves the pool and frees its place."""
        if connection in self._all:
            self._all.discard(connection)
            idle = self._idle.get(connection.key)
            if idle and connection in idle:
                idle.remove(connection)
            self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


def _request_bytes(request: httpx.Request) -> bytes:
    """The request as HTTP/1.1 bytes: request line, headers as given, body."""
    body = request.content
    lines = [request.method.encode(), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
    length_given = False
    headers = request.headers.raw
    for name, value in headers:
        lines += (name, b": ", value, b"\r\n")
        length_given = length_given or name.lower() == b"content-length"
    if body and not length_given:
        lines.append(b"Content-Length: %d\r\n" % len(body))
    lines.append(b"\r\n")
    head = b"".join(lines)
    # Exactly one CRLF per line and no other CR or LF: one inside a name or value would
    # let it forge headers or a second request.
    ends = len(headers) + 2 + (bool(body) and not length_given)
    if head.count(b"\n") != ends or head.count(b"\r") != ends:
        raise httpx.LocalProtocolError("a header name or value contains CR or LF", request=request)
    return head + body if body else head
