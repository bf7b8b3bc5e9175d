"""``PaymentHeaders`` writes the header ``encode_header(payload.to_wire())`` would, byte for
byte, while encoding a challenge's echoed parts (its input schemas) once per challenge."""

from __future__ import annotations

from typing import Any

import pytest

from x402lab.x402.codec import encode_header
from x402lab.x402.headers import PaymentHeaders
from x402lab.x402.models import normalize_challenge
from x402lab.x402.signing import KeySigner, new_nonce, sign_payment
from x402lab.x402.tokens import BASE_USDC

ENTRY = {
    "scheme": "exact",
    "network": BASE_USDC.network,
    "asset": BASE_USDC.address,
    "amount": "10000",
    "payTo": "0xf4C9A2DcAa9B9DD3Da5ffFB061B2d01246251973",
    "maxTimeoutSeconds": 300,
    "extra": {"name": BASE_USDC.name, "version": BASE_USDC.version},
}
SCHEMA = {"bazaar": {"info": {"input": {"type": "object", "note": "é ✓"}}, "schema": {}}}


@pytest.mark.parametrize(
    "wire",
    [
        {"x402Version": 2, "accepts": [ENTRY]},
        {"x402Version": 2, "accepts": [ENTRY], "extensions": {}},
        {
            "x402Version": 2,
            "resource": {"url": "http://127.0.0.1/x", "description": "chat"},
            "accepts": [ENTRY, {**ENTRY, "amount": "20000"}],
            "extensions": {"upstreamUsd": 0.001, **SCHEMA},
        },
    ],
    ids=["bare", "empty extensions", "resource and schemas"],
)
def test_headers_match_the_plain_encoding(wire: dict[str, Any]) -> None:
    signer = KeySigner(bytes.fromhex("33" * 32))
    challenge = normalize_challenge(wire)
    headers = PaymentHeaders(size=1)
    for requirements in (*challenge.accepts, challenge.accepts[0]):  # a miss, then hits
        payload = sign_payment(
            challenge, requirements, signer, now=1_800_000_000, nonce=new_nonce()
        )
        assert headers.encode(payload, challenge, requirements) == encode_header(payload.to_wire())
