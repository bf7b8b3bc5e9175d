"""``GatewayAuth``: the lab's 402 handshake as an ``httpx.Auth`` for clients of other libraries.

Any httpx-based library (openai-python, LangChain's ``ChatOpenAI``, a plain ``httpx.Client``)
pays the gateway through the lab with it: the same payer (budget, per-call cap, pinned payee,
allowed networks), the same ledger, and the same model-id check before anything is signed.
Each request is keyed like the lab's own calls (method, path, canonical JSON body), so a
retry of the same request finds the payment an earlier attempt left ``unknown`` and sends
that *same* signed payload again (``Payer.prepare`` resumes it; its nonce settles at most
once) instead of signing a new one.

The caller's library owns the retries: an ambiguous answer to the paid request (a 5xx or 429
after the payment left) is recorded ``unknown`` and handed back to the caller as the answer
it is, so openai-python retries it as it retries any 5xx; a timeout or dropped connection
leaves the row ``unknown`` and the library's exception goes up. Money errors come out as
x402lab's own exceptions (``BudgetExceeded``, ``PaymentRefused``, ``PaymentRejected``,
``AnswerLost``, ``ModelNotFound``), which openai-python passes through without retrying.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from typing import Any

import httpx

from x402lab.errors import AnswerLost, SettlementUnknown
from x402lab.gateway.paid import request_key
from x402lab.payments import CallInfo, Payer
from x402lab.routes import GATEWAY, PAYMENT_HEADER
from x402lab.transport import CallState, PaymentAuth

#: Checks a request before anything is signed: ``(model, path)``; raises ModelNotFound.
SyncCheck = Callable[[str, str], None]
AsyncCheck = Callable[[str, str], Awaitable[None]]


def body_of(request: httpx.Request) -> tuple[Any, bytes | None]:
    """The request's JSON body (None when it is not JSON) and its raw bytes (None for a
    body that is still a stream)."""
    try:
        raw = request.content
    except httpx.RequestNotRead:
        return None, None
    if not raw:
        return None, raw
    try:
        return json.loads(raw), raw
    except (ValueError, UnicodeDecodeError):
        return None, raw


def call_of(request: httpx.Request, path: str) -> CallInfo:
    """What a request is, for the payer: its model and its request key (the lab's key for
    a JSON body; a digest of the bytes otherwise; none for a streamed upload)."""
    body, raw = body_of(request)
    method = request.method.upper()
    if body is not None:
        key: str | None = request_key(method, path, body)
    elif raw is not None:
        key = hashlib.sha256(f"{method} {path}\n".encode() + raw).hexdigest()[:32]
    else:
        key = None
    model = body.get("model") if isinstance(body, dict) else None
    return CallInfo(
        service=GATEWAY,
        method=method,
        path=path,
        model=model if isinstance(model, str) else None,
        request_key=key,
    )


class GatewayAuth(httpx.Auth):
    """Pays the gateway's 402 challenges through the lab's payer, once per logical request.

    ``gateway_url``: only requests under it are paid (others go as they are); ``check`` and
    ``acheck`` run the model-id check (for sync and async clients).
    """

    def __init__(
        self,
        payer: Payer,
        gateway_url: str,
        *,
        check: SyncCheck | None = None,
        acheck: AsyncCheck | None = None,
    ) -> None:
        self.payer = payer
        self.gateway_url = httpx.URL(gateway_url.rstrip("/") + "/")
        self._check = check
        self._acheck = acheck

    def __repr__(self) -> str:
        return f"GatewayAuth({str(self.gateway_url)!r}, wallet={self.payer.wallet.address})"

    def _path(self, request: httpx.Request) -> str | None:
        """The gateway path of ``request``, or None when it goes elsewhere."""
        url, base = request.url, self.gateway_url
        if (url.scheme, url.host, url.port) != (base.scheme, base.host, base.port):
            return None
        prefix = base.path.rstrip("/")
        return url.path[len(prefix) :] if url.path.startswith(prefix + "/") else None

    def _paying(self, request: httpx.Request, path: str) -> PaymentAuth:
        # The gateway pays by x402, not keys: a placeholder API key never leaves.
        request.headers.pop("authorization", None)
        return PaymentAuth(self.payer, call_of(request, path), PAYMENT_HEADER[GATEWAY], CallState())

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        path = self._path(request)
        if path is None:
            yield request
            return
        paying = self._paying(request, path)
        if self._check is not None and paying.call.model is not None:
            self._check(paying.call.model, path)
        flow = paying.sync_auth_flow(request)
        try:
            request = next(flow)
            while True:
                response = yield request
                try:
                    request = flow.send(response)
                except StopIteration:
                    return
                except SettlementUnknown as exc:
                    if isinstance(exc, AnswerLost):
                        raise
                    return  # the row is unknown; the caller gets this answer and may retry
        finally:
            flow.close()

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        path = self._path(request)
        if path is None:
            yield request
            return
        paying = self._paying(request, path)
        if self._acheck is not None and paying.call.model is not None:
            await self._acheck(paying.call.model, path)
        flow = paying.async_auth_flow(request)
        try:
            request = await flow.__anext__()
            while True:
                response = yield request
                try:
                    request = await flow.asend(response)
                except StopAsyncIteration:
                    return
                except SettlementUnknown as exc:
                    if isinstance(exc, AnswerLost):
                        raise
                    return
        finally:
            await flow.aclose()
