"""The paid path's send with fewer layers: an auth flow driven straight over the lab's
transport, and that transport's requests made straight on aiohttp.

``httpx.AsyncClient.send`` runs every request through its auth, redirect, hook and cookie
layers and wraps each answer's stream once more (``BoundAsyncStream``); httpx-aiohttp's
transport wraps aiohttp's answer in an ``httpx.Response`` that the lab's transport then wraps
again. On a loopback batch those layers were about a fifth of the event loop's time inside a
paid call (docs/performance.md, "The thinner send"). ``send_flow`` does what
``AsyncClient.send`` does for a request sent through an auth flow, not streamed, on a client
with no event hooks and no redirects followed: the same calls of the flow in the same order,
the same closing on every exit, the cookies read, the same log line, ``elapsed`` and
``history`` set. ``answer_of`` is httpx-aiohttp's request (the same aiohttp arguments) and
``Body`` its answer's stream, without the second ``httpx.Response``.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx

#: httpx's own logger: its "HTTP Request: ..." line is written for these requests too.
_LOG = logging.getLogger("httpx")
#: httpx-aiohttp's read size.
CHUNK_BYTES = 16 * 1024


class Body(httpx.AsyncByteStream):
    """An aiohttp answer's body as an httpx stream (its failures are aiohttp's: the lab's
    ``_Answer`` around it maps them)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._response.content.iter_chunked(CHUNK_BYTES)

    def arrived(self) -> bool:
        """Whether the whole body is here (reading it waits for nothing more)."""
        return self._response.content.is_eof()

    async def aclose(self) -> None:
        await self._response.__aexit__(None, None, None)


async def answer_of(
    session: aiohttp.ClientSession, request: httpx.Request, proxy: httpx.Proxy | None
) -> aiohttp.ClientResponse:
    """Send ``request`` on ``session`` as httpx-aiohttp's transport sends it; aiohttp's
    answer, its body unread."""
    timeout = request.extensions.get("timeout", {})
    data: Any
    try:
        data = request.content or None
    except httpx.RequestNotRead:
        data = request.stream
        request.headers.pop("transfer-encoding", None)  # aiohttp frames the stream itself
    return await session.request(
        method=request.method,
        url=str(request.url),
        headers=_headers(request.headers),
        data=data,
        allow_redirects=False,
        auto_decompress=False,
        compress=False,
        timeout=aiohttp.ClientTimeout(
            sock_connect=timeout.get("connect"),
            sock_read=timeout.get("read"),
            connect=timeout.get("pool"),
        ),
        server_hostname=request.extensions.get("sni_hostname"),
        proxy=str(proxy.url) if proxy else None,
        proxy_auth=aiohttp.BasicAuth(*proxy.auth) if proxy and proxy.auth else None,
        proxy_headers=proxy.headers if proxy else None,
    ).__aenter__()


def _headers(headers: httpx.Headers) -> dict[str, str]:
    """``headers`` as aiohttp reads an ``httpx.Headers`` (its ``items()``: names in lower
    case, a repeated one's values joined by ", "), decoded with its encoding found once
    (httpx's ``items()`` looks it up for every name and every value: 10 % of aiohttp's
    request on the paid path)."""
    encoding = headers.encoding
    merged: dict[str, str] = {}
    for name, value in headers.raw:
        key, text = name.lower().decode(encoding), value.decode(encoding)
        merged[key] = f"{merged[key]}, {text}" if key in merged else text
    return merged  # aiohttp makes its case-insensitive dict of it, as of httpx's headers


async def send_flow(
    client: httpx.AsyncClient,
    transport: httpx.AsyncBaseTransport,
    request: httpx.Request,
    auth: httpx.Auth,
) -> httpx.Response:
    """``client.send(request, auth=auth, follow_redirects=False)`` with every request of the
    flow sent on ``transport`` (the one ``client`` would pick: no mounts apply); the answer
    read whole. ``client`` has no event hooks."""
    if client.is_closed:
        raise RuntimeError("Cannot send a request, as the client has been closed.")
    if "timeout" not in request.extensions:
        request.extensions = {**request.extensions, "timeout": client.timeout.as_dict()}
    flow = auth.async_auth_flow(request)
    history: list[httpx.Response] = []
    try:
        request = await flow.__anext__()
        while True:
            started = time.perf_counter()
            response = await transport.handle_async_request(request)
            try:
                _received(client, request, response, history)
                try:
                    next_request = await flow.asend(response)
                except StopAsyncIteration:
                    break
                response.history = list(history)
                await _read(response, started)
                request = next_request
                history.append(response)
            except BaseException:
                await response.aclose()
                raise
    finally:
        await flow.aclose()
    try:
        await _read(response, started)
    except BaseException:
        await response.aclose()
        raise
    return response


def _received(
    client: httpx.AsyncClient,
    request: httpx.Request,
    response: httpx.Response,
    history: list[httpx.Response],
) -> None:
    """What httpx does with each answer before its flow sees it."""
    response.request = request
    client.cookies.extract_cookies(response)
    if _LOG.isEnabledFor(logging.INFO):
        _LOG.info(
            'HTTP Request: %s %s "%s %d %s"',
            request.method,
            request.url,
            response.http_version,
            response.status_code,
            response.reason_phrase,
        )
    response.history = list(history)
    if response.has_redirect_location:
        # Not followed (follow_redirects=False): the request it points at, as httpx says it.
        response.next_request = client._build_redirect_request(request, response)


async def _read(response: httpx.Response, started: float) -> None:
    """Read the answer whole (a second read, after the flow's, is a no-op) and set its
    ``elapsed``, as httpx's stream wrapper does when the stream closes."""
    await response.aread()
    response.elapsed = datetime.timedelta(seconds=time.perf_counter() - started)
