"""The 402 handshake, written once as an ``httpx.Auth`` flow that sync and async clients drive.

unpaid request → 402 → checks → reservation → signature → write-ahead ledger row → the same
request again with the payment header → receipt → ledger. The paid phase never signs twice:
if the paid request gets no answer (timeout, dropped connection, cancellation), httpx closes
the flow and the row becomes ``unknown``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass
from typing import Any

import httpx

from x402lab.errors import ProtocolError
from x402lab.payments import CallInfo, Cost, Payer, Ticket, read_challenge


@dataclass
class CallState:
    """What happened during one call: the signed ticket, if any, and its cost."""

    ticket: Ticket | None = None
    cost: Cost | None = None

    @property
    def signed(self) -> bool:
        return self.ticket is not None


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        return None


class PaymentAuth(httpx.Auth):
    """Pays a 402 challenge once for one logical request."""

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
        body = None if header else _json_or_none(response)
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
            self.payer.record_ambiguous(ticket, "the paid request got no answer")
            raise
        self.state.cost = self.payer.conclude(
            ticket,
            response.status_code,
            response.headers.get("payment-response"),
            _json_or_none(response) if response.status_code >= 300 else None,
        )

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
