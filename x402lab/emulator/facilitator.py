"""Facilitators: the client the payment gate uses, and a small local stand-in to test it.

``FacilitatorClient`` posts to ``{url}/verify`` and ``{url}/settle`` (wire shapes:
docs/services.md, "Facilitator verify and settle"). The stand-in (``/verify``, ``/settle``,
``/supported``) verifies with ``x402lab.x402.verify`` and settles on a Chain, answering like
the SDK's facilitator: a refused payment is a 200 with ``isValid: false`` or ``success:
false``; only a malformed request body is a 400. Point an emulator at it with
``EmulatorSettings(facilitator_url=running.url)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from x402lab.emulator.chain import SETTLER_ADDRESS, Chain, ChainRejected
from x402lab.emulator.serving import BackgroundServers
from x402lab.errors import ProtocolError
from x402lab.x402.models import PaymentPayload, PaymentRequirements, SettlementResponse
from x402lab.x402.verify import INVALID_PAYMENT_REQUIREMENTS, VerifyResult, verify_payment

VERIFY_UNAVAILABLE = "unexpected_verify_error"
SETTLE_UNAVAILABLE = "unexpected_settle_error"
_TIMEOUT_S = 10.0

# The address the stand-in claims to settle from (no key behind it; shown in /supported).
FACILITATOR_SIGNER = SETTLER_ADDRESS


class FacilitatorClient:
    """Verify and settle through a facilitator over HTTP. Never raises: an unreachable or
    confused facilitator is a refusal (``unexpected_verify_error``/``unexpected_settle_error``)."""

    def __init__(self, url: str, *, timeout: float = _TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    async def _post(
        self, step: str, raw: dict[str, Any], requirements: PaymentRequirements
    ) -> dict[str, Any] | None:
        body = {
            "x402Version": 2,
            "paymentPayload": raw,
            "paymentRequirements": requirements.to_wire(),
        }
        try:
            # A client per call: the gate may live on any event loop, and calls are rare.
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.post(f"{self.url}/{step}", json=body)
            answer = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        return answer if isinstance(answer, dict) else None

    async def verify(
        self, raw: dict[str, Any], requirements: PaymentRequirements, payer: str
    ) -> tuple[str | None, str]:
        """(invalid reason or None, payer) as the facilitator's /verify answers."""
        answer = await self._post("verify", raw, requirements)
        if answer is None or not isinstance(answer.get("isValid"), bool):
            return VERIFY_UNAVAILABLE, payer
        payer = str(answer.get("payer") or payer)
        if not answer["isValid"]:
            return str(answer.get("invalidReason") or "invalid_payload"), payer
        return None, payer

    async def settle(
        self, raw: dict[str, Any], requirements: PaymentRequirements, payer: str
    ) -> SettlementResponse:
        """The facilitator's /settle receipt (a failed one when it cannot be read)."""
        answer = await self._post("settle", raw, requirements)
        try:
            if answer is None:
                raise ProtocolError("no answer")
            return SettlementResponse.from_wire(answer)
        except ProtocolError:
            return SettlementResponse(
                False, "", requirements.network, payer=payer, error_reason=SETTLE_UNAVAILABLE
            )


@dataclass
class FacilitatorCalls:
    """How often each endpoint was called (tests check the emulator really went through it)."""

    verify: int = 0
    settle: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)


class _Facilitator:
    def __init__(self, chain: Chain, clock: Callable[[], float]) -> None:
        self.chain = chain
        self.clock = clock
        self.calls = FacilitatorCalls()

    async def _read(
        self, request: Request
    ) -> tuple[dict[str, Any], PaymentRequirements | None] | Response:
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": "invalid_request", "message": "body is not JSON"}, 400)
        if not isinstance(body, dict) or not isinstance(body.get("paymentPayload"), dict):
            return JSONResponse(
                {"error": "invalid_request", "message": "want paymentPayload and requirements"},
                400,
            )
        self.calls.bodies.append(body)
        wire = body.get("paymentRequirements")
        try:
            requirements = PaymentRequirements.from_wire(wire if isinstance(wire, dict) else {})
        except ProtocolError:
            requirements = None
        return body, requirements

    def _verify(
        self, body: dict[str, Any], requirements: PaymentRequirements | None
    ) -> VerifyResult:
        if requirements is None:
            return VerifyResult(False, INVALID_PAYMENT_REQUIREMENTS, None)
        result = verify_payment(body["paymentPayload"], requirements, now=int(self.clock()))
        if result.is_valid:
            reason = self.chain.check(PaymentPayload.from_wire(body["paymentPayload"]))
            if reason is not None:
                return VerifyResult(False, reason, result.payer)
        return result

    async def verify(self, request: Request) -> Response:
        """POST /verify: ``{isValid, invalidReason?, payer?}`` (200 for any well-formed body)."""
        read = await self._read(request)
        if isinstance(read, Response):
            return read
        self.calls.verify += 1
        return JSONResponse(self._verify(*read).to_wire())

    async def settle(self, request: Request) -> Response:
        """POST /settle: a SettlementResponse, always 200 for a well-formed body."""
        read = await self._read(request)
        if isinstance(read, Response):
            return read
        self.calls.settle += 1
        body, requirements = read
        network = requirements.network if requirements else ""
        result = self._verify(body, requirements)
        if not result.is_valid or requirements is None:
            receipt = SettlementResponse(
                False, "", network, payer=result.payer, error_reason=result.invalid_reason
            )
            return JSONResponse(receipt.to_wire())
        payload = PaymentPayload.from_wire(body["paymentPayload"])
        try:
            tx_hash = self.chain.transfer_with_authorization(payload, requirements)
        except ChainRejected as exc:
            receipt = SettlementResponse(
                False, "", network, payer=result.payer, error_reason=exc.reason
            )
        else:
            receipt = SettlementResponse(
                True, tx_hash, network, payer=result.payer, amount=payload.authorization.value
            )
        return JSONResponse(receipt.to_wire())

    async def supported(self, request: Request) -> Response:
        """GET /supported: the kinds this facilitator settles."""
        return JSONResponse(
            {
                "kinds": [
                    {"x402Version": 2, "scheme": "exact", "network": self.chain.token.network}
                ],
                "extensions": [],
                "signers": {"eip155:*": [FACILITATOR_SIGNER]},
            }
        )


def create_facilitator_app(chain: Chain, *, clock: Callable[[], float] = time.time) -> Starlette:
    """The stand-in facilitator over ``chain``; ``app.state.calls`` counts the calls."""
    facilitator = _Facilitator(chain, clock)
    app = Starlette(
        routes=[
            Route("/verify", facilitator.verify, methods=["POST"]),
            Route("/settle", facilitator.settle, methods=["POST"]),
            Route("/supported", facilitator.supported, methods=["GET"]),
        ]
    )
    app.state.calls = facilitator.calls
    return app


@dataclass
class RunningFacilitator:
    """A stand-in facilitator listening at ``url``; a context manager that stops it."""

    url: str
    chain: Chain
    calls: FacilitatorCalls
    _servers: BackgroundServers = field(repr=False)

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        self._servers.stop()

    def __enter__(self) -> RunningFacilitator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_facilitator(
    chain: Chain | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> RunningFacilitator:
    """Serve a stand-in facilitator in a background thread; returns once it listens.

    Raises OSError when the port is taken, RuntimeError when the server fails to start.
    """
    chain = chain or Chain()
    app = create_facilitator_app(chain)
    servers = BackgroundServers([(app, port)], host=host).start()
    return RunningFacilitator(servers.urls[0], chain, app.state.calls, servers)
