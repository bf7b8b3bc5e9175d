"""The 402 handshake, written once as an ``httpx.Auth`` flow that sync and async clients drive.

unpaid request → 402 → checks → reservation → signature → write-ahead ledger row → the same
request again with the payment header → receipt → ledger. The flow never signs twice.

An answer to the paid request that says nothing clear (a 5xx or 429 after the payment header
left, no answer at all) is ambiguous. Driven by a ``ServiceClient`` (``resend=True``), the flow
leaves it to the client, which sends the *same* request with the *same* signed payload again
(its nonce settles at most once) while the authorization is valid. Driven by a bare httpx
client, it records the row ``unknown`` itself: it cannot wait between sends.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass
from typing import Any

import httpx

from x402lab.errors import ProtocolError
from x402lab.payments import CallInfo, Cost, Kind, Outcome, Payer, Ticket, read_challenge


@dataclass
class CallState:
    """What happened during one call: the signed ticket, if any, its cost, and (when the
    client sends it again) the ambiguous outcome it left open."""

    ticket: Ticket | None = None
    cost: Cost | None = None
    pending: Outcome | None = None
    resend: bool = False

    @property
    def signed(self) -> bool:
        return self.ticket is not None


def json_or_none(response: httpx.Response) -> Any:
    try:
        return json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        return None


def outcome_of(payer: Payer, response: httpx.Response) -> Outcome:
    """What the answer to a paid request says about its payment (its body is read only
    when it is not a success)."""
    status = response.status_code
    return payer.outcome(
        status,
        response.headers.get("payment-response"),
        json_or_none(response) if status >= 300 else None,
        response.headers.get("retry-after"),
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

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        response = yield request
        if response.status_code != 402:
            return
        header = response.headers.get("payment-required")
        # The body is read only when the header is missing (the report service's shape).
        body = None if header else json_or_none(response)
        try:
            challenge = read_challenge(header, body)
        except ProtocolError as exc:
            self.payer.refuse(self.call, f"unreadable challenge: {exc}")
            raise
        ticket = self.payer.prepare(challenge, self.call)
        self.state.ticket = ticket
        request.headers[self.header_name] = ticket.header_value
        try:
            response = yield request
        except GeneratorExit:
            if not self.state.resend:
                self.payer.record_ambiguous(ticket, "the paid request got no answer")
            raise
        outcome = outcome_of(self.payer, response)
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
        flow = self.auth_flow(request)
        try:
            request = next(flow)
            while True:
                response = yield request
                if response.status_code >= 300:
                    await response.aread()
                try:
                    request = flow.send(response)
                except StopIteration:
                    return
        finally:
            flow.close()
