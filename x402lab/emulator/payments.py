"""The payment gate both emulated services put in front of their paid routes.

How a service uses it (one gate per service, built once with the app)::

    gate = PaymentGate(settings, chain, service="gateway")
    app = Starlette(routes=..., middleware=gate.middleware())   # latency fault on every request

    async def chat(request):
        ...validate the body, compute the price (400s come before any 402)...
        charge = await gate.charge(request, amount_atomic=price, description="Chat completion",
                                   extensions={"upstreamUsd": ..., "priceMult": ..., "bazaar": ...})
        if charge.response is not None:        # 402, 400, 429 or 503: send it as is
            return charge.response
        return gate.finish(JSONResponse(result), charge)   # adds PAYMENT-RESPONSE

``charge`` applies the 429/5xx faults first, then the rate limits (``emulator.limits``; both
before any payment is verified), then runs the handshake: no payment header gives the 402
challenge; a payment is decoded, verified against the requirements this request would be
challenged with now (locally, or through the facilitator at ``settings.facilitator_url``),
and settled before the handler runs.
``finish`` applies the paid-then-500 fault. ``stats()`` gives the counters for /api/x402/stats.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from x402lab.emulator.chain import NONCE_ALREADY_USED, Chain, ChainRejected
from x402lab.emulator.facilitator import FacilitatorClient
from x402lab.emulator.faults import FaultDice
from x402lab.emulator.limits import RateLimits, limited_response
from x402lab.emulator.settings import EmulatorSettings
from x402lab.errors import ProtocolError
from x402lab.x402.codec import decode_header, encode_header
from x402lab.x402.models import (
    PaymentPayload,
    PaymentRequirements,
    SettlementResponse,
    normalize_challenge,
)
from x402lab.x402.tokens import BASE_USDC, DEFAULT_MAX_TIMEOUT_SECONDS
from x402lab.x402.verify import verify_payment

DEFAULT_HEADER_NAMES = ("payment-signature", "x-402-payment", "x-payment")
PAYMENT_REQUIRED_ERROR = "PAYMENT-SIGNATURE header is required"
TEST_WALLET_MISMATCH = "test_wallet_mismatch"
SETTLE_FAILED = "transaction_failed"


@dataclass(frozen=True)
class Charge:
    """The outcome of ``PaymentGate.charge``.

    ``response`` is set when the request must be answered right away (402, 400, 429, 503);
    otherwise the payment settled and ``settlement``, ``payer`` and ``amount_atomic`` say how.
    """

    response: Response | None = None
    settlement: SettlementResponse | None = None
    payer: str | None = None
    amount_atomic: int = 0

    @property
    def paid(self) -> bool:
        """True when the payment settled."""
        return self.response is None and self.settlement is not None


@dataclass(frozen=True)
class Refusal:
    """A payment refused at ``stage`` "verify" or "settle"; nothing settled.

    ``challenge`` is the fresh challenge (its ``error`` is ``reason``); ``required_atomic`` is
    what this request costs; ``underpaid`` is True when the authorization's value is below it.
    """

    reason: str
    stage: str
    payload: PaymentPayload
    required_atomic: int
    challenge: dict[str, Any]
    settlement: SettlementResponse | None = None

    @property
    def underpaid(self) -> bool:
        return self.payload.authorization.value < self.required_atomic


ChallengeBody = Callable[[dict[str, Any]], dict[str, Any]]
RefusalHandler = Callable[[Refusal], Response | None]


@dataclass
class GateStats:
    """Counters of one gate (integers only; settled_atomic is USDC base units).

    ``requests``: every request that reached a paid route's payment step (unpaid or paid, a
    fault included), so a test can count round trips per call."""

    requests: int = 0
    challenges: int = 0
    verified: int = 0
    refused: int = 0
    settled: int = 0
    settle_failed: int = 0
    settled_atomic: int = 0
    malformed: int = 0
    faults_429: int = 0
    faults_5xx: int = 0
    paid_then_500: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)


class PaymentGate:
    """x402 v2 challenge, verification and settlement for one emulated service."""

    def __init__(
        self,
        settings: EmulatorSettings,
        chain: Chain,
        *,
        service: str,
        header_names: tuple[str, ...] = DEFAULT_HEADER_NAMES,
        accept_overpayment: bool = False,
        required_error: str = PAYMENT_REQUIRED_ERROR,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``accept_overpayment``: an authorization of more than the price is verified
        against the value it moves (the report service's reading); otherwise exact only.
        ``required_error`` is the challenge's ``error`` when no payment was sent."""
        self.settings = settings
        self.chain = chain
        self.service = service
        self.header_names = tuple(name.lower() for name in header_names)
        self.accept_overpayment = accept_overpayment
        self.required_error = required_error
        self._clock = clock
        self._dice = FaultDice(settings.faults, seed=settings.seed, service=service)
        self.limits = RateLimits(settings.rate_limit_rpm, settings.rate_limit_tpm)
        self._lock = threading.Lock()
        self._stats = GateStats()
        # (payer, nonce) of payments settling or settled here: catches concurrent replays and,
        # with a remote facilitator, replays the local chain cannot know about.
        self._claimed: set[tuple[str, str]] = set()
        self._parsed_requirements: dict[tuple[int, str], PaymentRequirements] = {}
        self._facilitator = (
            FacilitatorClient(settings.facilitator_url) if settings.facilitator_url else None
        )

    # -- challenge ---------------------------------------------------------------------------

    def requirements_wire(self, amount_atomic: int) -> dict[str, Any]:
        """The standard v2 ``accepts[]`` entry for ``amount_atomic`` USDC base units."""
        return {
            "scheme": "exact",
            "network": BASE_USDC.network,
            "amount": str(int(amount_atomic)),
            "asset": BASE_USDC.address,
            "payTo": self.settings.pay_to,
            "maxTimeoutSeconds": DEFAULT_MAX_TIMEOUT_SECONDS,
            "extra": {"name": BASE_USDC.name, "version": BASE_USDC.version},
        }

    def challenge(
        self,
        *,
        resource_url: str,
        description: str,
        amount_atomic: int,
        extensions: Mapping[str, Any] | None = None,
        error: str | None = None,
        mime_type: str = "application/json",
    ) -> dict[str, Any]:
        """The PaymentRequired wire dict (docs/services.md, "Payment challenge")."""
        parts = urlsplit(resource_url)
        return {
            "x402Version": 2,
            "error": self.required_error if error is None else error,
            "resource": {
                "url": resource_url,
                "description": description,
                "mimeType": mime_type,
                "serviceName": f"x402lab {self.service}"[:32],
                "iconUrl": f"{parts.scheme or 'http'}://{parts.netloc}/favicon.ico",
            },
            "accepts": [self.requirements_wire(amount_atomic)],
            "extensions": dict(extensions or {}),
        }

    def challenge_response(
        self, challenge: dict[str, Any], challenge_body: ChallengeBody | None = None
    ) -> Response:
        """402 with the challenge in Payment-Required and ``challenge_body(challenge)`` as body."""
        body = challenge_body(challenge) if challenge_body else challenge
        return JSONResponse(
            body,
            status_code=402,
            headers={"Payment-Required": encode_header(challenge), "Cache-Control": "no-store"},
        )

    # -- faults ------------------------------------------------------------------------------

    def request_fault(self) -> Response | None:
        """A 429 or 503 answer when a fault fires for this request, else None. Settles nothing."""
        fired = self._dice.request_fault()
        if fired is None:
            return None
        counter, response = fired
        self._count(counter)
        return response

    def middleware(self) -> list[Middleware]:
        """Starlette middleware adding ``faults.latency_s`` before every answer."""
        return self._dice.middleware()

    def release_answers(self) -> None:
        """End the delay faults (``latency_s``, ``paid_latency_s``, ``answer_delay_s``): what
        they hold goes at once, and later answers are not held."""
        self._dice.hold.release()

    # -- the handshake -----------------------------------------------------------------------

    def _payment_header(self, request: Request) -> str | None:
        for name in self.header_names:
            value = request.headers.get(name)
            if value is not None:
                return value
        return None

    async def charge(
        self,
        request: Request,
        *,
        amount_atomic: int,
        description: str,
        extensions: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
        challenge_body: ChallengeBody | None = None,
        on_refused: RefusalHandler | None = None,
        tokens: int = 0,
    ) -> Charge:
        """Spends the payer's money: challenge, verify and settle ``amount_atomic``.

        Returns a Charge whose ``response`` is the answer to send (429/503 fault, 402
        challenge or refusal, 400 malformed payment), or a settled Charge. ``extensions`` (or
        a function building them, called only when a challenge is sent) go into challenges.
        ``on_refused`` may answer a refusal its own way (return None for the default 402).
        ``tokens``: what the request counts against a tokens-per-minute limit.
        Never raises for bad client input.
        """
        self._count("requests")
        fault = self.request_fault()
        if fault is not None:
            return Charge(response=fault)
        header = self._payment_header(request)
        if self.limits.active:
            wait = self.limits.admit(self._limit_key(request, header), tokens)
            if wait is not None:
                return Charge(response=limited_response(wait))
        resource_url = str(request.url)

        def fresh(error: str | None = None) -> dict[str, Any]:
            return self.challenge(
                resource_url=resource_url,
                description=description,
                amount_atomic=amount_atomic,
                extensions=extensions() if callable(extensions) else extensions,
                error=error,
            )

        if header is None:
            self._count("challenges")
            return Charge(response=self.challenge_response(fresh(), challenge_body))
        try:
            raw_payload = decode_header(header)
            payload = PaymentPayload.from_wire(raw_payload, owned=True)
        except ProtocolError as exc:
            self._count("malformed")
            return Charge(
                response=JSONResponse(
                    {"error": "invalid_payload", "message": f"malformed payment header: {exc}"},
                    status_code=400,
                )
            )
        if self.accept_overpayment:
            raw_payload, payload = _as_paid(raw_payload, payload, amount_atomic)
        body_entry = challenge_body(fresh())["accepts"][0] if challenge_body else None
        requirements = self._requirements_for(payload, amount_atomic, body_entry)

        def refuse(reason: str, stage: str, receipt: SettlementResponse | None = None) -> Charge:
            self._count("refused" if stage == "verify" else "settle_failed", reason)
            refusal = Refusal(reason, stage, payload, amount_atomic, fresh(reason), receipt)
            response = on_refused(refusal) if on_refused else None
            if response is None:
                response = self.challenge_response(refusal.challenge, challenge_body)
            if receipt is not None:
                response.headers["PAYMENT-RESPONSE"] = encode_header(receipt.to_wire())
            return Charge(response=response)

        reason, payer = await self._verify(raw_payload, payload, requirements)
        if reason is not None:
            return refuse(reason, "verify")
        key = (payload.authorization.from_address.lower(), payload.authorization.nonce.lower())
        with self._lock:
            if key in self._claimed:
                reason = NONCE_ALREADY_USED
            else:
                self._claimed.add(key)
        if reason is not None:
            return refuse(reason, "verify")
        self._count("verified")
        receipt = await self._settle(raw_payload, payload, requirements, payer)
        if not receipt.success:
            with self._lock:
                self._claimed.discard(key)
            return refuse(receipt.error_reason or SETTLE_FAILED, "settle", receipt)
        value = payload.authorization.value
        self._count("settled")
        with self._lock:
            self._stats.settled_atomic += value
        if self.settings.faults.paid_latency_s > 0:
            await self._dice.hold.wait(self.settings.faults.paid_latency_s)
        return Charge(settlement=receipt, payer=payer, amount_atomic=value)

    def _limit_key(self, request: Request, header: str | None) -> str:
        """Whose buckets a request draws on: the payment's ``from`` address when it carries
        a readable one (nothing is verified here), else the client's address."""
        if header is not None:
            try:
                payer = decode_header(header)["payload"]["authorization"]["from"]
            except (ProtocolError, LookupError, TypeError):
                payer = None
            if isinstance(payer, str):
                return payer.lower()
        return request.client.host if request.client else "unknown"

    def _requirements_for(
        self, payload: PaymentPayload, amount_atomic: int, body_entry: Mapping[str, Any] | None
    ) -> PaymentRequirements:
        """The requirements to verify ``payload`` against: this request's price, or the value
        the authorization moves when overpayment is accepted and it moves more; in the 402
        body's form when the payment echoes that entry."""
        if self.accept_overpayment and payload.authorization.value > amount_atomic:
            amount_atomic = payload.authorization.value
        if body_entry is not None and "scheme" not in payload.accepted:
            # A client that paid from a body without the standard fields echoes that entry;
            # normalize_challenge records which fields it lacked, and verify allows for them.
            entry = {**body_entry, "amount": str(int(amount_atomic))}
            try:
                return normalize_challenge({"x402Version": 2, "accepts": [entry]}).accepts[0]
            except ProtocolError:
                pass
        # Parsed once per price and payee: every call of a price class pays the same.
        key = (amount_atomic, self.settings.pay_to)
        found = self._parsed_requirements.get(key)
        if found is None:
            if len(self._parsed_requirements) >= 4096:
                self._parsed_requirements.clear()
            wire = self.requirements_wire(amount_atomic)
            found = self._parsed_requirements[key] = PaymentRequirements.from_wire(wire)
        return found

    async def _verify(
        self, raw: dict[str, Any], payload: PaymentPayload, requirements: PaymentRequirements
    ) -> tuple[str | None, str]:
        """(reason or None, payer) for this payment, without settling anything."""
        payer = payload.authorization.from_address
        if self._facilitator is not None:
            reason, payer = await self._facilitator.verify(raw, requirements, payer)
            if reason is not None:
                return reason, payer
        else:
            result = verify_payment(payload, requirements, now=int(self._clock()))
            payer = result.payer or payer
            if not result.is_valid:
                return result.invalid_reason or "invalid_payload", payer
        wallet = self.settings.test_wallet
        if self.settings.test_mode and wallet and payer.lower() != wallet.lower():
            return TEST_WALLET_MISMATCH, payer
        if self._facilitator is None:
            reason = self.chain.check(payload)
            if reason is not None:
                return reason, payer
        return None, payer

    async def _settle(
        self,
        raw: dict[str, Any],
        payload: PaymentPayload,
        requirements: PaymentRequirements,
        payer: str,
    ) -> SettlementResponse:
        """The settlement receipt (``success`` False when nothing moved)."""
        network = requirements.network
        if self._dice.fires(self.settings.faults.settle_fail_rate):
            return SettlementResponse(False, "", network, payer=payer, error_reason=SETTLE_FAILED)
        if self._facilitator is not None:
            return await self._facilitator.settle(raw, requirements, payer)
        try:
            tx_hash = self.chain.transfer_with_authorization(payload, requirements)
        except ChainRejected as exc:
            return SettlementResponse(False, "", network, payer=payer, error_reason=exc.reason)
        return SettlementResponse(
            True, tx_hash, network, payer=payer, amount=payload.authorization.value
        )

    # -- after the handler -------------------------------------------------------------------

    def finish(self, response: Response, charge: Charge) -> Response:
        """``response`` with the PAYMENT-RESPONSE receipt, or 500 if paid-then-500 fires.

        A charge that did not settle returns its own response unchanged.
        """
        if charge.response is not None:
            return charge.response
        if charge.settlement is None:
            return response
        if self._dice.fires(self.settings.faults.paid_then_500_rate):
            self._count("paid_then_500")
            # Settled but no body and no receipt: the client cannot tell what happened.
            return Response(status_code=500)
        response.headers["PAYMENT-RESPONSE"] = encode_header(charge.settlement.to_wire())
        response.headers["Cache-Control"] = "private, no-store"
        return response

    # -- counters ----------------------------------------------------------------------------

    def _count(self, name: str, reason: str | None = None) -> None:
        with self._lock:
            setattr(self._stats, name, getattr(self._stats, name) + 1)
            if reason is not None:
                self._stats.by_reason[reason] = self._stats.by_reason.get(reason, 0) + 1

    def stats(self) -> dict[str, Any]:
        """A snapshot of the counters (challenges, verified, refused, settled, ...)."""
        with self._lock:
            snapshot = replace(self._stats, by_reason=dict(self._stats.by_reason))
        return {
            "requests": snapshot.requests,
            "challenges": snapshot.challenges,
            "verified": snapshot.verified,
            "refused": snapshot.refused,
            "settled": snapshot.settled,
            "settleFailed": snapshot.settle_failed,
            "settledAtomic": snapshot.settled_atomic,
            "malformed": snapshot.malformed,
            "faults": {
                "rateLimited": snapshot.faults_429,
                "unavailable": snapshot.faults_5xx,
                "paidThen500": snapshot.paid_then_500,
            },
            "refusedByReason": snapshot.by_reason,
        }


def _as_paid(
    raw: dict[str, Any], payload: PaymentPayload, required_atomic: int
) -> tuple[dict[str, Any], PaymentPayload]:
    """An overpayment read as what it pays: when the authorization moves more than the price
    and ``accepted`` echoes the challenge's amount, that amount is read as the value moved.
    ``accepted`` is not signed, so nothing the payer signed changes; the authorization's
    value is what settles."""
    value = payload.authorization.value
    if value <= required_atomic or payload.accepted.get("amount") != str(required_atomic):
        return raw, payload
    accepted = {**payload.accepted, "amount": str(value)}
    return {**raw, "accepted": accepted}, replace(payload, accepted=accepted)
