"""The rehearsal's transport: free requests go to the target, paid ones are priced there and
answered elsewhere.

It sits under the lab's one HTTP client (``connect(http_client=...)``), below the 402
handshake, so every request of every resource (single calls, batches, media queues, report
purchases, the openai-python clients) passes here unchanged in shape:

- an unpaid request goes to the target service as it is: its catalog, price list, quote
  routes, report menus and 402 challenges are the target's own, so the lab checks and signs
  the target's exact price (with a throwaway wallet; the signature never leaves);
- a paid request (a payment header: the lab accepted the target's challenge) is recorded at
  the amount it signed (``records.PricedCall``), and is answered by the rehearsal's local
  emulator, paid there with the rehearsal's own throwaway wallet, so the cells that follow run
  on plausible answers;
- an unpaid request about something the emulator issued (a media job's ``queue_id``) goes
  to the emulator too.

Nothing is sent to the target with a payment header, so the target's chain moves nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from x402lab._loop import in_helper_thread, run
from x402lab.errors import ConfigError
from x402lab.payments import read_challenge
from x402lab.planning.answers import Answers, Source, body_text
from x402lab.planning.lines import paying_line
from x402lab.planning.records import PricedCall, Recorder
from x402lab.routes import CHAT, GATEWAY, PAYMENT_HEADER, REPORTS
from x402lab.wallet import Wallet
from x402lab.x402.codec import decode_header, encode_header
from x402lab.x402.headers import PaymentHeaders
from x402lab.x402.models import PaymentPayload, PaymentRequirements
from x402lab.x402.signing import new_nonce, sign_payment

#: Every header a payment may travel in (either service; the wire is case-insensitive).
PAYMENT_HEADERS = ("payment-signature", "x-402-payment", "x-payment")
#: The words a typed batch adds to the system message of a request asking rows again
#: (``x402lab.batch.kinds._typed_codec.AskAgain``): such a request exists because of answers.
ASKED_AGAIN = "(Asked again, round "
#: The gateway's documented token estimate is ceil(characters / 4): an answer of N tokens is
#: at most about 4 N characters, what a bound pads a request with.
CHARS_PER_TOKEN = 4
# The order of paid requests in this kernel, over every rehearsed lab (an answer of one lab
# may be quoted by a request of another).
_SEQUENCE = itertools.count(1)
#: How long a retrieve of a rehearsed job may wait on the emulator for the job to end.
FOLLOW_WAIT_S = 5.0
_DROPPED = {"host", "content-length", *PAYMENT_HEADERS}


def _json(content: bytes) -> Any:
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return None


def _max_tokens(body: Any) -> int | None:
    if not isinstance(body, Mapping):
        return None
    for name in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _reasked(path: str, body: Any) -> bool:
    if not path.endswith(CHAT) or not isinstance(body, Mapping):
        return False
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], Mapping):
        return False
    content = messages[0].get("content")
    return isinstance(content, str) and ASKED_AGAIN in content


def _read(response: httpx.Response) -> list[tuple[str, str]]:
    """The headers of ``response`` for a copy holding its body decoded and whole."""
    return [
        (k, v)
        for k, v in response.headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]


def _receipt_as_signed(response: httpx.Response, signed: PaymentPayload) -> None:
    """The answerer's receipt told as the lab's own: the answerer was paid by the rehearsal's
    wallet at its own price, so its receipt names that payer and amount; the lab checks a
    receipt against what it signed (payer, network, amount), so it is given what it signed,
    with the answerer's transaction."""
    found = response.headers.get("payment-response")
    if not found:
        return
    receipt = decode_header(found)
    receipt["payer"] = signed.authorization.from_address
    if "network" in signed.accepted:
        receipt["network"] = signed.accepted["network"]
    if "amount" in receipt:
        receipt["amount"] = str(signed.authorization.value)
    response.headers["payment-response"] = encode_header(receipt)


class RehearsalClient(httpx.AsyncClient):
    """The rehearsing lab's HTTP client. ``shared_transport``: the transport the clients the
    lab hands to other libraries send through too (``Session.http_options``), so their paid
    requests are priced and answered like the lab's own."""

    def __init__(self, transport: RehearsalTransport, **options: Any) -> None:
        super().__init__(transport=transport, **options)
        self.shared_transport = transport


class RehearsalTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Routes a rehearsing lab's requests (see the module docstring).

    ``targets``: each service's base URL as the notebook gave it; ``answerer``: the same
    services on the rehearsal's emulator (None: the target is itself an emulator started for
    this rehearsal, which answers its own paid requests); ``wallet``: pays the answerer;
    ``inner``: makes the HTTP client that really sends (one per event loop: the lab's loop,
    and the loop of an async client handed to another library); ``lab``: the rehearsed
    lab's number (``Connected.lab``), written with each priced request. A sync client
    (``httpx.Client`` handed to openai-python) is served on x402lab's helper loop, its answers
    read whole.
    """

    def __init__(
        self,
        *,
        targets: Mapping[str, str],
        answerer: Mapping[str, str] | None,
        recorder: Recorder,
        wallet: Wallet,
        inner: Callable[[], httpx.AsyncClient] = httpx.AsyncClient,
        lab: int = 0,
    ) -> None:
        self._lab = lab
        self._targets = {name: url.rstrip("/") for name, url in targets.items()}
        self._answerer = {n: u.rstrip("/") for n, u in answerer.items()} if answerer else None
        self._recorder = recorder
        self._wallet = wallet
        self._make_inner = inner
        self._inners: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]
        self._inners = weakref.WeakKeyDictionary()
        self._answers = Answers()
        self._issued: set[str] = set()  # queue ids the answerer issued
        self._headers = PaymentHeaders()
        # The nonce of each payment already priced: the lab sends a payload again after an
        # unclear answer (never signing anew), and that is still one paid request.
        self._priced: set[str] = set()

    def _client(self) -> httpx.AsyncClient:
        """The sending client of the running event loop."""
        loop = asyncio.get_running_loop()
        found = self._inners.get(loop)
        if found is None:
            found = self._inners[loop] = self._make_inner()
        return found

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if in_helper_thread():
            raise RuntimeError("a sync client cannot send from x402lab's helper loop")
        request.read()
        return run(self._whole(request))

    async def _whole(self, request: httpx.Request) -> httpx.Response:
        response = await self.handle_async_request(request)
        try:
            content = await response.aread()
        finally:
            await response.aclose()
        return httpx.Response(
            response.status_code, headers=_read(response), content=content, request=request
        )

    # -- routing ---------------------------------------------------------------------------

    def _service(self, url: httpx.URL) -> tuple[str, str] | None:
        """The service ``url`` belongs to and its path below the service's base URL."""
        text = str(url)
        for name, base in self._targets.items():
            if text == base or text.startswith((base + "/", base + "?")):
                return name, text[len(base) :]
        return None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        payment = next((request.headers[h] for h in PAYMENT_HEADERS if h in request.headers), None)
        found = self._service(request.url)
        if found is None and payment is not None and self._answerer is None:
            # The embedded default: the target is the rehearsal's own emulator.
            found = (REPORTS if "x-402-payment" in request.headers else GATEWAY), ""
        if found is None and payment is not None:
            # A payment never leaves for a service the rehearsal does not answer.
            raise ConfigError(
                f"rehearsal: a paid request to {request.url.host}, which is not one of the"
                " services the notebook connected to, is not sent"
            )
        if found is None:  # the chain's JSON-RPC, a media download: as they are
            return await self._client().send(request, stream=True)
        service, tail = found
        content = await request.aread()
        if payment is None:
            if self._answerer is not None and self._issued and self._about_issued(request, content):
                return await self._follow(request, service, tail, content)
            return await self._client().send(request, stream=True)
        return await self._paid(request, service, tail, content, payment)

    def _about_issued(self, request: httpx.Request, content: bytes) -> bool:
        text = f"{request.url.query.decode()}\x00{body_text(content)}"
        return any(queue_id in text for queue_id in self._issued)

    async def _follow(
        self, request: httpx.Request, service: str, tail: str, content: bytes
    ) -> httpx.Response:
        """A free request about a rehearsed job, answered by the emulator. A retrieve waits
        there until the job ends (a rehearsed job takes a fraction of a second), so the
        notebook does not sleep a real job's poll interval for it."""
        deadline = time.monotonic() + FOLLOW_WAIT_S
        while True:
            response = await self._answer(request, service, tail, content)
            if not tail.split("?")[0].endswith("/retrieve") or time.monotonic() > deadline:
                return response
            if "json" not in response.headers.get("content-type", ""):
                return response
            await response.aread()
            state = _json(response.content)
            running = isinstance(state, Mapping) and str(state.get("status", "")).upper() in (
                "PROCESSING",
                "QUEUED",
            )
            if not running:
                return response
            await asyncio.sleep(0.05)

    # -- a paid request: priced, answered elsewhere ----------------------------------------

    async def _paid(
        self, request: httpx.Request, service: str, tail: str, content: bytes, payment: str
    ) -> httpx.Response:
        signed = PaymentPayload.from_wire(decode_header(payment))
        amount = PaymentRequirements.from_wire(signed.accepted).amount
        nonce = signed.authorization.nonce
        again = nonce in self._priced
        self._priced.add(nonce)
        path = request.url.path
        body = _json(content)
        text = body_text(content)
        sources = self._answers.found_in(text)
        seq = next(_SEQUENCE)
        line = paying_line()  # before anything awaits: the cell is still on that line
        high = await self._bound(request, content, body, sources) if sources else None
        if self._answerer is None:
            response = await self._client().send(request, stream=True)
        else:
            response = await self._answer(request, service, tail, content)
        refused = None
        if response.status_code >= 300:
            await response.aread()
            refused = f"HTTP {response.status_code}: {response.text[:200]}"
        if not again:
            self._recorder.write(
                PricedCall(
                    seq=seq,
                    service=service,
                    method=request.method,
                    path=path,
                    amount_atomic=amount,
                    depends_on=sorted({s.call for s in sources.values()}),
                    reasked=_reasked(path, body),
                    high_atomic=high,
                    refused=refused,
                    lab=self._lab,
                    line=line,
                )
            )
        if refused is None:
            if self._answerer is not None:
                _receipt_as_signed(response, signed)
            response = await self._remember(response, text, Source(seq, _max_tokens(body)))
        return response

    async def _answer(
        self, request: httpx.Request, service: str, tail: str, content: bytes
    ) -> httpx.Response:
        """``request`` answered by the rehearsal's emulator, paid there when it asks."""
        assert self._answerer is not None
        url = self._answerer[service] + tail
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}
        first = await self._client().request(request.method, url, headers=headers, content=content)
        if first.status_code != 402:
            return first
        challenge = read_challenge(first.headers.get("payment-required"), _json(first.content))
        requirements = challenge.accepts[0]
        payload = sign_payment(
            challenge, requirements, self._wallet.signer, now=int(time.time()), nonce=new_nonce()
        )
        header = self._headers.encode(payload, challenge, requirements)
        paid = self._client().build_request(
            request.method,
            url,
            headers={**headers, PAYMENT_HEADER.get(service, PAYMENT_HEADER[GATEWAY]): header},
            content=content,
        )
        return await self._client().send(paid, stream=True)

    async def _remember(
        self, response: httpx.Response, asked: str, source: Source
    ) -> httpx.Response:
        """Keep the pieces of a JSON answer (and the queue ids it issued); a streamed or
        binary answer goes through untouched."""
        kind = response.headers.get("content-type", "")
        if "json" not in kind:
            return response
        content = await response.aread()
        answer = _json(content)
        if isinstance(answer, Mapping) and isinstance(answer.get("queue_id"), str):
            self._issued.add(answer["queue_id"])
        self._answers.add(answer, asked, source)
        return httpx.Response(
            response.status_code, headers=_read(response), content=content, request=response.request
        )

    async def _bound(
        self,
        request: httpx.Request,
        content: bytes,
        body: Any,
        sources: Mapping[str, Source],
    ) -> int | None:
        """The target's price of this chat request with each earlier answer it quotes at its
        longest (its request's ``max_tokens``), or None when no bound is known (another
        route, or an answer whose length was not capped). Free: an unpaid request."""
        if not request.url.path.endswith(CHAT) or not isinstance(body, Mapping):
            return None
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return None
        text = body_text(content)
        extra = 0
        by_call: dict[int, tuple[int | None, int]] = {}
        for piece, source in sources.items():
            times = text.count(piece)
            known = by_call.get(source.call, (source.max_tokens, 0))
            by_call[source.call] = (source.max_tokens, max(known[1], times))
        for max_tokens, times in by_call.values():
            if max_tokens is None:
                return None
            extra += times * max_tokens * CHARS_PER_TOKEN
        last = dict(messages[-1]) if isinstance(messages[-1], Mapping) else None
        if last is None or not isinstance(last.get("content"), str):
            return None
        last["content"] = f"{last['content']} {'x' * extra}"
        padded = {**body, "messages": [*messages[:-1], last]}
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}
        headers["content-type"] = "application/json"
        answer = await self._client().request(
            "POST", str(request.url), headers=headers, content=json.dumps(padded).encode()
        )
        if answer.status_code != 402:
            return None
        challenge = read_challenge(answer.headers.get("payment-required"), _json(answer.content))
        return challenge.accepts[0].amount
