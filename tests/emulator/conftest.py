"""Fixtures for the emulator tests: payers that sign real payments, and a gate test server."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from x402lab.emulator.chain import Chain
from x402lab.emulator.payments import PaymentGate
from x402lab.emulator.serving import BackgroundServers
from x402lab.emulator.settings import EmulatorSettings
from x402lab.x402.codec import decode_header, encode_header
from x402lab.x402.models import PaymentPayload, PaymentRequirements, normalize_challenge
from x402lab.x402.signing import KeySigner, new_nonce, sign_payment


class Payer:
    """Signs x402 payments for a challenge, with a fixed test key and the real clock."""

    def __init__(self, key: bytes) -> None:
        self.signer = KeySigner(key)
        self.address = self.signer.address

    def sign(
        self,
        challenge: Mapping[str, Any],
        *,
        now: float | None = None,
        nonce: str | None = None,
        changes: Mapping[str, Any] | None = None,
    ) -> PaymentPayload:
        """A payload for ``challenge`` (a 402 header or body dict); ``changes`` alter the
        accepts[0] wire entry before signing (to pay less, or someone else)."""
        parsed = normalize_challenge(challenge)
        requirements = parsed.accepts[0]
        if changes:
            requirements = PaymentRequirements.from_wire({**requirements.to_wire(), **changes})
        return sign_payment(
            parsed,
            requirements,
            self.signer,
            now=int(time.time() if now is None else now),
            nonce=nonce or new_nonce(),
        )

    def header(self, challenge: Mapping[str, Any], **kwargs: Any) -> str:
        """The base64 payment header value for ``challenge`` (see ``sign``)."""
        return encode_header(self.sign(challenge, **kwargs).to_wire())


def challenge_of(response: httpx.Response) -> dict[str, Any]:
    """The decoded Payment-Required header of a 402."""
    assert response.status_code == 402, response.text
    return decode_header(response.headers["payment-required"])


def receipt_of(response: httpx.Response) -> dict[str, Any]:
    """The decoded PAYMENT-RESPONSE header."""
    return decode_header(response.headers["payment-response"])


@pytest.fixture
def payer() -> Payer:
    return Payer(bytes.fromhex("11" * 32))


@pytest.fixture
def other_payer() -> Payer:
    return Payer(bytes.fromhex("22" * 32))


@pytest.fixture
def helpers() -> Any:
    """``challenge_of`` and ``receipt_of`` for test modules (conftest is not importable)."""

    @dataclass(frozen=True)
    class Helpers:
        challenge_of: Callable[[httpx.Response], dict[str, Any]] = challenge_of
        receipt_of: Callable[[httpx.Response], dict[str, Any]] = receipt_of

    return Helpers()


@dataclass
class GateServer:
    """A tiny app behind one PaymentGate: POST/GET /paid?price=N charges N atomic units."""

    url: str
    gate: PaymentGate
    chain: Chain
    settings: EmulatorSettings


def _gate_app(gate: PaymentGate) -> Starlette:
    async def paid(request: Request) -> Response:
        price = int(request.query_params.get("price", "10000"))
        charge = await gate.charge(
            request,
            amount_atomic=price,
            description="Test resource",
            extensions={"priceMult": 0.5},
        )
        if charge.response is not None:
            return charge.response
        return gate.finish(JSONResponse({"ok": True, "payer": charge.payer}), charge)

    async def stats(request: Request) -> Response:
        return JSONResponse(gate.stats())

    return Starlette(
        routes=[
            Route("/paid", paid, methods=["GET", "POST"]),
            Route("/stats", stats, methods=["GET"]),
        ],
        middleware=gate.middleware(),
    )


@pytest.fixture
def gate_server() -> Iterator[Callable[..., GateServer]]:
    """Start a GateServer: ``gate_server(settings=None, *, chain=None, clock=time.time)``."""
    running: list[BackgroundServers] = []

    def start(
        settings: EmulatorSettings | None = None,
        *,
        chain: Chain | None = None,
        clock: Callable[[], float] = time.time,
    ) -> GateServer:
        settings = settings or EmulatorSettings()
        chain = chain or Chain.for_settings(settings)
        gate = PaymentGate(settings, chain, service="test", clock=clock)
        servers = BackgroundServers([(_gate_app(gate), 0)]).start()
        running.append(servers)
        return GateServer(servers.urls[0], gate, chain, settings)

    yield start
    for servers in running:
        servers.stop()
