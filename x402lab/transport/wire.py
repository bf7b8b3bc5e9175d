"""The HTTP stack of a lab: httpx's API over one aiohttp connection pool, one trust store.

Every request the lab makes goes through one ``httpx.AsyncClient``: free and paid calls,
batches, streams, uploads and the chain's JSON-RPC. Its transport is httpx-aiohttp's on one
aiohttp session (one connection pool), calling aiohttp itself (``direct``); a paid request's
402 flow is driven straight over that transport, as the client's send would drive it.
``benchmarks/batch_throughput.py --latency 0.05`` (concurrency 32, a shared 2-core
machine): on httpx's own pool (httpcore) a batch ran at 0.42x bare aiohttp's calls/s with
11.8 ms of client CPU per paid call; on this one at 1.1x to 1.7x bare's with 2.7 to 3.3 ms
(1.12x, 2.7 ms and 0.43 of the one-trip floor on a quiet machine; at ``--latency 1``, 0.93
of the floor).

Failures are httpx's errors, which the retry and re-send rules read: nothing connected
(``ConnectError``, ``ConnectTimeout``, ``PoolTimeout``: the request never left) or no whole
answer (``RemoteProtocolError``, ``ReadError``, ``ReadTimeout``: it may have been acted on,
so a paid one is sent again with the same signed payload).

The environment (proxies, the trust store) is read as httpx reads it (``environment``).
A caller's own client sends every request as it was made to and is never closed here; its
answers are read within the same bounds as the lab's own (``_Through``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping
from http.cookiejar import CookieJar
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from x402lab.errors import ConfigError
from x402lab.transport.direct import Body, answer_of, send_flow
from x402lab.transport.environment import Verify, environment_proxies, ssl_context
from x402lab.transport.limits import DEFAULT_LIMITS, MEDIA, Limits, too_large
from x402lab.transport.turn import TURN, send_in_turn

#: aiohttp's limit for a body handed over as one bytes object (it warns above it, "Sending
#: a large body directly with raw bytes might lock the event loop"); larger bodies go as a
#: stream of chunks under the same Content-Length.
LARGE_BODY_BYTES = int(getattr(aiohttp.payload, "TOO_LARGE_BYTES_BODY", 2**20))
BODY_CHUNK_BYTES = 2**16

#: aiohttp's failures as httpx's, most specific first (a ConnectionTimeoutError is also a
#: ServerTimeoutError; a ClientConnectorError is also a ClientOSError; a server that closed
#: the connection without answering is not a connect timeout, as httpx-aiohttp's own table
#: says); the last two rows take every timeout and every other aiohttp failure.
_ERRORS: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientProxyConnectionError, httpx.ProxyError),
    (aiohttp.ClientHttpProxyError, httpx.ProxyError),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.ReadError),
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),
    (aiohttp.ClientOSError, httpx.ReadError),
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (TimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientError, httpx.TransportError),
)


def as_httpx_error(exc: BaseException, request: httpx.Request) -> httpx.TransportError:
    """The httpx error that says what ``exc`` says: an aiohttp failure or a timeout (also
    as httpx-aiohttp raised it, from that failure); an httpx error as it is."""
    cause = exc.__cause__ if isinstance(exc, httpx.TransportError) else exc
    if not isinstance(cause, TimeoutError | aiohttp.ClientError):
        assert isinstance(exc, httpx.TransportError)
        exc.request = request
        return exc
    ours = next(ours for theirs, ours in _ERRORS if isinstance(cause, theirs))
    return ours(str(cause) or type(cause).__name__, request=request)


class _Chunks(httpx.AsyncByteStream):
    """A bytes body as an async stream of chunks (readable any number of times)."""

    def __init__(self, content: bytes) -> None:
        self._content = content

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self._content), BODY_CHUNK_BYTES):
            yield self._content[start : start + BODY_CHUNK_BYTES]


def streamed_if_large(request: httpx.Request, threshold: int = LARGE_BODY_BYTES) -> httpx.Request:
    """``request`` itself, or, for a body above ``threshold`` bytes, the same request with
    that body as a chunk stream (same headers, so the same Content-Length)."""
    try:
        content = request.content
    except httpx.RequestNotRead:
        return request  # already a stream (an upload): the transport streams it
    if len(content) <= threshold:
        return request
    return httpx.Request(
        request.method,
        request.url,
        headers=request.headers,
        stream=_Chunks(content),
        extensions=request.extensions,
    )


class _Answer(httpx.AsyncByteStream):
    """An answer's body whose read failures are httpx's errors, as ``_ERRORS`` maps them,
    read within its size limit (``limits.Limits``: LimitExceeded at the first byte past it)
    and before the request's deadline (``deadline``, the loop's clock: a ReadTimeout)."""

    def __init__(
        self,
        stream: httpx.AsyncByteStream,
        request: httpx.Request,
        limit: tuple[int, str],
        deadline: _Deadline,
    ) -> None:
        self._stream, self._request = stream, request
        self._limit, self._deadline = limit, deadline

    async def __aiter__(self) -> AsyncIterator[bytes]:
        most, name = self._limit
        seen = 0
        # aiohttp's body says when it has all arrived (an answer in one packet, the usual
        # paid one): a deadline per chunk was a quarter of reading it (docs/performance.md).
        arrived = self._stream.arrived if isinstance(self._stream, Body) else _never
        with _mapped(self._request):
            chunks = aiter(self._stream)
            while True:
                try:
                    if arrived():  # nothing to wait for: no deadline to watch
                        chunk = await anext(chunks)
                    else:
                        async with self._deadline.guard(self._request):
                            chunk = await anext(chunks)
                except StopAsyncIteration:
                    return
                seen += len(chunk)
                if seen > most:
                    await self._stream.aclose()
                    what = f"the answer to {self._request.method} {self._request.url.path}"
                    raise too_large(most, name, what)
                yield chunk

    async def aclose(self) -> None:
        with _mapped(self._request):
            await self._stream.aclose()


def _never() -> bool:
    return False


@contextlib.contextmanager
def _mapped(request: httpx.Request) -> Iterator[None]:
    """Raise what is raised inside as an httpx error (``as_httpx_error``)."""
    try:
        yield
    except (httpx.TransportError, TimeoutError, aiohttp.ClientError) as exc:
        mapped = as_httpx_error(exc, request)
        if mapped is not exc:  # else it goes on as it is
            raise mapped from exc
        raise


class _Deadline:
    """When a request must have its whole answer (``timeout_s`` after it is sent, on the
    loop's clock): past it, a ReadTimeout that names the limit."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = asyncio.get_running_loop().time() + seconds

    def guard(self, request: httpx.Request) -> _Guarded:
        """An ``async with`` block that must end before the deadline."""
        return _Guarded(self, request)


class _Guarded:
    """One block under a ``_Deadline`` (a class, not a generator: the wire enters one for
    every request and every chunk of its answer)."""

    __slots__ = ("_deadline", "_request", "_timeout")

    def __init__(self, deadline: _Deadline, request: httpx.Request) -> None:
        self._deadline, self._request = deadline, request
        self._timeout = asyncio.timeout_at(deadline.at)

    async def __aenter__(self) -> None:
        await self._timeout.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> None:
        try:
            await self._timeout.__aexit__(*exc_info)
        except TimeoutError:
            raise httpx.ReadTimeout(
                f"no whole answer within timeout_s={self._deadline.seconds:g} s (the deadline"
                " of the whole request, its body included)",
                request=self._request,
            ) from None


class _Transport(AiohttpTransport):
    """httpx-aiohttp's transport on a lab's aiohttp session: large bodies streamed, every
    failure mapped by ``_ERRORS``, every answer bounded (``limits``, and ``deadline_s`` for
    the whole request); ``proxy``: the proxy its requests go through."""

    def __init__(self, *, limits: Limits, deadline_s: float, **options: Any) -> None:
        super().__init__(**options)
        self._limits, self._deadline_s = limits, deadline_s

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        deadline = _Deadline(self._deadline_s)
        if not isinstance(self.client, aiohttp.ClientSession):
            self.client = self.get_client()  # the session, kept (as httpx-aiohttp keeps it)
        with _mapped(request):
            async with deadline.guard(request):
                # aiohttp's answer read straight into one httpx.Response (``direct``).
                answer = await send_in_turn(
                    answer_of(self.client, streamed_if_large(request), self.proxy),
                    request.extensions.get(TURN),
                )
        status = answer.status
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if answer.reason:
            extensions["reason_phrase"] = answer.reason.encode()
        limit = self._limits.body_bytes(status, bool(request.extensions.get(MEDIA)))
        with _mapped(request):
            whole = await _arrived_whole(answer, limit[0])
        return httpx.Response(
            status,
            headers=answer.raw_headers,
            stream=_Answer(Body(answer), request, limit, deadline) if whole is None else whole,
            request=request,
            extensions=extensions,
        )


async def _arrived_whole(answer: aiohttp.ClientResponse, most: int) -> httpx.ByteStream | None:
    """The answer's body, if all of it came with its headers and within ``most`` bytes (its
    connection then goes back to the pool); else None, and it is read as it arrives
    (``_Answer``: counted, under the deadline). A paid answer of a few hundred bytes comes in
    one packet with its headers: reading it through the stream chain (``_Answer``, ``Body``,
    aiohttp's chunk iterator, httpx's) was about 5 % of a loopback batch's event loop."""
    content = answer.content
    if not content.is_eof() or content.total_bytes > most:
        return None
    body = content.read_nowait()
    await answer.__aexit__(None, None, None)
    # A stream, not ``content=``: httpx would add a Content-Length to a chunked answer.
    return httpx.ByteStream(body)


class _Through(httpx.AsyncBaseTransport):
    """The transport of a lab on a caller's own client: each request is sent by that client
    as it was made (its transport, proxies, hooks, auth and timeouts), and its answer read
    within the lab's bounds as the lab's own transport reads them (``_Answer``: ``limits``
    counted as the bytes arrive, ``deadline_s`` for the whole request). The caller's client
    is never closed here."""

    def __init__(self, client: httpx.AsyncClient, *, limits: Limits, deadline_s: float) -> None:
        self._client = client
        self._limits, self._deadline_s = limits, deadline_s

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        deadline = _Deadline(self._deadline_s)
        async with deadline.guard(request):
            response = await self._client.send(request, stream=True, follow_redirects=False)
        stream = response.stream
        if response.is_stream_consumed:
            # The caller's transport answered with a body it had already read (httpx's
            # ``client.request`` inside it): its stream is spent, iterating it again would
            # wait on a connection that sends nothing more.
            stream = httpx.ByteStream(response.content)
        assert isinstance(stream, httpx.AsyncByteStream)
        limit = self._limits.body_bytes(response.status_code, bool(request.extensions.get(MEDIA)))
        return httpx.Response(
            response.status_code,
            headers=response.headers.raw,
            stream=_Answer(stream, request, limit, deadline),
            request=request,
            extensions=response.extensions,
        )


class _SetCookies(httpx.Cookies):
    """httpx's cookie jar, reading an answer's cookies only when it sets one: httpx reads
    every answer's through urllib stand-ins of the request and the answer, built each time
    (4.7 % of a batch's event loop on loopback, where no answer sets a cookie; at 250 ms the
    machine was too loaded to tell: docs/performance.md, "Before and after")."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers:
            super().extract_cookies(response)


class _Client(httpx.AsyncClient):
    """``httpx.AsyncClient`` whose cookie jar is a ``_SetCookies``."""

    @property
    def cookies(self) -> httpx.Cookies:
        return self._cookies

    @cookies.setter
    def cookies(
        self, cookies: httpx.Cookies | CookieJar | dict[str, str] | list[tuple[str, str]]
    ) -> None:
        self._cookies = _SetCookies(cookies)


class Wire:
    """One lab's HTTP client: ``send``, ``build_request`` and ``client`` (the
    ``httpx.AsyncClient`` itself, for the chain's JSON-RPC).

    ``http_client``: a caller's own client, which builds and sends every request (its
    headers, proxies, hooks and timeouts apply) and is not closed by ``aclose``; its answers
    are read within ``limits`` and ``timeout_s`` as the lab's own are (``_Through``).
    Otherwise one is made with ``timeout_s`` (each read, and the deadline of a whole
    request), ``max_connections``, ``verify`` and ``limits`` (the most it reads of an
    answer).
    """

    def __init__(
        self,
        *,
        timeout_s: float = 120.0,
        max_connections: int = 64,
        verify: Verify = True,
        http_client: httpx.AsyncClient | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self._max_connections = max_connections
        self.limits = limits
        #: The deadline of one request, its body included (``ServiceClient`` also starts no
        #: retry of an unpaid request after it).
        self.timeout_s = timeout_s
        self._own = http_client is None
        self._session: aiohttp.ClientSession | None = None
        self._context = ssl_context(verify)
        #: The transport every request of the lab's own client goes through, when no proxy
        #: mount picks another: a paid request's flow is driven straight over it (``send``).
        self._direct: _Transport | None = None
        if http_client is not None:
            #: The client that builds requests: the caller's own (its defaults apply).
            self._builder = http_client
            through = _Through(http_client, limits=limits, deadline_s=timeout_s)
            http_client = httpx.AsyncClient(
                transport=through, timeout=http_client.timeout, follow_redirects=False
            )
        else:
            mounts = {
                pattern: None if proxy is None else self._proxied(proxy)
                for pattern, proxy in environment_proxies().items()
            }
            transport = self._transport()
            if not mounts:
                self._direct = transport
            http_client = _Client(
                transport=transport,
                mounts=mounts,
                timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 15.0)),
                follow_redirects=False,
            )
            http_client.cookies = httpx.Cookies()
            self._builder = http_client
        #: Every request goes through it (the chain's JSON-RPC too).
        self.client = http_client

    def _proxied(self, proxy: str) -> httpx.AsyncBaseTransport:
        """The transport of requests through ``proxy``: the same aiohttp pool for an HTTP(S)
        proxy, httpx's own transport for a SOCKS one (aiohttp has none)."""
        if proxy.startswith(("http://", "https://")):
            return self._transport(proxy=httpx.Proxy(proxy))
        limits = httpx.Limits(max_connections=self._max_connections)
        return httpx.AsyncHTTPTransport(verify=self._context, proxy=proxy, limits=limits)

    def _transport(self, **options: Any) -> _Transport:
        return _Transport(
            verify=self._context,
            client=lambda: self.session,
            limits=self.limits,
            deadline_s=self.timeout_s,
            **options,
        )

    @property
    def session(self) -> aiohttp.ClientSession:
        """The aiohttp session, the one pool (made on first use, inside the running loop).
        It reads no proxy of its own: the client's mounts decide, as httpx would."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, ssl=self._context)
            self._session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False
            )
        return self._session

    def __repr__(self) -> str:
        whose = f"max_connections={self._max_connections}" if self._own else "the caller's client"
        return f"Wire({whose})"

    def build_request(
        self,
        method: str,
        url: httpx.URL | str,
        *,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Request:
        """``httpx.AsyncClient.build_request``. Raises ConfigError for a header with a line
        break, before anything is signed or sent."""
        if headers:
            _refuse_line_breaks(headers)
        return self._builder.build_request(method, url, headers=headers, **kwargs)

    async def send(
        self, request: httpx.Request, *, auth: httpx.Auth | None = None, stream: bool = False
    ) -> httpx.Response:
        """Send ``request`` (through ``auth``'s flow when given) and return the last answer;
        with ``stream`` its body is left unread. Raises httpx.HTTPError subclasses."""
        direct = self._direct
        if auth is not None and not stream and direct is not None:
            if not any(self.client.event_hooks.values()):
                # httpx's send without its layers (``direct.send_flow``): the paid path.
                return await send_flow(self.client, direct, request, auth)
        return await self.client.send(request, auth=auth, stream=stream, follow_redirects=False)

    async def aclose(self) -> None:
        """Close the client this object made (a caller's own is left open)."""
        # Around a caller's client there is only the bounding one, which holds nothing.
        if self._own:
            await self.client.aclose()  # closes the session through the transports
            if self._session is not None and not self._session.closed:
                await self._session.close()
            self._session = None


def _refuse_line_breaks(headers: Mapping[str, str]) -> None:
    """A CR or LF in a header would forge others (httpx lets it through). The value is not
    shown: it may be a secret (a bearer token)."""
    for name, value in headers.items():
        if any(c in text for text in (name, value) for c in "\r\n"):
            raise ConfigError(
                f"header {name.strip()!r} contains a line break (CR or LF); remove it"
            )
