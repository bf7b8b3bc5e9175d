"""The HTTP connections of a lab, and the short way over them for ordinary requests.

Every request is an ``httpx.Request`` and every answer an ``httpx.Response``: the 402 flow
(``transport.auth``) and the gateway's readers speak httpx, and so do the clients handed to
other libraries. Underneath, two pools hold the connections:

- ``transport.connections``, the lab's own HTTP/1.1 connections, carry every request that
  is sent whole and answered whole (a body of bytes under aiohttp's large-body limit, an
  answer read whole, not HEAD): every paid call of a batch. ``Wire.send`` drives the auth
  flow itself and writes each request straight onto a kept connection;
- one aiohttp session (several times faster than httpx's own pool under concurrency)
  carries the rest: streamed requests and answers (an upload, a chat stream) go through
  ``httpx.AsyncClient.send`` on it.

httpx's client adds nothing the short way needs (no redirects are followed, no cookies
kept, no hooks are set) and its layers (the client's send chain, the transport adapter, the
response's byte-stream chain) cost about a quarter of a batch's client CPU per paid call;
aiohttp's request and response objects another tenth of its instructions
(``transport.connections``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import httpx

from x402lab.errors import ConfigError
from x402lab.transport.connections import Connections
from x402lab.x402.codec import compact_json

#: aiohttp's limit for a body handed over as one bytes object (it warns above it, "Sending
#: a large body directly with raw bytes might lock the event loop"); larger bodies go as a
#: stream of chunks under the same Content-Length.
LARGE_BODY_BYTES = int(getattr(aiohttp.payload, "TOO_LARGE_BYTES_BODY", 2**20))
BODY_CHUNK_BYTES = 2**16

#: aiohttp's failures as httpx's, most specific first (a ConnectionTimeoutError is also a
#: ServerTimeoutError; a ClientConnectorError is also a ClientOSError); the last two rows
#: take every timeout and every other aiohttp failure.
_ERRORS: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.ReadError),
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),
    (aiohttp.ClientOSError, httpx.ReadError),
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (TimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientError, httpx.TransportError),
)


def as_httpx_error(
    exc: TimeoutError | aiohttp.ClientError, request: httpx.Request
) -> httpx.TransportError:
    """The httpx error that says what ``exc`` (an aiohttp failure or a timeout) says."""
    ours = next(ours for theirs, ours in _ERRORS if isinstance(exc, theirs))
    return ours(str(exc) or type(exc).__name__, request=request)


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


class _NoCookies(httpx.Cookies):
    """A cookie jar that keeps nothing. Neither service sets cookies (x402 keeps no session
    state), and httpx would otherwise parse every answer's headers into its jar."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


class Wire:
    """One lab's connection pool: ``send`` (the short way where it can), ``build_request``
    and ``client`` (an ``httpx.AsyncClient`` on the same connections)."""

    def __init__(self, *, timeout_s: float = 120.0, max_connections: int = 64) -> None:
        from httpx_aiohttp import AiohttpTransport

        connect_s = min(timeout_s, 15.0)
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        # As httpx's timeouts map onto aiohttp's: connecting, then each read, and the wait
        # for a free connection of the pool.
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_s, sock_read=timeout_s, connect=timeout_s
        )
        wire = self

        class Transport(AiohttpTransport):
            """httpx-aiohttp's transport on this pool, large bodies streamed."""

            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                return await super().handle_async_request(streamed_if_large(request))

        self.client = httpx.AsyncClient(
            transport=Transport(client=lambda: wire.session),
            timeout=httpx.Timeout(timeout_s, connect=connect_s),
            follow_redirects=False,
        )
        # The ``cookies`` setter would copy into a plain jar; the attribute it sets is replaced.
        if isinstance(getattr(self.client, "_cookies", None), httpx.Cookies):
            self.client._cookies = _NoCookies()
        # The headers of a JSON request (Host, the client's defaults, then the caller's),
        # kept per host and caller's headers: a batch sends thousands with the same ones.
        self._json_headers: dict[
            tuple[bytes, tuple[tuple[str, str], ...]], list[tuple[bytes, bytes]] | None
        ] = {}
        self._timeouts = self.client.timeout.as_dict()
        # Requests sent whole and answers read whole (every paid call) skip aiohttp too.
        self._connections = Connections(
            limit=max_connections,
            connect_timeout_s=connect_s,
            read_timeout_s=timeout_s,
            pool_timeout_s=timeout_s,
        )

    def __repr__(self) -> str:
        return f"Wire(max_connections={self._max_connections})"

    @property
    def session(self) -> aiohttp.ClientSession:
        """The aiohttp session (made on first use, inside the running event loop)."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections)
            self._session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(), timeout=self._timeout
            )
        return self._session

    def build_request(
        self,
        method: str,
        url: httpx.URL | str,
        *,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Request:
        """``httpx.AsyncClient.build_request``. A JSON body alone (every paid gateway call)
        to an ``httpx.URL`` is built without the client's merging layers and httpx's header
        checks, in a third of the time: the same headers, body bytes and extensions as
        httpx's (``tests/client/test_wire.py``). Raises ConfigError for a header with a
        line break, before anything is signed or sent."""
        if headers:
            _refuse_line_breaks(headers)
        body = kwargs.get("json")
        if body is None or len(kwargs) != 1 or not isinstance(url, httpx.URL):
            return self.client.build_request(method, url, headers=headers, **kwargs)
        pairs = self._json_headers_for(url, headers)
        if pairs is None:  # a header httpx must encode itself
            return self.client.build_request(method, url, headers=headers, **kwargs)
        content = compact_json(body).encode("utf-8")  # as httpx writes ``json=``
        stream = httpx.ByteStream(content)
        request = httpx.Request(method, url, stream=stream, extensions={"timeout": self._timeouts})
        # Every header given whole, ASCII: httpx neither adds nor checks any, nor guesses
        # their encoding again on the first read.
        request.headers = httpx.Headers(
            [*pairs, (b"Content-Length", str(len(content)).encode("ascii"))], encoding="ascii"
        )
        request.read()  # the body as ``request.content``, as httpx's own build keeps it
        return request

    def _json_headers_for(
        self, url: httpx.URL, headers: Mapping[str, str] | None
    ) -> list[tuple[bytes, bytes]] | None:
        """The headers of a JSON request to ``url``'s host, Content-Length aside, as httpx
        orders them (None when one is not ASCII); kept per host and caller's headers."""
        key = (url.netloc, tuple(headers.items()) if headers else ())
        if key not in self._json_headers:
            merged = self.client.headers.copy()
            merged.update(headers or {})
            merged["Content-Type"] = "application/json"
            items = [("Host", url.netloc.decode("ascii")), *merged.multi_items()]
            ascii_only = all(k.isascii() and v.isascii() for k, v in items)
            if len(self._json_headers) > 64:
                self._json_headers.clear()
            self._json_headers[key] = (
                [(k.encode("ascii"), v.encode("ascii")) for k, v in items] if ascii_only else None
            )
        return self._json_headers[key]

    async def send(
        self, request: httpx.Request, *, auth: httpx.Auth | None = None, stream: bool = False
    ) -> httpx.Response:
        """Send ``request`` (through ``auth``'s flow when given) and return the last answer;
        with ``stream`` its body is left unread. Raises httpx.HTTPError subclasses."""
        if stream or not self._short(request):
            return await self.client.send(request, auth=auth, stream=stream)
        if auth is None:
            return await self._exchange(request)
        flow = auth.async_auth_flow(request)
        try:
            request = await flow.__anext__()
            while True:
                response = await self._exchange(request)
                try:
                    request = await flow.asend(response)
                except StopAsyncIteration:
                    return response
        finally:
            await flow.aclose()

    async def aclose(self) -> None:
        await self._connections.aclose()
        await self.client.aclose()  # closes the session through the transport
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    def _short(self, request: httpx.Request) -> bool:
        try:
            return len(request.content) <= LARGE_BODY_BYTES
        except httpx.RequestNotRead:
            return False  # a streamed upload

    async def _exchange(self, request: httpx.Request) -> httpx.Response:
        """One request and its whole answer, on the lab's own connections where they take
        it, else straight over the aiohttp session."""
        if not Connections.takes(request):
            return await self._exchange_aiohttp(request)
        answer = await self._connections.exchange(request)
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if answer.reason:
            extensions["reason_phrase"] = answer.reason
        return _whole_response(
            httpx.Response(
                answer.status,
                headers=answer.headers,
                stream=httpx.ByteStream(answer.body),
                request=request,
                extensions=extensions,
            ),
            answer.body,
        )

    async def _exchange_aiohttp(self, request: httpx.Request) -> httpx.Response:
        """One request and its whole answer, straight over the aiohttp session."""
        try:
            async with self.session.request(
                request.method,
                str(request.url),
                headers=request.headers.multi_items(),
                data=request.content or None,
                allow_redirects=False,
                auto_decompress=False,  # the httpx.Response decodes, as httpx does
                compress=False,
            ) as answer:
                content = await answer.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise as_httpx_error(exc, request) from exc
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if answer.reason:
            extensions["reason_phrase"] = answer.reason.encode()
        response = httpx.Response(
            answer.status,
            headers=answer.raw_headers,
            stream=httpx.ByteStream(content),
            request=request,
            extensions=extensions,
        )
        return _whole_response(response, content)


def _refuse_line_breaks(headers: Mapping[str, str]) -> None:
    """A CR or LF in a header would forge others (httpx lets it through). The value is not
    shown: it may be a secret (a bearer token)."""
    for name, value in headers.items():
        if any(c in text for text in (name, value) for c in "\r\n"):
            raise ConfigError(
                f"header {name.strip()!r} contains a line break (CR or LF); remove it"
            )


def _whole_response(response: httpx.Response, content: bytes) -> httpx.Response:
    """``response`` read, its body ``content`` as received."""
    if response.headers.get("Content-Encoding", "identity").lower() != "identity":
        response.read()  # httpx's decoders, as its client would
    else:
        # Read as the bytes received: httpx's ``read`` would run them through its
        # chunker and identity decoder to the same bytes, half the cost of the object.
        response._content = content
        response.is_stream_consumed = response.is_closed = True
    return response
