"""One HTTP boundary per service: the paid handshake, unpaid-phase retries, error mapping.

Foreign errors (httpx, aiohttp) are translated here and nowhere else. Retries of the unpaid
request: 429 and 5xx answers (honouring ``Retry-After``) and connection failures. Once a
payment is signed nothing is ever signed again for the request: an ambiguous answer makes
``transport.resend`` send the same request with the same signed payload again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from x402lab.chain.reconcile import free_held
from x402lab.errors import (
    AnswerLost,
    ApiError,
    BudgetExceeded,
    LimitExceeded,
    ModelNotFound,
    NotFound,
    RateLimited,
    TransportError,
    X402LabError,
)
from x402lab.payments import CallInfo, Cost, Payer, read_challenge
from x402lab.transport.auth import CallState, PaymentAuth, request_id
from x402lab.transport.limits import DEFAULT_LIMITS, MEDIA, Limits, parse_json
from x402lab.transport.resend import Resender, no_answer
from x402lab.transport.retry import (
    DEFAULT_RETRY,
    RetryPolicy,
    retry_after_of,
    retry_delay,
    seconds_of,
)
from x402lab.transport.turn import carrying
from x402lab.transport.wire import Wire
from x402lab.x402.models import PaymentRequired

if TYPE_CHECKING:
    from x402lab.chain import ChainClient
    from x402lab.ledger import Settlement


@dataclass
class Reply:
    """An HTTP answer and, for a paid call, what it cost.

    ``settlement``: when the call stores its answer (``CallInfo.stores_answer``) and its
    payment settled, that settlement, not committed yet (None otherwise: the payer committed
    it). The caller commits it with the answer it stores (``ledger.answer_transaction``), or
    alone when it stores none (``settlement.commit()``); until then the ledger row stays
    ``signed``.
    """

    response: httpx.Response
    cost: Cost | None
    settlement: Settlement | None = None
    limits: Limits = DEFAULT_LIMITS

    def json(self) -> Any:
        """The body as JSON; LimitExceeded when it nests deeper than ``Limits.json_depth``,
        ValueError when it is not JSON."""
        return parse_json(self.response.content, self.limits)

    async def aread(self) -> bytes:
        """Read a streamed body whole; a read that fails (a dropped connection, the
        deadline) raises ``lost``'s error."""
        try:
            return await self.response.aread()
        except httpx.HTTPError as exc:
            raise self.lost(exc) from exc

    async def chunks(self) -> AsyncIterator[bytes]:
        """A streamed body's bytes as they arrive (within its limit: LimitExceeded past it);
        a read that fails raises ``lost``'s error."""
        try:
            async for chunk in self.response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as exc:
            raise self.lost(exc) from exc

    async def lines(self) -> AsyncIterator[str]:
        """A streamed body's lines; a read that fails raises ``lost``'s error."""
        try:
            async for line in self.response.aiter_lines():
                yield line
        except httpx.HTTPError as exc:
            raise self.lost(exc) from exc

    def lost(self, exc: httpx.HTTPError) -> X402LabError:
        """The error of a body that could not be read to its end: AnswerLost when its
        payment settled (the receipt came with the headers), else TransportError."""
        why = f"{type(exc).__name__}: {exc}"
        cost = self.cost
        if cost is None or cost.status != "settled":
            return TransportError(f"the answer could not be read to its end ({why})")
        return AnswerLost(
            f"payment of {cost} (ledger row {cost.ledger_id}) settled, and its answer was"
            f" lost while it was read ({why}); it will not be paid again automatically: ask"
            " again to buy a new answer",
            settled=True,
            tx_hash=cost.tx_hash,
            ledger_id=cost.ledger_id,
        )


def _commit_unanswered(state: CallState) -> None:
    """Commit the settlement of a call whose reply its caller will never see (it raised):
    the caller could not commit it with an answer."""
    ticket = state.ticket
    if ticket is not None and ticket.settlement is not None:
        ticket.settlement.commit()


def error_from_response(response: httpx.Response, service: str) -> ApiError:
    """The ApiError subclass that names what a non-success answer says."""
    try:
        body: Any = parse_json(response.content)
    except (ValueError, UnicodeDecodeError, httpx.ResponseNotRead):  # LimitExceeded included
        body = None
    code = message = hint = None
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            code, message = error.get("code"), error.get("message")
        elif isinstance(error, str):
            code = error
        message = body.get("message", message)
        hint = body.get("hint")
    if message is None and not isinstance(body, Mapping):
        message = response.text[:200] if response.is_stream_consumed or response.content else None
    request = response.request
    status = response.status_code
    text = f"{service} {request.method} {request.url.path}: HTTP {status}"
    for part in dict.fromkeys(p for p in (code, message) if p):
        text += f" {part}"
    if hint:
        text += f" (hint: {hint})"
    kind: type[ApiError] = ApiError
    if status == 404:
        kind = NotFound
    elif status == 429:
        kind = RateLimited
    elif status == 400 and "model" in f"{code} {message}".lower():
        kind = ModelNotFound
    return kind(text, status=status, code=code, body=body, url=str(request.url))


class ServiceClient:
    """Sends free and paid requests to one service."""

    def __init__(
        self,
        *,
        service: str,
        base_url: str,
        http: Wire,
        payer: Payer | None,
        header_name: str = "PAYMENT-SIGNATURE",
        retry: RetryPolicy = DEFAULT_RETRY,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        extra_headers: Mapping[str, str] | None = None,
        chain: Callable[[], ChainClient | None] = lambda: None,
    ) -> None:
        self.service = service
        self.base_url = base_url.rstrip("/")
        self.http = http
        self.payer = payer
        self.header_name = header_name
        self.retry = retry
        self._sleep = sleep
        self._headers = dict(extra_headers or {})
        self._urls: dict[str, httpx.URL] = {}
        self._chain = chain
        self._resender = (
            Resender(http=http, payer=payer, retry=retry, sleep=sleep, chain=chain)
            if payer is not None
            else None
        )

    def __repr__(self) -> str:
        return f"ServiceClient({self.service!r}, {self.base_url!r})"

    async def send(
        self,
        method: str,
        path: str,
        *,
        call: CallInfo | None = None,
        expect_402: bool = False,
        stream: bool = False,
        media: bool = False,
        **request_kwargs: Any,
    ) -> Reply:
        """Send one logical request; with ``call`` set, pay its 402 once.

        An ambiguous answer to the paid request is sent again with the same signed payload
        (``transport.resend``). Raises ApiError subclasses for error answers, TransportError
        when the service is unreachable (nothing paid), PaymentRefused/BudgetExceeded
        (nothing signed), PaymentRejected (signed, refused, nothing settled),
        SettlementUnknown and AnswerLost (settled earlier, its answer lost), LimitExceeded
        for an answer larger than its kind's limit (``media``: the answer is a media file,
        ``Limits.media_bytes``), nothing signed when that was the 402.

        A payment the budget cannot hold is tried once more when asking the chain frees
        refused authorizations of the budget whose window has passed (``chain.free_held``:
        money rule 4, the clock alone never frees them).
        """
        for last_try in (False, True):
            try:
                return await self._send_once(
                    method, path, call, expect_402, stream, media, dict(request_kwargs)
                )
            except BudgetExceeded:
                if last_try or call is None or self.payer is None or not await self._free_held():
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _free_held(self) -> int:
        """The amount the chain freed of this payer's budget (``chain.free_held``)."""
        assert self.payer is not None
        budget = self.payer.budget
        return await free_held(budget.ledger, self._chain(), budget.name)

    async def _send_once(
        self,
        method: str,
        path: str,
        call: CallInfo | None,
        expect_402: bool,
        stream: bool,
        media: bool,
        request_kwargs: dict[str, Any],
    ) -> Reply:
        """``send`` without its second try after freeing held authorizations."""
        url = self._url(path)
        headers = {**self._headers, **request_kwargs.pop("headers", {})}
        # What the wire reads of this request: a media answer's limit, the send turn it holds.
        extensions: dict[str, Any] = carrying(call.turn) if call is not None else {}
        if media:
            extensions[MEDIA] = True
        if extensions:
            request_kwargs["extensions"] = extensions
        last = self.retry.attempts - 1
        # No retry of the unpaid phase starts ``timeout_s`` after the call began (a paid
        # payload is still sent again while it is valid: money rule 4).
        deadline = time.monotonic() + self.http.timeout_s
        for attempt in range(self.retry.attempts):
            state = CallState()
            request = self.http.build_request(method, url, headers=headers, **request_kwargs)
            auth = None
            if call is not None:
                if self.payer is None:
                    raise ApiError(f"{self.service} {path} needs payment and no wallet is set")
                auth = PaymentAuth(self.payer, call, self.header_name, state)
                state.resend = True
            try:
                response = await self.http.send(request, auth=auth, stream=stream)
            except httpx.HTTPError as exc:
                if state.signed and state.cost is None:
                    state.pending = no_answer(exc)
                    response = await self._settle(request, state, stream)
                elif state.cost is not None and state.cost.status == "settled":
                    # Settled, and then its body was lost: never paid again.
                    raise self._lost_after_payment(state, exc) from exc
                elif attempt < last and time.monotonic() < deadline:
                    await self._sleep(retry_delay(self.retry, attempt, None, time.time()))
                    continue
                else:
                    raise TransportError(
                        f"cannot reach {self.service} at {url}: {type(exc).__name__}: {exc}"
                    ) from exc
            except BaseException as exc:
                # Cancelled (or interrupted) with the paid request in flight: never signed
                # again; the row is unknown (a later call of the same key sends it again).
                if state.signed and state.cost is None and not isinstance(exc, X402LabError):
                    assert state.ticket is not None and self.payer is not None
                    self.payer.record_ambiguous(state.ticket, "cancelled while in flight")
                elif state.signed and state.cost is None and isinstance(exc, LimitExceeded):
                    # The paid request's answer broke a bound: whether it settled is unclear.
                    assert state.ticket is not None and self.payer is not None
                    self.payer.record_ambiguous(state.ticket, str(exc))
                _commit_unanswered(state)
                raise
            else:
                if state.pending is not None:
                    await response.aclose()
                    try:
                        response = await self._settle(request, state, stream)
                    except BaseException:
                        _commit_unanswered(state)
                        raise
            status = response.status_code
            if not state.signed and status in self.retry.retry_statuses and attempt < last:
                await response.aclose()
                retry_after = retry_after_of(response.headers)
                paced = call.pacer if status == 429 and call is not None else None
                if paced is not None:  # a batch paces its requests: it says how long
                    await self._sleep(paced.limited(seconds_of(retry_after, time.time())))
                    paced.resending()
                else:
                    await self._sleep(retry_delay(self.retry, attempt, retry_after, time.time()))
                continue
            if expect_402 and status == 402:
                return Reply(response, None, limits=self.http.limits)
            if status >= 400:
                _commit_unanswered(state)  # a settled payment's error answer: nothing to store
                if stream:
                    await response.aread()
                raise error_from_response(response, self.service)
            ticket = state.ticket
            kept = ticket.settlement if ticket and ticket.call.stores_answer else None
            return Reply(response, state.cost, kept, self.http.limits)
        raise AssertionError("unreachable")  # pragma: no cover

    def _lost_after_payment(self, state: CallState, exc: httpx.HTTPError) -> AnswerLost:
        """The error of a paid request whose payment settled and whose answer was then lost
        (its body could not be read); its settlement is committed alone."""
        _commit_unanswered(state)
        ticket, cost = state.ticket, state.cost
        assert ticket is not None and cost is not None
        return AnswerLost(
            f"payment of {cost} (ledger row {ticket.row_id}) settled, and its answer was"
            f" lost while it was read ({type(exc).__name__}: {exc}); it will not be paid"
            " again automatically: ask again to buy a new answer",
            settled=True,
            tx_hash=cost.tx_hash,
            ledger_id=ticket.row_id,
        )

    def _url(self, path: str) -> httpx.URL:
        """The parsed address of ``path`` (parsed once per path, not for every request)."""
        found = self._urls.get(path)
        if found is None:
            found = httpx.URL(f"{self.base_url}{path}")
            if len(self._urls) > 1024:  # RPC networks and job ids make many paths
                self._urls.clear()
            self._urls[path] = found
        return found

    async def _settle(
        self, request: httpx.Request, state: CallState, stream: bool
    ) -> httpx.Response:
        assert self._resender is not None
        return await self._resender.settle(request, state, stream=stream)

    async def probe(self, method: str, path: str, **request_kwargs: Any) -> PaymentRequired:
        """Send a request unpaid and return its 402 challenge; nothing is signed.

        Raises ApiError when the route answers anything but 402 (a bad model is a 400).
        """
        reply = await self.send(method, path, expect_402=True, **request_kwargs)
        response = reply.response
        if response.status_code != 402:
            raise ApiError(
                f"{self.service} {method} {path} answered HTTP {response.status_code}, not a"
                " 402 challenge: it is free or not a paid route",
                status=response.status_code,
                url=str(response.request.url),
            )
        try:
            body = parse_json(response.content, self.http.limits, "402")
        except LimitExceeded:
            raise
        except ValueError:
            body = None
        challenge = read_challenge(response.headers.get("payment-required"), body)
        if self.payer is not None:
            # The same request paid soon after pays this challenge with its first send.
            found = request_id(response.request)
            if found is not None:
                self.payer.prediction.remember_quote(found, challenge)
        return challenge
