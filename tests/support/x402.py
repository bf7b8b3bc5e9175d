"""Constants and builders for the x402 protocol tests (no network, no clock)."""

from __future__ import annotations

from typing import Any

from x402lab.x402 import BASE_USDC

# A throwaway test key; never funded anywhere.
TEST_KEY_HEX = "0x" + "01" * 32
TEST_ADDRESS = "0x1a642f0E3c3aF545E7AcBD38b07251B3990914F1"
PAY_TO = "0xF2d034A098683517C13FDA4a4f6545BD14bAf355"
OTHER = "0x000000000000000000000000000000000000dEaD"
NOW = 1_800_000_000
NONCE = "0x" + "ab" * 32


def entry(**overrides: Any) -> dict[str, Any]:
    """A standard v2 accepts[] entry for Base USDC, with ``overrides`` applied (None deletes)."""
    base: dict[str, Any] = {
        "scheme": "exact",
        "network": "eip155:8453",
        "amount": "10000",
        "asset": BASE_USDC.address,
        "payTo": PAY_TO,
        "maxTimeoutSeconds": 300,
        "extra": {"name": "USD Coin", "version": "2"},
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def challenge_wire(*entries: dict[str, Any], **top: Any) -> dict[str, Any]:
    """A standard v2 challenge object around ``entries`` (default: one standard entry)."""
    out: dict[str, Any] = {
        "x402Version": 2,
        "error": "PAYMENT-SIGNATURE header is required",
        "resource": {"url": "https://api.example.test/v1/data", "description": "demo"},
        "accepts": list(entries) or [entry()],
    }
    out.update(top)
    return {k: v for k, v in out.items() if v is not None}
