"""Shared helpers of the gateway tests (imported by the other test_gateway_* modules).

The ``gateway`` fixture of each module wraps an httpx client on the running emulator; ``pay``
does the x402 handshake with a real signature from tests/emulator/conftest.py's payer.
"""

from __future__ import annotations

from typing import Any

import httpx

from x402lab.x402.codec import decode_header

ATOMIC = 1_000_000


class Gateway:
    """An httpx client on the gateway plus the 402 handshake."""

    def __init__(self, client: httpx.Client, payer: Any) -> None:
        self.client = client
        self.payer = payer

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.post(path, **kwargs)

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.get(path, **kwargs)

    def challenge(self, path: str, **kwargs: Any) -> dict[str, Any]:
        """The decoded Payment-Required header of an unpaid POST (asserts a 402)."""
        response = self.client.post(path, **kwargs)
        assert response.status_code == 402, response.text
        return decode_header(response.headers["payment-required"])

    def amount(self, path: str, **kwargs: Any) -> int:
        """accepts[0].amount of the unpaid POST's challenge, in atomic units."""
        return int(self.challenge(path, **kwargs)["accepts"][0]["amount"])

    def pay(self, path: str, *, header: str = "PAYMENT-SIGNATURE", **kwargs: Any) -> httpx.Response:
        """Spends test money: unpaid POST, sign the challenge, repeat with the payment header."""
        challenge = self.challenge(path, **kwargs)
        headers = {header: self.payer.header(challenge)}
        return self.client.post(path, headers=headers, **kwargs)


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The JSON error body, asserting its status and code (and a message)."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert body["error"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    return body


def receipt_of(response: httpx.Response) -> dict[str, Any]:
    return decode_header(response.headers["payment-response"])
