"""The 402 handshake, written once as an ``httpx.Auth`` flow that sync and async clients drive.

unpaid request → 402 → checks → reservation → signature → write-ahead ledger row → the same
request again with the payment header → receipt → ledger. The flow never signs twice.

An answer to the paid request that says nothing clear (a 5xx or 429 after the payment header
left, no answer at all) is ambiguous. Driven by a ``ServiceClient`` (``resend=True``), the flow
leaves it to the client, which sends the *same* request with the *same* signed payload again
(its nonce settles at most once) while the authorization is valid. Driven by a bare httpx
client, it records the row ``unknown`` itself: it cannot wait between sends.

The receipt's settlement is committed by the payer, or, when the call stores its answer
(``CallInfo.stores_answer``), left uncommitted on the ticket for the caller to commit with
that answer (``Ticket.settlement``; ``ServiceClient`` hands it over on the ``Reply``).

When the challenge can be predicted (``payments.prediction``: a fresh probe of this exact
request, or a confirmed price class) the payment goes with the *first* request: one round
trip. A 402 to that prepaid request is a refusal (the prediction was stale): its row is
``rejected`` (``prepay_refused``, held until the chain resolves it), and the fresh challenge of that
402 is paid only if the budget has room for both (the server keeps the refused authorization
and could still settle it; money rule 4): at most one extra signature, never more than the
budget in valid authorizations.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass
from typing import Any

import httpx

from x402lab.errors import BudgetExceeded, LimitExceeded, ProtocolError
from x402lab.money import format_usd
from x402lab.payments import CallInfo, Cost, Kind, Outcome, Payer, Ticket, read_challenge
from x402lab.payments.payer import is_prepay_refusal
from x402lab.payments.prediction import Predicted, fingerprint
from x402lab.transport import turn
from x402lab.transport.limits import parse_json
from x402lab.transport.retry import retry_after_of


@dataclass
class CallState:
    """What happened during one call: the signed ticket, if any, its cost, and (when the
    client sends it again) the ambiguous outcome it left open."""

    ticket: Ticket | None = None
    cost: Cost | None = None
    pending: Outcome | None = None
    resend: bool = False
    #: The prediction the first request was paid with (``ticket.prepaid``), forgotten when
    #: a re-send of that payload gets a 402.
    predicted: Predicted | None = None

    @property
    def signed(self) -> bool:
        return self.ticket is not None


def json_or_none(response: httpx.Response) -> Any:
    """The body as JSON, or None when it is not JSON; LimitExceeded when it nests too deeply
    (a 402 breaking a bound is refused before anything is signed)."""
    try:
        return parse_json(response.content, what=f"HTTP {response.status_code} answer")
    except LimitExceeded:
        raise
    except (ValueError, UnicodeDecodeError):
        return None


def request_id(request: httpx.Request) -> bytes | None:
    """The ``prediction.fingerprint`` of ``request`` (None while its body is a stream)."""
    try:
        content = request.content
    except httpx.RequestNotRead:
        return None
    return fingerprint(request.method, str(request.url), content)


def outcome_of(payer: Payer, response: httpx.Response) -> Outcome:
    """What the answer to a paid request says about its payment (its body is read only
    when it is not a success)."""
    status = response.status_code
    return payer.outcome(
        status,
        response.headers.get("payment-response"),
        json_or_none(response) if status >= 300 else None,
        retry_after_of(response.headers),
    )


class PaymentAuth(httpx.Auth):
    """Pays a 402 challenge once for one logical request.

    ``state.resend``: the driver sends ambiguous outcomes again itself (``ServiceClient``);
    the flow then leaves them open in ``state.pending`` (or, with no answer at all, as the
    exception the driver sees) instead of recording them ``unknown``.
    """

    def __init__(self, payer: Payer, call: CallInfo, header_name: str, state: CallState) -> None:
        self.payer = payer
        self.call = call
        self.header_name = header_name
        self.state = state
        # Set by the async driver: signed rows are committed without their own fsync and the
        # driver waits for one shared fsync (``ledger.write_ahead``) before each paid send.
        self._grouped = False

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        payer, call = self.payer, self.call
        predicted = payer.prediction.predict(call, lambda: request_id(request))
        ticket = self._prepay(request, predicted) if predicted is not None else None
        response = yield from self._send(request, ticket)
        if ticket is not None:
            assert predicted is not None
            outcome = outcome_of(payer, response)
            # A resumed payload (an earlier, unclear payment of this request) is never
            # followed by a new signature: only a refused *prediction* is paid afresh.
            if not (ticket.prepaid and is_prepay_refusal(outcome)):
                if outcome.kind is Kind.SETTLED:
                    payer.prediction.hit(predicted, call.prepay_tally)
                self._conclude(ticket, outcome)
                return
            # A stale prediction: refused, nothing settled. Pay the 402's fresh challenge.
            payer.record_prepay_refused(ticket, outcome)
            payer.prediction.missed(predicted, call.prepay_tally)
            self.state.ticket = None
        elif response.status_code != 402:
            return
        header = response.headers.get("payment-required")
        # The body is read only when the header is missing (the report service's shape).
        body = None if header else json_or_none(response)
        try:
            challenge = read_challenge(header, body)
        except ProtocolError as exc:
            payer.refuse(call, f"unreadable challenge: {exc}")
            raise
        payer.prediction.observe(call, challenge)
        try:
            fresh = payer.prepare(challenge, call, durable=not self._grouped)
        except BudgetExceeded as exc:
            if ticket is None:
                raise
            # The refused prepayment still counts: the server holds it and could settle it.
            raise BudgetExceeded(
                f"{exc.reason}; the server refused this request's payment sent with it (ledger"
                f" row {ticket.row_id}, {format_usd(ticket.amount_atomic)}) and asked again,"
                " and that refused authorization stays held (it could still settle) until the"
                " chain shows it unused past its window, so the fresh challenge was not signed",
                **exc.details,
            ) from None
        if ticket is not None:
            payer.prediction.extra_signature(call.prepay_tally)
        self.state.ticket = fresh
        request.headers[self.header_name] = fresh.header_value
        response = yield from self._send(request, fresh)
        self._conclude(fresh, outcome_of(payer, response))

    def _prepay(self, request: httpx.Request, predicted: Predicted) -> Ticket:
        """Sign ``predicted``'s challenge for the first request (checked and written ahead
        like any other; a refusal raises here and nothing is sent)."""
        ticket = self.payer.prepare(
            predicted.challenge, self.call, prepaid=True, durable=not self._grouped
        )
        if ticket.resumed:
            ticket.prepaid = False  # an earlier payment's own payload, sent again
        else:
            self.payer.prediction.sent(self.call.prepay_tally)
            self.state.predicted = predicted
        self.state.ticket = ticket
        request.headers[self.header_name] = ticket.header_value
        return ticket

    def _send(
        self, request: httpx.Request, ticket: Ticket | None
    ) -> Generator[httpx.Request, httpx.Response, httpx.Response]:
        """Send ``request``; with ``ticket`` (paid), an unanswered send is recorded unknown
        unless the driver sends it again itself."""
        try:
            return (yield request)
        except GeneratorExit:
            if ticket is not None and not self.state.resend:
                self.payer.record_ambiguous(ticket, "the paid request got no answer")
            raise

    def _conclude(self, ticket: Ticket, outcome: Outcome) -> None:
        if self.state.resend and outcome.kind in (Kind.RESEND, Kind.NONCE_USED):
            self.state.pending = outcome  # the client sends it again, or asks the chain
            return
        self.state.cost = self.payer.record(ticket, outcome)

    # httpx's default drivers read every body when requires_response_body is set, which would
    # buffer streamed chat answers; these read a body only when it is not a success, and they
    # close the flow on every exit so an unanswered paid request is always recorded.

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        flow = self.auth_flow(request)
        try:
            request = next(flow)
            while True:
                response = yield request
                if response.status_code >= 300:
                    response.read()
                try:
                    request = flow.send(response)
                except StopIteration:
                    return
        finally:
            flow.close()

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        self._grouped = True
        flow = self.auth_flow(request)
        try:
            request = next(flow)
            while True:
                await self._written_ahead()
                response = yield request
                if response.status_code >= 300:
                    await response.aread()
                try:
                    request = flow.send(response)
                except StopIteration:
                    return
        finally:
            flow.close()

    async def _written_ahead(self) -> None:
        """Invariant 3: the request about to leave carries a payment whose row is on disk
        (one fsync shared with the other tasks' rows signed meanwhile)."""
        ticket = self.state.ticket
        if ticket is not None and not ticket.durable:
            # A request holding a batch's send turn is the only one that could join an fsync
            # now: on a fast disk it syncs at once instead of an iteration later; a slow
            # disk's fsync is shared, and the turn goes on meanwhile (``transport.turn``).
            write_ahead = self.payer.ledger.write_ahead
            at_once = turn.holding(self.call.turn) and write_ahead.inline
            if not at_once:
                turn.hand_on(self.call.turn)
            await write_ahead.durable(at_once=at_once)
            ticket.durable = True
